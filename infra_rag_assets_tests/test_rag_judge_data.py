"""The judge's training data: public labelled answers split by source, answer-shaped product
pairs, DEV-fitted thresholds, token labels from spans, and the reference-answer drill answerer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra_rag_assets.rag.answer.records import Answer
from infra_rag_assets.rag.evaluate.answers.answer_faults import reference_answer
from infra_rag_assets.rag.judge.pairs.judge_data import (
    best_threshold,
    by_split,
    data_hash,
    evidence,
    public_pairs,
    row_pairs,
    source_of,
    source_split,
    split_of,
)
from infra_rag_assets.rag.judge.pairs.judge_pairs import SUPPORT, JudgePair
from infra_rag_assets.rag.judge.pairs.product_pairs import NEGATIVE_KINDS, POSITIVE_KINDS, product_pairs
from infra_rag_assets_tests.test_rag_judge import _chunks, _train_rows

pytestmark = pytest.mark.unit

PASSAGE = "The kubelet restarts containers. It checks them every 10 seconds. Logs are kept for a day."


def _ragtruth(model: str, answer: str, spans: list) -> dict:
    return {
        "id": f"ragtruth-qa-777-{model}",
        "question": "how often does the kubelet check containers",
        "passages": [{"id": "p1", "text": PASSAGE}],
        "answer": answer,
        "label": {"adherent": not spans, "spans": spans},
    }


def test_ragtruth_rows_become_sentence_pairs_labelled_by_their_spans():
    answer = "The kubelet checks containers every 10 seconds. It also deletes them every hour."
    start = answer.index("It also")
    row = _ragtruth("gpt-4", answer, [{"start": start + 8, "end": start + 15, "text": "deletes", "type": "x"}])
    pairs = row_pairs(row)
    assert [p.label for p in pairs] == [1, 0]
    assert pairs[1].spans == ((8, 15),) and pairs[1].first[8:15] == "deletes"
    assert pairs[0].second == PASSAGE and pairs[0].kind == "ragtruth_qa_sentence"
    # all six models' answers to one source share its split
    assert source_of(row) == source_of(_ragtruth("llama", "x", [])) == "ragtruth:qa:777"


def test_splits_are_by_source_stable_and_disjoint():
    sources = [f"q{i}" for i in range(2000)]
    names = [split_of(s) for s in sources]
    assert names == [split_of(s) for s in sources]
    share = {n: names.count(n) / len(names) for n in ("train", "dev", "report")}
    assert 0.15 < share["dev"] < 0.25 and 0.15 < share["report"] < 0.25 and share["train"] > 0.5
    pairs = [JudgePair(SUPPORT, "k", "c", "p", i % 2, s) for i, s in enumerate(sources)]
    parts = by_split(pairs)
    seen = [{p.doc_id for p in parts[n]} for n in ("train", "dev", "report")]
    assert not (seen[0] & seen[1]) and not (seen[0] & seen[2]) and not (seen[1] & seen[2])
    train, dev, report = source_split(pairs, 0.2, 0)
    assert len(train) + len(dev) + len(report) == len(pairs) and {p.label for p in dev} == {0, 1}


def test_evidence_keeps_the_sentences_like_the_claim_within_the_limit():
    filler = " ".join(f"Unrelated sentence number {i} about storage classes." for i in range(40))
    text = evidence("The kubelet checks containers every 10 seconds.", [filler, PASSAGE], 300)
    assert len(text) <= 300 and "every 10 seconds" in text
    assert evidence("x", ["a b", "", "c d"], 300) == "a b\n\nc d"


def test_public_pairs_drop_the_halueval_length_shortcut(tmp_path: Path):
    rows = [
        {"id": f"halueval-qa-{i}-{lab}", "question": f"Q{i}?", "passages": [{"id": "k1", "text": "Paris, France."}],
         "answer": answer, "label": {"adherent": bool(lab), "spans": []}}
        for i, (short, long) in enumerate([("Paris", "Lyon"), ("Paris", "It is a long made up sentence about a city.")])
        for lab, answer in ((1, short), (0, long))
    ]  # fmt: skip
    (tmp_path / "halueval_qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = public_pairs(tmp_path)
    assert sorted(p.first for p in pairs) == ["Lyon", "Paris"]  # the long hallucination's question dropped
    assert data_hash(tmp_path) and data_hash(tmp_path) != data_hash(None) == ""


def test_best_threshold_balances_kinds_and_separates():
    probs = [0.9, 0.8, 0.7, 0.35, 0.3, 0.2, 0.1]
    labels = [1, 1, 1, 1, 0, 0, 0]
    assert best_threshold(probs, labels) == 0.35
    # one many-pair kind does not set the cut alone: each kind weighs the same
    at = best_threshold([0.9] * 50 + [0.4, 0.3], [1] * 50 + [1, 0], ["a"] * 50 + ["b", "n"])
    assert 0.3 < at <= 0.4


def test_product_pairs_have_every_answer_shape_labelled_by_construction():
    pairs = product_pairs(_chunks(), _train_rows(), seed=0, window_chars=400)
    kinds = {p.kind for p in pairs}
    assert {"reference", "lead_in", "quote"} <= kinds and kinds & set(NEGATIVE_KINDS)
    assert all(p.label == (p.kind in POSITIVE_KINDS) for p in pairs)
    assert all(p.doc_id.startswith("kubernetes:") and p.task == SUPPORT for p in pairs)
    reference = next(p for p in pairs if p.kind == "reference")
    assert "seconds" in reference.first and "seconds" in reference.second
    assert pairs == product_pairs(_chunks(), _train_rows(), seed=0, window_chars=400)


def test_token_targets_mark_span_tokens_of_known_pairs_only():
    from infra_rag_assets.rag.index.embedding import resolve_model_path
    from infra_rag_assets.rag.judge.judge_training import PREFIX, encode, load_cross_encoder, token_targets

    tokenizer, _ = load_cross_encoder(resolve_model_path("all-MiniLM-L6-v2"), layers=1)
    claim = "The kubelet deletes pods hourly."
    pairs = [
        JudgePair(SUPPORT, "k", claim, PASSAGE, 0, "d", ((12, 19),)),
        JudgePair(SUPPORT, "k", claim, PASSAGE, 1, "d"),
        JudgePair(SUPPORT, "k", claim, PASSAGE, 0, "d"),  # no span labels: unknown tokens
    ]
    enc = encode(tokenizer, [PREFIX[SUPPORT] + claim] * 3, [PASSAGE] * 3, 64, True)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    target, known = token_targets(enc, pairs)
    assert "offset_mapping" not in enc
    marked = [t for t, y in zip(tokens, target[0].tolist()) if y]
    assert "".join(t.lstrip("#") for t in marked) == "deletes" and target[1].sum() == 0 and known[2].sum() == 0
    assert known[0].sum() == known[1].sum() > 5


class _Hit:
    def __init__(self, doc_id: str, text: str) -> None:
        self.chunk_id, self.doc_id, self.url, self.text, self.start_char = f"{doc_id}-0", doc_id, "u", text, 10
        self.end_char = 10 + len(text)


def test_reference_answer_drill_cites_the_page_in_context():
    base = Answer("q", "quoted [1]", [], "answered", "extractive", "", "", "")
    hits = [_Hit("kubernetes:a", "Other page."), _Hit("kubernetes:b", "The page text.")]
    drilled = reference_answer(base, "A  reworded\nanswer.", ["kubernetes:b"], hits)
    assert drilled.text == "A reworded answer. [2]" and drilled.citations[0].passage_number == 2
    c = drilled.citations[0]
    assert (c.chunk_start, c.chunk_end, c.doc_start, c.doc_end) == (0, 14, 10, 24)
    assert reference_answer(base, "Answer.", ["kubernetes:z"], hits) is base  # page not in context


def test_an_uncited_answer_sentence_is_judged_against_its_passages_together_too():
    """`judge --batch` judges an answer sentence without [n] markers against each passage most
    like it and against those passages joined: a sentence that rests on two passages (as the
    judge is trained and measured on the union) is then not judged on half its support."""
    from infra_rag_assets.rag.judge.batch import CANDIDATES, Item, _plan

    passages = (
        ("a", "The kubelet restarts a failed container after a back-off delay."),
        ("b", "The back-off delay doubles each time and is capped at five minutes."),
        ("c", "Grafana dashboards are unrelated to this question."),
    )
    answer = "The kubelet restarts a failed container after a delay that doubles up to five minutes."
    plan = _plan(Item("x", "How does the kubelet restart containers?", passages, answer))
    seconds = [second for _, second in plan["claims"]]
    singles = [text for _, text in passages]
    assert [s for s in seconds if s in singles] == singles[: min(CANDIDATES, 3)]
    joined = [s for s in seconds if s not in singles]
    assert len(joined) == 1 and all(text in joined[0] for text in singles[:2])
    cited = _plan(Item("y", "q", passages, answer + " [1]"))
    assert [second for _, second in cited["claims"]] == [singles[0]]  # a marker says which: no guessing
