"""Retrieval and answer-quality metrics, per question and aggregated (pure Python, no Dagster).

Why page-level: retrieval returns chunks, but benchmarks label *pages* as relevant. A ranking
of chunk hits is therefore first collapsed to its pages in first-seen order, so two chunks of
the same page occupy one rank and a relevant page is never counted twice. Every rank-based
metric below works on that collapsed page ranking.

Why answerable and abstention metrics are split: a question the corpus cannot answer has no
relevant page, so it has no rank; it is judged only on whether the system abstained.
Retrieval metrics are computed over the questions that should *not* abstain, whatever the
system decided, so a change in the abstention policy cannot hide a change in ranking quality.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ..common import percentile
from ..index.analysis import prose_terms

HIT_KS = (1, 5, 10)
RANK_METRICS = ("hit@1", "hit@5", "hit@10", "mrr@10", "ndcg@10")
ABSTENTION_METRICS = ("abstention_precision", "abstention_recall")
OTHER_METRICS = ("answer_support", "latency_p50_ms", "latency_p95_ms")
METRIC_NAMES = (*RANK_METRICS, *ABSTENTION_METRICS, *OTHER_METRICS, "n", "n_answerable", "n_should_abstain")
LOWER_IS_BETTER = frozenset(
    {
        "latency_p50_ms",
        "latency_p95_ms",
        "gap_named_false_rate",
        "answer_error_rate",
        "generation_p95_ms",
        "cost_usd_per_answer",
    }  # fmt: skip
)  # answer metrics among them: answer_rows.ANSWER_METRICS


# --- per question --------------------------------------------------------------------------


def page_ranking(ranked_doc_ids: Iterable[str]) -> list[str]:
    """Doc ids in first-seen order without repeats: chunk hits collapsed to page ranks."""
    return list(dict.fromkeys(ranked_doc_ids))


def rank_of_first_relevant(ranked_doc_ids: Sequence[str], relevant: set[str]) -> int | None:
    """1-based page rank of the first relevant page, or None when none was retrieved."""
    for position, doc_id in enumerate(page_ranking(ranked_doc_ids), start=1):
        if doc_id in relevant:
            return position
    return None


def hit_at(rank: int | None, k: int) -> bool:
    """Whether a relevant page appeared within the first ``k`` pages."""
    return rank is not None and rank <= k


def reciprocal_rank(rank: int | None, k: int = 10) -> float:
    """1/rank when the first relevant page is within ``k``, else 0 (MRR@k per question)."""
    return 1.0 / rank if rank is not None and hit_at(rank, k) else 0.0


def ndcg_at(ranked_doc_ids: Sequence[str], relevant: set[str], k: int = 10) -> float:
    """Binary-gain nDCG@k over the page ranking.

    Each relevant page gains 1/log2(position + 1) once, at its first position; the ideal
    ranking puts min(|relevant|, k) relevant pages first. With no relevant pages the value is
    undefined; 0.0 is returned and callers exclude such questions (see ``summarize``).
    """
    ideal_hits = min(len(relevant), k)
    if ideal_hits == 0:
        return 0.0
    pages = page_ranking(ranked_doc_ids)[:k]
    dcg = sum(1.0 / math.log2(i + 1) for i, d in enumerate(pages, start=1) if d in relevant)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, ideal_hits + 1))
    return dcg / idcg


def answer_support(reference_answer: str, topk_texts: Iterable[str]) -> float:
    """Share of the reference answer's distinct content terms found in the top-k text.

    A cheap, model-free proxy for "does the retrieved text contain the answer": terms are
    lowercased, stop-word-free and stemmed (``prose_terms``) on both sides so "retained" in
    the reference matches "retain" in a chunk. An answer with no content terms scores 0.0.
    """
    wanted = set(prose_terms(reference_answer))
    if not wanted:
        return 0.0
    found = set(prose_terms("\n".join(topk_texts)))
    return len(wanted & found) / len(wanted)


# --- aggregation ---------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _rank_metrics(answerable: list[dict]) -> dict[str, float | None]:
    """Hit@k, MRR@10 and (when rows carry a per-question ``ndcg``) nDCG@10."""
    ranks = [row.get("rank") for row in answerable]
    out: dict[str, float | None] = {f"hit@{k}": _mean([float(hit_at(r, k)) for r in ranks]) for k in HIT_KS}
    out["mrr@10"] = _mean([reciprocal_rank(r, 10) for r in ranks])
    ndcgs = [float(row["ndcg"]) for row in answerable if row.get("ndcg") is not None]
    out["ndcg@10"] = _mean(ndcgs)
    return out


def _abstention_metrics(rows: list[dict]) -> dict[str, float | None]:
    """Positive class = abstained. Precision/recall are None when their denominator is 0."""
    abstained = [r for r in rows if r.get("abstained")]
    should = [r for r in rows if r.get("should_abstain")]
    correct = [r for r in abstained if r.get("should_abstain")]
    return {
        "abstention_precision": len(correct) / len(abstained) if abstained else None,
        "abstention_recall": len(correct) / len(should) if should else None,
    }


def _summary(rows: list[dict]) -> dict[str, Any]:
    """All metrics of one group of per-question rows."""
    answerable = [r for r in rows if not r.get("should_abstain")]
    latencies = [float(r["latency_ms"]) for r in rows if r.get("latency_ms") is not None]
    supports = [float(r["support"]) for r in answerable if r.get("support") is not None]
    return {
        "n": len(rows),
        "n_answerable": len(answerable),
        "n_should_abstain": len(rows) - len(answerable),
        **_rank_metrics(answerable),
        **_abstention_metrics(rows),
        "answer_support": _mean(supports),
        "latency_p50_ms": percentile(latencies, 50),
        "latency_p95_ms": percentile(latencies, 95),
    }


def summarize(rows: list[dict], *, by: str | None = None) -> list[dict]:
    """Aggregate per-question rows, overall or per value of the ``by`` column.

    Rows carry ``rank`` (int | None), ``abstained``, ``should_abstain``, ``latency_ms``,
    ``support`` and optionally ``ndcg`` (per-question nDCG@10). Each output dict has ``slice``
    (``"overall"`` or ``"<by>=<value>"``, the naming gates use), the ``by`` value itself when
    grouping, and every name in ``METRIC_NAMES``; a metric is None when undefined for the
    group (e.g. no answerable question, no abstention, no latency recorded).
    """
    if by is None:
        return [{"slice": "overall", **_summary(rows)}]
    groups: dict[Any, list[dict]] = {}
    for row in rows:
        groups.setdefault(row.get(by), []).append(row)
    return [
        {"slice": f"{by}={value}", by: value, **_summary(groups[value])}
        for value in sorted(groups, key=lambda v: (v is None, str(v)))
    ]
