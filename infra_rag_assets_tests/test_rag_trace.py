"""TRACe, correctness, citation validity and fault drills on real extractive answers."""

from __future__ import annotations

import dataclasses

import pytest

from infra_rag_assets.rag.answer.extractive import answer_extractive
from infra_rag_assets.rag.answer.overlap import token_f1_recall
from infra_rag_assets.rag.answer.pricing import cost_usd
from infra_rag_assets.rag.evaluate.answers.answer_faults import UNSUPPORTED, damage
from infra_rag_assets.rag.evaluate.answers.answer_metrics import ChunkRecord, citations_valid, cited_page_precision
from infra_rag_assets.rag.judge.sentences import answer_sentences, context_sentences, names_gap
from infra_rag_assets.rag.judge.trace import (
    cohen_kappa,
    judged_sentences,
    silver_relevant,
    trace_scores,
    utilized_sentences,
)

pytestmark = pytest.mark.unit

DOC = (
    "# Deployments\n\nIntro line.\n\n"
    "The Deployment updates Pods in a rolling update fashion. You can specify `maxUnavailable` and "
    "`maxSurge` to control the rolling update process. The default value of maxSurge is 25%.\n\n"
    "A ReplicaSet ensures that a specified number of Pod replicas are running at any given time.\n"
)


@dataclasses.dataclass
class P:
    chunk_id: str
    doc_id: str
    project: str
    title: str
    section: str
    url: str
    text: str
    start_char: int
    end_char: int


def passages() -> list[P]:
    first = DOC.index("The Deployment")
    second = DOC.index("A ReplicaSet")
    return [
        P(
            "c1",
            "kubernetes:deploy",
            "kubernetes",
            "Deployments",
            "Rolling",
            "https://k/deploy/#rolling",
            DOC[first:second],
            first,
            second,
        ),  # fmt: skip
        P(
            "c2",
            "kubernetes:deploy",
            "kubernetes",
            "Deployments",
            "RS",
            "https://k/deploy/#rs",
            DOC[second:],
            second,
            len(DOC),
        ),  # fmt: skip
    ]


def lookups(ps):
    return {p.chunk_id: ChunkRecord(p.doc_id, p.url, p.text, p.start_char) for p in ps}, {"kubernetes:deploy": DOC}


def test_extractive_answer_is_cited_exactly_and_used_sentences_are_utilized():
    ps = passages()
    answer = answer_extractive("What is the default value of maxSurge?", ps)
    assert answer.outcome == "answered"
    chunks, docs = lookups(ps)
    assert citations_valid(answer.citations, chunks, docs) == (True, [])
    context = context_sentences(ps)
    used = utilized_sentences(context, answer.citations)
    assert "25%" in " ".join(context[i].text for i in used)
    sentences = answer_sentences(answer.text)
    assert all(s.passages == (1,) for s in sentences) and "Extractive" not in sentences[0].text


def test_citation_problems_are_named():
    ps = passages()
    answer = answer_extractive("What is the default value of maxSurge?", ps)
    chunks, docs = lookups(ps)
    shifted = dataclasses.replace(answer.citations[0], chunk_start=answer.citations[0].chunk_start + 1)
    ok, problems = citations_valid([shifted], chunks, docs)
    assert not ok and "do not hold the cited text" in problems[0]
    stranger = dataclasses.replace(answer.citations[0], chunk_id="nope")
    assert "not in this version" in citations_valid([stranger], chunks, docs)[1][0]
    assert citations_valid([], chunks, docs) == (False, ["no citation"])
    assert "does not hold" in citations_valid(answer.citations, chunks, {"kubernetes:deploy": "x" * len(DOC)})[1][0]


def test_trace_scores_follow_the_definitions():
    ps = passages()
    context = context_sentences(ps)
    assert len(context) == 4
    sentences = answer_sentences("The default value of maxSurge is 25%. [1] It also runs on Mars.")
    trace = trace_scores(context, relevant=[1, 2], utilized=[2], answer=sentences, support=[0.9])
    assert trace.relevance == 0.5 and trace.utilization == 0.25 and trace.completeness == 0.5
    # the uncited second sentence is unsupported by definition: adherence is the product
    assert trace.adherence == 0.0 and trace.adherent is False
    assert trace.unsupported() == ["It also runs on Mars."]
    assert trace_scores(context, [], [], sentences, None).adherence is None
    with pytest.raises(ValueError):
        trace_scores(context, [], [], sentences, [0.9, 0.9])


def test_list_items_and_headings_are_their_own_sentences():
    answer = (
        "Based on the passages, the limits are as follows:\n\n"
        "* Requests reserve capacity on a node\n"
        "* Limits cap what a container\n  may use [1]\n"
        "## Defaults\n"
        "1. The default value of maxSurge is 25%. It rounds up [2]\n"
        "2) maxUnavailable defaults to 25% too"
    )
    sentences = answer_sentences(answer)
    assert [s.text for s in sentences] == [
        "Based on the passages, the limits are as follows:",
        "Requests reserve capacity on a node",
        "Limits cap what a container may use",  # a wrapped line continues its item
        "Defaults",
        "The default value of maxSurge is 25%.",
        "It rounds up",
        "maxUnavailable defaults to 25% too",
    ]
    assert [s.passages for s in sentences] == [(1,), (1,), (1,), (2,), (2,), (2,), ()]
    # a lead-in to a list and a one-word heading state nothing; a colon elsewhere is a claim
    assert [s.is_claim for s in sentences] == [False, True, True, False, True, True, True]
    quote = answer_sentences("After creating the cron job, get its status using this command: kubectl get cronjob")
    assert quote[0].is_claim and answer_sentences("Run the example CronJob by using this command:")[0].is_claim


@pytest.mark.parametrize(
    ("sentence", "gap"),
    [
        ("The indexed documentation does not cover this question.", True),
        ("The retrieved passages do not say how to skip waiting for the rollout.", True),
        ("None of the retrieved passages explains how to rename a context.", True),
        ("There is no information in the docs about GPU sharing.", True),
        ("The provided context does not specify a default.", True),
        # claims about the subject that merely look like it: still judged
        ("The security context does not include privileged mode.", False),
        ("The sources field does not contain more than one repository.", False),
        ("Pods are not covered by the default policy.", False),
        ("The kubelet does not say anything about it.", False),
    ],
)
def test_a_named_gap_is_not_a_claim(sentence, gap):
    assert names_gap(sentence) is gap
    assert answer_sentences(sentence)[0].is_claim is (not gap)


def test_a_gap_statement_does_not_lower_adherence():
    context = context_sentences(passages())
    sentences = answer_sentences("The passages do not say how to change it. The default value of maxSurge is 25%. [1]")
    assert [s.text for s in judged_sentences(sentences)] == ["The default value of maxSurge is 25%."]
    trace = trace_scores(context, [], [], sentences, support=[0.9])
    assert trace.adherence == 0.9 and [v.text for v in trace.sentences] == ["The default value of maxSurge is 25%."]
    only_gap = trace_scores(context, [], [], answer_sentences("The indexed documentation does not cover this."), [])
    assert only_gap.adherence is None  # nothing claimed: nothing to support


def test_silver_labels_and_kappa():
    context = context_sentences(passages())
    silver = silver_relevant(context, "The default maxSurge value is 25% of desired Pods.")
    assert [context[i].text for i in silver] == ["The default value of maxSurge is 25%."]
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == 1.0
    assert cohen_kappa([True, True], [True, True]) is None
    assert cohen_kappa([], []) is None


def test_correctness_is_token_f1_and_recall_without_markers():
    f1, recall = token_f1_recall("Extractive answer (no LLM): The default is 25%. [1]", "25% by default")
    assert recall == pytest.approx(2 / 3) and 0 < f1 < 1
    assert token_f1_recall("anything", "") is None
    assert token_f1_recall("nothing shared", "25%") == (0.0, 0.0)


def test_cited_page_precision_and_cost():
    ps = passages()
    answer = answer_extractive("What is the default value of maxSurge?", ps)
    assert cited_page_precision(answer.citations, ["kubernetes:deploy"]) == 1.0
    assert cited_page_precision(answer.citations, ["kubernetes:other"]) == 0.0
    assert cost_usd("claude-sonnet-4-6", {"input_tokens": 1_000_000, "output_tokens": 0}) == 3.0
    assert cost_usd("some-other-model", {"input_tokens": 5}) is None


def test_fault_drills_damage_answers_but_not_abstentions():
    ps = passages()
    answer = answer_extractive("What is the default value of maxSurge?", ps)
    appended = damage(answer, "unsupported-sentence")
    assert appended.text.endswith(UNSUPPORTED) and appended.citations == answer.citations
    added = answer_sentences(appended.text)[-1]
    assert added.passages == (1,) and added in judged_sentences(answer_sentences(appended.text))
    dropped = damage(answer, "no-citations")
    assert dropped.citations == [] and "[1]" not in dropped.text
    abstained = answer_extractive("Who won the 1998 World Cup?", ps)
    assert damage(abstained, "no-citations") is abstained
    with pytest.raises(ValueError, match="unknown answer fault"):
        damage(answer, "typo")
