"""Abstention: the per-version floor (derivation, calibration file) and answerability signals."""

from __future__ import annotations

import dataclasses
import json

import pytest

from infra_rag_assets.rag.search.answerability import (
    AnswerabilityRule,
    candidate_words,
    top_pages_agree,
    unanswerable_reason,
    unknown_terms,
)
from infra_rag_assets.rag.search.calibration import (
    calibrate,
    derive_floor,
    quantiles,
    read_calibration,
    write_calibration,
)
from infra_rag_assets.rag.search.retrieval_settings import NAMED_CONFIGS, RetrievalSettings

pytestmark = pytest.mark.unit


class FakeVocabulary:
    """ident terms and stemmed prose terms the 'corpus' holds, and the words that are near a corpus
    term (a typo). Tantivy's fuzzy match itself is tested on a real index
    (test_rag_lexical_store.py, ``LexicalSearcher.has_near_term``); here it is a given."""

    def __init__(self, ident=(), prose=(), near=()):
        self.ident, self.prose, self.near = set(ident), set(prose), set(near)

    def doc_freq(self, field, term):
        return int(term in (self.ident if field == "ident" else self.prose))

    def has_near_term(self, field, term, distance=1):
        return field == "ident" and term in self.near


VOCAB = FakeVocabulary(
    ident={"deployment", "build", "images", "pod", "kubernetes", "container", "write", "back", "inside", "scale"},
    prose={"deploy", "build", "imag", "contain"},
    near={"deploymnet"},  # one transposition from "deployment"
)


# --- floor derivation ------------------------------------------------------------------------


def test_floor_is_the_off_topic_p99_when_answerable_questions_lie_above_it():
    off = [i / 100 for i in range(10, 31)]  # 0.10 .. 0.30: p99 = 0.298
    answerable = [i / 100 for i in range(40, 91)]  # 0.40 .. 0.90: p01 = 0.405
    derived = derive_floor(off, answerable)
    assert derived.separated and derived.off_topic_q99 == pytest.approx(0.298)
    assert derived.answerable_q01 == pytest.approx(0.405)
    assert derived.floor == pytest.approx(0.298) and derived.rule == "off-topic p99"


def test_overlapping_distributions_favour_answering():
    derived = derive_floor([0.2, 0.5, 0.7], [0.4, 0.6, 0.8])
    assert not derived.separated and derived.floor == pytest.approx(derived.answerable_q01)
    assert "overlaps" in derived.rule


def test_a_shifted_cosine_scale_shifts_the_floor():
    """A better-trained model moves every cosine; the floor follows (the fixed 0.35 did not)."""
    off, answerable = [0.05, 0.1, 0.15, 0.2], [0.3, 0.4, 0.5, 0.6]
    base, shifted = derive_floor(off, answerable), derive_floor([c + 0.3 for c in off], [c + 0.3 for c in answerable])
    assert shifted.floor == pytest.approx(base.floor + 0.3, abs=1e-4)


def test_derivation_needs_both_samples():
    with pytest.raises(ValueError):
        derive_floor([], [0.5])
    with pytest.raises(ValueError):
        quantiles([])
    assert quantiles([0.0, 1.0])["p50"] == 0.5


def test_calibration_round_trips_and_damage_is_refused(tmp_path):
    assert read_calibration(tmp_path) is None  # a version without one: the fixed floor applies
    with pytest.raises(FileNotFoundError):
        write_calibration(tmp_path / "missing", calibrate("v1", [0.1, 0.2], [0.5, 0.6]))
    calibration = calibrate(
        "v1", [0.1, 0.2, 0.3], [0.5, 0.6, 0.7], model_hash="abc", sources={"off_topic": {"benchmark": "off_topic"}}
    )
    write_calibration(tmp_path, calibration)
    again = read_calibration(tmp_path)
    assert again == calibration and again.off_topic["benchmark"] == "off_topic" and again.off_topic["n"] == 3
    assert again.rule == AnswerabilityRule()
    (tmp_path / "calibration.json").write_text("{not json")
    with pytest.raises(ValueError, match="unreadable"):
        read_calibration(tmp_path)
    (tmp_path / "calibration.json").write_text(json.dumps({"version": "v1", "floor": "high"}))
    with pytest.raises(ValueError, match="numeric floor"):
        read_calibration(tmp_path)


# --- answerability ---------------------------------------------------------------------------


def test_candidate_words_are_atomic_long_and_not_numbers():
    words = candidate_words("How do I set setWeight on a write-back Rollout in v1.35 with 2048 MiB for DRA?")
    assert "setweight" in words and "rollout" in words
    assert "write-back" not in words and "write" in words  # compounds: their parts are words
    assert "2048" not in words and "dra" not in words and "1.35" not in words  # numbers, < 4 chars


def test_unknown_terms_skip_known_stemmed_and_misspelled_words():
    assert unknown_terms("How do I build container images inside a pod with Kaniko?", VOCAB) == ["kaniko"]
    assert unknown_terms("How do I build images with deployments?", VOCAB) == []  # stem 'deploy' is known
    assert unknown_terms("How do I scale a deploymnet?", VOCAB) == []  # one edit from 'deployment': a typo
    strict = AnswerabilityRule(typo_distance=0)
    assert unknown_terms("How do I scale a deploymnet?", VOCAB, strict) == ["deploymnet"]


def test_unanswerable_reason_names_the_words_and_can_require_disagreement():
    question = "How do I build images in a pod with Kaniko?"
    reason = unanswerable_reason(question, VOCAB)
    assert reason == "question term(s) 'kaniko' occur nowhere in this index version"
    gated = AnswerabilityRule(require_disagreement=True)
    assert unanswerable_reason(question, VOCAB, dense_pages=["a"], lexical_pages=["a"], rule=gated) == ""
    assert unanswerable_reason(question, VOCAB, dense_pages=["a"], lexical_pages=["b"], rule=gated) == reason
    assert unanswerable_reason("How do I build images in a pod?", VOCAB) == ""
    assert top_pages_agree([], []) is False and top_pages_agree(["x", "y"], ["x"]) is True


def test_abstention_knobs_keep_old_config_hashes_and_need_the_lexical_side():
    plain = RetrievalSettings(name="x", floor=0.35)
    assert dataclasses.replace(plain, calibrated_floor=False, answerability=False).config_hash() == plain.config_hash()
    assert dataclasses.replace(plain, calibrated_floor=True).config_hash() != plain.config_hash()
    assert NAMED_CONFIGS["hybrid-page"].answerability and NAMED_CONFIGS["hybrid-page"].calibrated_floor
    assert not NAMED_CONFIGS["lexical"].calibrated_floor
    with pytest.raises(ValueError, match="answerability needs the lexical index"):
        RetrievalSettings(mode="dense", answerability=True)


class _Embedder:
    def encode(self, texts):
        return [[0.0] for _ in texts]


class _Dense:
    embedder = _Embedder()

    def __init__(self, best):
        self.best = best

    def search(self, vector, k, filters=None):
        return [("c1", self.best), ("c2", self.best - 0.1)]


class _Lexical(FakeVocabulary):
    def search(self, question, k, filters=None, boosts=None):
        return [("c1", 9.0)]


CATALOG = {cid: {"chunk_id": cid, "doc_id": f"doc-{cid}", "text": "a pod"} for cid in ("c1", "c2")}


def test_the_retriever_refuses_with_the_reason_of_floor_or_answerability():
    from infra_rag_assets.rag.search.retrieval import Retriever

    config = RetrievalSettings(name="t", floor=0.4, answerability=True)
    lexical = _Lexical(ident=VOCAB.ident, prose=VOCAB.prose, near=VOCAB.near)
    low = Retriever(catalog=CATALOG, config=config, vector_searcher=_Dense(0.3), lexical_searcher=lexical)
    assert low.search("How do I build images in a pod?").abstain_reason == "best dense cosine 0.300 < floor 0.400"
    high = Retriever(catalog=CATALOG, config=config, vector_searcher=_Dense(0.7), lexical_searcher=lexical)
    refused = high.search("How do I build images in a pod with Kaniko?")
    assert refused.abstained and not refused.hits and "'kaniko'" in refused.abstain_reason
    answered = high.search("How do I build images in a pod?")
    assert not answered.abstained and answered.hits[0].chunk_id == "c1"
    off = Retriever(
        catalog=CATALOG,
        config=dataclasses.replace(config, answerability=False),
        vector_searcher=_Dense(0.7),
        lexical_searcher=lexical,
    )
    assert not off.search("How do I build images in a pod with Kaniko?").abstained
