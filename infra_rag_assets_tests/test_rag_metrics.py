"""Metrics against hand-computed values (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest

from infra_rag_assets.rag.common import percentile
from infra_rag_assets.rag.evaluate.metrics import (
    METRIC_NAMES,
    answer_support,
    hit_at,
    ndcg_at,
    rank_of_first_relevant,
    reciprocal_rank,
    summarize,
)

pytestmark = pytest.mark.unit

LOG2_3 = math.log2(3)
LOG2_4 = 2.0


def row(rank, *, abstained=False, should_abstain=False, latency_ms=10.0, support=None, ndcg=None):
    return {
        "rank": rank,
        "abstained": abstained,
        "should_abstain": should_abstain,
        "latency_ms": latency_ms,
        "support": support,
        "ndcg": ndcg,
    }


# --- rank ----------------------------------------------------------------------------------


def test_rank_is_by_page_not_by_chunk():
    # chunks: a, a, b, c  -> pages: a(1) b(2) c(3); first relevant page c is page 3, not hit 4
    assert rank_of_first_relevant(["a", "a", "b", "c"], {"c"}) == 3


def test_rank_first_of_several_relevant_and_none():
    assert rank_of_first_relevant(["x", "r2", "r1"], {"r1", "r2"}) == 2
    assert rank_of_first_relevant(["x", "y"], {"r"}) is None
    assert rank_of_first_relevant([], {"r"}) is None
    assert rank_of_first_relevant(["x"], set()) is None


def test_hit_at_and_reciprocal_rank():
    assert hit_at(1, 1) and hit_at(5, 5) and not hit_at(6, 5) and not hit_at(None, 10)
    assert reciprocal_rank(4) == 0.25  # 1/4
    assert reciprocal_rank(10) == 0.1  # rank 10 is inside @10
    assert reciprocal_rank(11) == 0.0  # outside @10
    assert reciprocal_rank(3, k=2) == 0.0
    assert reciprocal_rank(None) == 0.0


# --- nDCG ----------------------------------------------------------------------------------


def test_ndcg_two_relevant_pages():
    # relevant {r1, r2}; pages x, r1, y, r2 -> DCG = 1/log2(3) + 1/log2(5)
    # ideal: r at 1 and 2 -> IDCG = 1/log2(2) + 1/log2(3) = 1 + 0.63093 = 1.63093
    # nDCG = (0.63093 + 0.43068) / 1.63093 = 0.65092
    dcg = 1 / LOG2_3 + 1 / math.log2(5)
    idcg = 1 + 1 / LOG2_3
    got = ndcg_at(["x", "r1", "y", "r2"], {"r1", "r2"})
    assert got == pytest.approx(dcg / idcg)
    assert got == pytest.approx(0.65092, abs=1e-5)


def test_ndcg_duplicate_pages_count_once():
    # chunks r1, r1, x, r2 -> pages r1(1) x(2) r2(3); the second r1 chunk gains nothing
    # DCG = 1 + 1/log2(4) = 1.5 ; IDCG = 1 + 1/log2(3) = 1.63093 ; nDCG = 0.91972
    got = ndcg_at(["r1", "r1", "x", "r2"], {"r1", "r2"})
    assert got == pytest.approx(1.5 / (1 + 1 / LOG2_3))
    assert got == pytest.approx(0.91972, abs=1e-5)


def test_ndcg_perfect_cutoff_and_empty():
    assert ndcg_at(["r1", "r2", "x"], {"r1", "r2"}) == pytest.approx(1.0)
    # k=2 cuts off r at page 3 -> 0
    assert ndcg_at(["x", "y", "r"], {"r"}, k=2) == 0.0
    # ideal is min(|relevant|, k) = 1 when k=1: r1 at 1 -> 1/1
    assert ndcg_at(["r1", "r2"], {"r1", "r2", "r3"}, k=1) == pytest.approx(1.0)
    assert ndcg_at(["x"], set()) == 0.0


def test_ndcg_single_relevant_equals_discount():
    # one relevant page at page 3: DCG = 1/log2(4) = 0.5, IDCG = 1 -> 0.5
    assert ndcg_at(["a", "b", "r"], {"r"}) == pytest.approx(0.5)


# --- answer support ------------------------------------------------------------------------


def test_answer_support_stems_and_drops_stop_words():
    # reference content terms (stemmed): {secret, store, unencrypt, etcd} -> 4 terms
    # top-k text has "secrets" (secret), "stored" (store), "etcd"; not "unencrypted" -> 3/4
    ref = "Secrets are stored unencrypted in etcd."
    texts = ["Kubernetes secrets are", "stored in the etcd data store."]
    assert answer_support(ref, texts) == pytest.approx(0.75)


def test_answer_support_edges():
    assert answer_support("", ["anything"]) == 0.0
    assert answer_support("the and of", ["x"]) == 0.0  # only stop words
    assert answer_support("Pods restart", []) == 0.0
    assert answer_support("Pods restart", ["a pod restarted"]) == 1.0


# --- percentiles ---------------------------------------------------------------------------


def test_percentile_linear_interpolation():
    values = [10.0, 20.0, 30.0, 40.0]
    # p50: position (4-1)*0.5 = 1.5 -> 20 + 0.5*(30-20) = 25
    assert percentile(values, 50) == pytest.approx(25.0)
    # p95: position 3*0.95 = 2.85 -> 30 + 0.85*(40-30) = 38.5
    assert percentile(values, 95) == pytest.approx(38.5)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) is None
    assert percentile([40.0, 10.0, 30.0, 20.0], 0) == 10.0  # order-independent


# --- summarize -----------------------------------------------------------------------------


def test_summarize_overall_hand_computed():
    rows = [
        row(1, latency_ms=10, support=1.0, ndcg=1.0),
        row(3, latency_ms=20, support=0.5, ndcg=0.5),
        row(None, latency_ms=30, support=0.0, ndcg=0.0),
        row(12, latency_ms=40, support=0.5, ndcg=0.0),
        row(None, abstained=True, should_abstain=True, latency_ms=50),
        row(None, abstained=False, should_abstain=True, latency_ms=60),
        row(2, abstained=True, should_abstain=False, latency_ms=70, support=1.0, ndcg=0.6309),
    ]
    [s] = summarize(rows)
    assert s["slice"] == "overall"
    assert (s["n"], s["n_answerable"], s["n_should_abstain"]) == (7, 5, 2)
    # answerable ranks: 1, 3, None, 12, 2
    assert s["hit@1"] == pytest.approx(1 / 5)  # only rank 1
    assert s["hit@5"] == pytest.approx(3 / 5)  # ranks 1, 3, 2
    assert s["hit@10"] == pytest.approx(3 / 5)  # 12 is outside 10
    # MRR@10 = (1 + 1/3 + 0 + 0 + 1/2) / 5 = 1.83333 / 5 = 0.36667
    assert s["mrr@10"] == pytest.approx((1 + 1 / 3 + 0.5) / 5)
    # nDCG mean over answerable rows = (1 + 0.5 + 0 + 0 + 0.6309) / 5 = 0.42618
    assert s["ndcg@10"] == pytest.approx(2.1309 / 5)
    # abstentions: 2 (one correct) -> precision 1/2; should abstain: 2 (one caught) -> recall 1/2
    assert s["abstention_precision"] == pytest.approx(0.5)
    assert s["abstention_recall"] == pytest.approx(0.5)
    # support mean over answerable = (1 + .5 + 0 + .5 + 1) / 5 = 0.6
    assert s["answer_support"] == pytest.approx(0.6)
    # latencies 10..70: p50 = position 3 -> 40; p95 = position 5.7 -> 60 + 0.7*10 = 67
    assert s["latency_p50_ms"] == pytest.approx(40.0)
    assert s["latency_p95_ms"] == pytest.approx(67.0)
    assert set(METRIC_NAMES) <= set(s)


def test_abstention_undefined_cases():
    # nobody abstained and nobody should: both undefined
    [s] = summarize([row(1), row(2)])
    assert s["abstention_precision"] is None and s["abstention_recall"] is None
    # abstained on an answerable question only: precision 0/1, recall undefined
    [s] = summarize([row(1, abstained=True)])
    assert s["abstention_precision"] == 0.0 and s["abstention_recall"] is None
    # one should abstain, the system answered: precision undefined, recall 0/1
    [s] = summarize([row(None, should_abstain=True)])
    assert s["abstention_precision"] is None and s["abstention_recall"] == 0.0
    # only unanswerable questions: answerable metrics undefined, not zero
    assert s["hit@5"] is None and s["mrr@10"] is None and s["answer_support"] is None


def test_summarize_without_ndcg_or_latency():
    [s] = summarize([{"rank": 1, "abstained": False, "should_abstain": False}])
    assert s["ndcg@10"] is None and s["latency_p95_ms"] is None and s["hit@1"] == 1.0


def test_summarize_by_slice():
    rows = [dict(row(1), category="argocd"), dict(row(None), category="argocd"), dict(row(4), category="prometheus")]
    out = summarize(rows, by="category")
    assert [s["slice"] for s in out] == ["category=argocd", "category=prometheus"]
    argocd, prometheus = out
    assert argocd["category"] == "argocd" and argocd["n"] == 2
    assert argocd["hit@1"] == 0.5  # ranks 1 and None
    assert prometheus["mrr@10"] == 0.25  # rank 4
    assert summarize([], by="category") == []
