"""The reader (rag/answer/reader*.py): span location, decoding, abstention and bad inputs.

The model tests use the real bundled MiniLM with one encoder layer, trained for a few steps on
hand-written examples: they prove the plumbing (targets, decoding, calibration record, exact
citations, bounds), not quality, which eval/bench_reader.py measures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from infra_rag_assets.rag.answer.answerers import ANSWERERS, resolve_answerer
from infra_rag_assets.rag.answer.generate import answer
from infra_rag_assets.rag.answer.prompts import ABSTENTION
from infra_rag_assets.rag.answer.reader import Reader, ScoredSpan, answer_reader, pick_spans
from infra_rag_assets.rag.answer.reader_data import build_examples, locate_answer, split_by_page, token_f1
from infra_rag_assets.rag.answer.reader_model import Span, decode
from infra_rag_assets.rag.answer.reader_training import READER_JSON, ReaderRecipe, train_reader
from infra_rag_assets.rag.index.embedding import resolve_model_path

pytestmark = pytest.mark.unit

DEPLOY = (
    "A Deployment provides declarative updates for Pods and ReplicaSets. "
    "The default value of maxSurge is 25%. "
    "Rolling updates replace Pods gradually, so the application stays available."
)
SERVICE = (
    "A Service of type LoadBalancer exposes the frontend outside the cluster. "
    "Type ClusterIP makes the Service reachable only from within the cluster."
)


@dataclass(frozen=True)
class Passage:
    chunk_id: str
    doc_id: str
    text: str
    project: str = "kubernetes"
    title: str = "t"
    section: str = "s"
    url: str = "https://example.test/p"
    start_char: int = 100
    end_char: int = 0


def test_locate_answer_exact_then_fuzzy_then_not_at_all():
    start, end, how, f1 = locate_answer("The default value of maxSurge is 25%.", DEPLOY)
    assert (how, f1) == ("exact", 1.0) and DEPLOY[start:end] == "The default value of maxSurge is 25%"
    start, end, how, f1 = locate_answer("It provides declarative updates for Pods.", DEPLOY)
    assert how == "fuzzy" and 0.5 <= f1 < 1 and DEPLOY[start:end].startswith("provides declarative updates")
    assert locate_answer("Kubelets gossip over QUIC tunnels.", DEPLOY) is None
    assert locate_answer("", DEPLOY) is None


def test_examples_count_what_could_not_be_located_and_add_negatives():
    chunks = [{"doc_id": "kubernetes:deploy", "text": DEPLOY}, {"doc_id": "kubernetes:svc", "text": SERVICE}]
    rows = [
        {"question": "What is the default maxSurge?", "answer": "25%", "source_page": "deploy"},
        {"question": "Which type exposes the frontend?", "answer": "LoadBalancer", "source_page": "svc"},
        {"question": "What does etcd store?", "answer": "Cluster state.", "source_page": "etcd"},
        {"question": "What gossips?", "answer": "Kubelets gossip over QUIC.", "source_page": "deploy"},
    ]
    made = build_examples(rows, chunks, negatives_per_positive=1.0)
    comp = made.composition
    assert comp["exact"] == 2 and comp["negative"] == 2
    assert comp["unlocated_page_not_in_corpus"] == 1 and comp["unlocated_below_alignment_floor"] == 1
    for e in made.examples:
        if e.start >= 0:
            assert e.passage[e.start : e.end] in ("25%", "LoadBalancer")
        else:  # a negative comes from another page than its question's
            assert e.passage != (DEPLOY if e.doc_id == "kubernetes:deploy" else SERVICE)
    train, dev = split_by_page(made.examples, 0.5, 1)
    assert train and dev and not {e.doc_id for e in train} & {e.doc_id for e in dev}


def test_decode_respects_the_span_bound_and_the_null_margin():
    start = np.array([5.0, 0.0, 4.0, 0.0, 0.0, 0.0])
    end = np.array([5.0, 0.0, 0.0, 0.0, 3.0, 0.0])
    offsets = [(0, 0), (0, 3), (4, 8), (9, 12), (13, 17), (0, 0)]
    segments = [None, 1, 1, 1, 1, None]
    best = decode(start, end, offsets, segments, passage=0, max_tokens=3, top=3)[0]
    assert (best.start, best.end) == (4, 17) and best.margin == pytest.approx(7.0 - 10.0)
    short = decode(start, end, offsets, segments, passage=0, max_tokens=2, top=3)[0]
    assert short.end - short.start < 13  # 3 tokens no longer fit
    assert decode(start, end, offsets, [None] * 6, passage=0, max_tokens=3) == []


def test_pick_spans_floors_and_lists():
    passages = [Passage("c1", "kubernetes:svc", SERVICE)]
    a = ScoredSpan(Span(0, 21, 33, 2.0), 0.9, "LoadBalancer")
    b = ScoredSpan(Span(0, 79, 88, 1.0), 0.6, "ClusterIP")
    low = ScoredSpan(Span(0, 0, 9, -3.0), 0.1, "A Service")
    assert pick_spans("Which type exposes it?", [a, b], passages, 0.5) == [a]
    assert pick_spans("Which types are there?", [a, b, low], passages, 0.5) == [a, b]
    assert pick_spans("Which type exposes it?", [low], passages, 0.5) == []


def test_registry_names_one_default(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert ANSWERERS == ("extractive", "reader", "claude")
    assert resolve_answerer() == "reader" and resolve_answerer(use_claude=False) == "reader"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert resolve_answerer() == "claude" and resolve_answerer(use_claude=False) == "reader"
    assert resolve_answerer("extractive") == "extractive"
    with pytest.raises(ValueError):
        resolve_answerer("oracle")
    # no reader loaded: the offline answer is the extractive one, and says so
    assert (
        answer("What is the default maxSurge?", [Passage("c", "d", DEPLOY)], answerer="reader").method == "extractive"
    )


@pytest.fixture(scope="module")
def tiny_reader(tmp_path_factory) -> Path:
    chunks = [{"doc_id": f"kubernetes:p{i}", "text": t} for i, t in enumerate([DEPLOY, SERVICE] * 6)]
    rows = [
        {"question": "What is the default value of maxSurge?", "answer": "25%", "source_page": "p0"},
        {"question": "Which Service type exposes the frontend?", "answer": "LoadBalancer", "source_page": "p1"},
    ] * 8
    made = build_examples(rows, chunks)
    recipe = ReaderRecipe(layers=1, batch_size=8, max_examples=0, dev_share=0.3, train_chars=300)
    target = tmp_path_factory.mktemp("reader") / "r"
    record = train_reader(resolve_model_path("all-MiniLM-L6-v2"), made.examples, target, recipe)
    assert record["training"]["steps"] >= 1 and "dev_span_f1" in record["dev"]
    return target


def _with_floor(folder: Path, floor: float) -> Reader:
    record = json.loads((folder / READER_JSON).read_text())
    (folder / READER_JSON).write_text(json.dumps({**record, "floor": floor}))
    return Reader(folder)


def test_reader_answers_with_an_exact_evidence_citation(tiny_reader):
    reader = _with_floor(tiny_reader, 0.0)  # every span clears: the shape is under test, not quality
    passages = [Passage("c1", "kubernetes:p0", DEPLOY), Passage("c2", "kubernetes:p1", SERVICE)]
    reply = answer_reader("What is the default value of maxSurge?", passages, reader)
    assert reply.outcome == "answered" and reply.method == "reader" and reply.short_answer
    assert reply.text.startswith(reply.short_answer)
    for c in reply.citations:
        text = passages[c.passage_number - 1].text
        assert text[c.chunk_start : c.chunk_end] == c.cited_text and c.doc_start == 100 + c.chunk_start
    assert any(" ".join(reply.short_answer.split()) in " ".join(c.cited_text.split()) for c in reply.citations)
    assert reply.candidates and reply.candidates[0]["probability"] >= 0


@pytest.mark.parametrize(
    "question, count",
    [
        ("What is the default value of maxSurge?", 0),  # no passages
        ("What is the default value of maxSurge?", 10_000),
        ("Why " + "does the rollout of this Deployment stall " * 50, 2),  # ~2,000 characters
        ("Quelle est la valeur par défaut de maxSurge ?", 2),
        ("   ", 2),
    ],
)
def test_bad_inputs_answer_or_abstain_never_crash(tiny_reader, question, count):
    reader = _with_floor(tiny_reader, 0.0)
    passages = [Passage(f"c{i}", f"kubernetes:p{i % 2}", (DEPLOY, SERVICE)[i % 2]) for i in range(count)]
    reply = answer_reader(question, passages, reader)
    assert reply.outcome in ("answered", "abstained")
    if reply.outcome == "abstained":
        assert reply.text == ABSTENTION and not reply.citations
    assert all(c.passage_number <= 8 for c in reply.citations)  # only the packed head is read


def test_an_unreachable_floor_abstains(tiny_reader):
    reader = _with_floor(tiny_reader, 1.01)
    reply = answer_reader("What is the default value of maxSurge?", [Passage("c", "kubernetes:p0", DEPLOY)], reader)
    assert reply.outcome == "abstained" and reply.text == ABSTENTION and reply.candidates


def test_token_f1_is_squad_style():
    assert token_f1("The LoadBalancer.", "loadbalancer") == 1.0 and token_f1("x", "y") == 0.0
