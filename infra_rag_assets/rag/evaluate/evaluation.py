"""Score retrieval regimes on benchmarks: per-question rows and summaries (no Dagster).

All regimes run inside one evaluation over the same index version and questions, so they are
compared on identical chunks; each regime embeds the question itself so latencies are honest.
A regime is a named config or an experiment's own RetrievalSettings (its ``name`` labels the rows),
so tuning experiments are recorded as eval_run rows too. Relevance is page-level; only
questions whose relevant page exists in the built
corpus are scored (coverage is reported, the rest are not hidden but counted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .benchmarks import Benchmark, BenchRecord, coverage
from .metrics import answer_support, ndcg_at, rank_of_first_relevant, reciprocal_rank, summarize

REGIMES = ("dense", "lexical", "hybrid-rrf", "hybrid-weighted", "hybrid-page", "hybrid-learned", "hybrid-rerank")
SERVING = "serving"  # pseudo-regime: the config a release would serve, at its serving k
SUPPORT_TOP_K = 5  # answer support is judged on the passages an answer would be built from
SLICES = ("category", "project", "page_kind")


@dataclass
class BenchmarkRun:
    benchmark: str
    benchmark_hash: str
    covered: int
    uncovered: int
    rows: list[dict] = field(default_factory=list)
    summaries: dict[str, list[dict]] = field(default_factory=dict)  # regime -> overall + slices


def project_of(record: BenchRecord) -> str:
    """Project of the relevant page (source name prefix), or 'none' for unanswerable ones."""
    if not record.relevant:
        return "none"
    source = record.relevant[0].split(":", 1)[0]
    return {"prometheus-site": "prometheus", "prometheus-server": "prometheus", "cncf-whitepapers": "cncf"}.get(
        source, source
    )


def label(regime) -> str:
    """Row label of a regime: a named config's name, or an experiment config's ``name``."""
    return regime if isinstance(regime, str) else regime.name


def score_question(engine, record: BenchRecord, regime, k: int = 10) -> dict:
    """One question under one regime -> a per-question row (what eval_results stores).

    Every regime embeds the question itself, so its latency is what serving would see."""
    result = engine.search(record.question, config=regime, k=k)
    ranked = [h.doc_id for h in result.hits]
    relevant = set(record.relevant)
    rank = rank_of_first_relevant(ranked, relevant) if relevant else None
    return {
        "regime": label(regime),
        "retrieval_config_hash": result.config_hash,
        "question_id": record.id,
        "question": record.question,
        "category": record.category,
        "project": project_of(record),
        "page_kind": record.page_kind,
        "relevant": list(record.relevant),
        "ranked_doc_ids": ranked,
        "ranked_chunk_ids": [h.chunk_id for h in result.hits],
        "rank": rank,
        "hit_at_1": rank is not None and rank <= 1,
        "hit_at_5": rank is not None and rank <= 5,
        "hit_at_10": rank is not None and rank <= 10,
        "reciprocal_rank": reciprocal_rank(rank, 10),
        "ndcg_at_10": ndcg_at(ranked, relevant, 10) if relevant else None,
        "abstained": result.abstained,
        "should_abstain": record.should_abstain,
        "degraded": result.degraded,
        "support": answer_support(record.reference_answer, [h.text for h in result.hits[:SUPPORT_TOP_K]])
        if record.reference_answer and relevant
        else None,
        "latency_ms": result.timings_ms.get("total"),
    }


def run_benchmark(
    engine,
    bench: Benchmark,
    known_doc_ids: set[str],
    regimes: Sequence = REGIMES,
    k: int = 10,
    serving: tuple[str, int] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BenchmarkRun:
    """Score every covered record under every regime; ``serving`` = (config name, k) adds the
    ``serving`` pseudo-regime (reusing a regime's rows when it is the same config and k)."""
    covered, uncovered = coverage(bench.records, known_doc_ids)
    run = BenchmarkRun(bench.name, bench.version_hash, len(covered), len(uncovered))
    total, done = len(covered) * len(regimes), 0
    for record in covered:
        for regime in regimes:
            run.rows.append(score_question(engine, record, regime, k))
            done += 1
            if progress:
                progress(done, total)
    labels = [label(r) for r in regimes]
    if serving:
        run.rows += _serving_rows(engine, covered, run.rows, labels, k, *serving)
        labels = [*labels, SERVING]
    for name in labels:
        rows = [_metric_row(r) for r in run.rows if r["regime"] == name]
        run.summaries[name] = summarize(rows) + [s for by in SLICES for s in summarize(rows, by=by)]
    return run


def _serving_rows(engine, covered, rows, regimes, k, config: str, serving_k: int) -> list[dict]:
    if config in regimes and serving_k == k:
        return [{**r, "regime": SERVING} for r in rows if r["regime"] == config]
    return [{**score_question(engine, record, config, serving_k), "regime": SERVING} for record in covered]


def _metric_row(row: dict) -> dict:
    return {**row, "ndcg": row["ndcg_at_10"]}


def scorecard(
    runs: Sequence[BenchmarkRun],
    metrics: Sequence[str] = (
        "n",
        "hit@1",
        "hit@5",
        "hit@10",
        "mrr@10",
        "ndcg@10",
        "abstention_precision",
        "abstention_recall",
        "answer_support",
        "latency_p50_ms",
        "latency_p95_ms",
    ),
    reasons: dict[str, str] | None = None,
) -> str:
    """Markdown: one table per benchmark, a row per regime, overall metrics as columns."""
    parts = []
    for run in runs:
        parts.append(f"**{run.benchmark}** ({run.covered} questions scored, {run.uncovered} not in corpus)\n")
        parts.append("| regime | " + " | ".join(metrics) + " |\n|---|" + "---|" * len(metrics))
        for regime, summaries in run.summaries.items():
            overall = summaries[0]
            degraded = sum(1 for r in run.rows if r["regime"] == regime and r["degraded"])
            why = (reasons or {}).get(regime) or "see degraded_reasons"
            label = f"{regime} (degraded on {degraded} questions: {why})" if degraded else regime
            parts.append(f"| {label} | " + " | ".join(_fmt(overall.get(m)) for m in metrics) + " |")
        parts.append("")
    return "\n".join(parts)


def _fmt(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.1f}" if value > 10 else f"{value:.3f}"
    return str(value)


def degraded_reasons(engine, runs: Sequence[BenchmarkRun]) -> dict[str, str]:
    """Why each regime that served degraded results did (e.g. its cross-encoder is not in the
    offline model cache): one search of a degraded question per regime, its ``degraded_reason``."""
    reasons: dict[str, str] = {}
    for run in runs:
        for row in run.rows:
            regime = row["regime"]
            if row["degraded"] and regime not in reasons and regime != SERVING:
                result = engine.search(row["question"], config=regime, k=10)
                reasons[regime] = result.degraded_reason or "not degraded when asked again"
    return reasons
