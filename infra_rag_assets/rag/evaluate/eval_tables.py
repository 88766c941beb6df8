"""What an evaluation stores and reports: result and metric frames, slice tables, headline
numbers and gate outcomes (no Dagster).

Gates read a version's metrics back from the warehouse as ``{(regime, slice, metric): value}``
and judge them against the gates file and the currently released version's table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from ... import settings
from ..index.config import stable_hash
from ..operate import releases
from ..operate.warehouse import Warehouse
from . import gates as gate_lib
from .answers.answer_eval import AnswerRun
from .answers.answer_rows import ANSWER_METRICS, answer_summaries
from .eval_plan import EvalOutcome
from .evaluation import BenchmarkRun
from .metrics import METRIC_NAMES

# Headline numbers, emitted as float metadata (plotted across versions in the UI) by eval_run,
# release and serving_release: (regime, slice, metric) as the gates name them.
HEADLINE_METRICS = ("mrr@10", "hit@5", "latency_p95_ms", "abstention_recall")
SLICE_METRICS = ("mrr@10", "hit@5")
SLICE_REGIMES = ("serving", "dense", "lexical")


def eval_frames(runs: Sequence[BenchmarkRun], version: str, run_id: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-question rows and long-format metrics (one row per regime × slice × metric)."""
    results: list[dict] = []
    metrics: list[dict] = []
    for run in runs:
        results += _stamped(run, version, run_id)
        for regime, summaries in run.summaries.items():
            metrics += _metric_rows(summaries, METRIC_NAMES, run.benchmark, regime, version, run_id)
    return (
        pl.DataFrame(results, infer_schema_length=None).drop("ndcg", strict=False),
        pl.DataFrame(metrics, schema=_METRIC_SCHEMA),
    )


def answer_frames(
    runs: Sequence[AnswerRun], version: str, run_id: str, regime: str = "serving"
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-answer rows (``answer_results``) and their metrics in ``eval_metrics``' long format,
    under the ``serving`` regime: the answers are the serving answerer's."""
    results: list[dict] = []
    metrics: list[dict] = []
    for run in runs:
        results += _stamped(run, version, run_id)
        summaries = answer_summaries(run.rows) if run.rows else []
        metrics += _metric_rows(summaries, ANSWER_METRICS, run.benchmark, regime, version, run_id)
    frame = pl.DataFrame(results, infer_schema_length=None)
    lists = [c for c in ("relevant", "cited_chunk_ids", "cited_doc_ids") if c in frame.columns]
    return (
        frame.with_columns(*(pl.col(c).cast(pl.List(pl.String)) for c in lists)),
        pl.DataFrame(metrics, schema=_METRIC_SCHEMA),
    )


def _stamped(run, version: str, run_id: str) -> list[dict]:
    """A run's rows with the version, run and benchmark they belong to."""
    stamp = {
        "index_version": version,
        "run_id": run_id,
        "benchmark": run.benchmark,
        "benchmark_hash": run.benchmark_hash,
    }
    return [{**row, **stamp} for row in run.rows]


def _metric_rows(summaries, names, benchmark: str, regime: str, version: str, run_id: str) -> list[dict]:
    """Long format: one row per slice × metric of ``names``."""
    rows = []
    for summary in summaries:
        slice_name, _, slice_value = summary["slice"].partition("=")
        rows += [
            {
                "index_version": version,
                "run_id": run_id,
                "benchmark": benchmark,
                "regime": regime,
                "slice": slice_name,
                "slice_value": slice_value,
                "metric": metric,
                "value": None if summary.get(metric) is None else float(summary[metric]),
                "n": summary.get("n"),
            }
            for metric in names
        ]
    return rows


_METRIC_SCHEMA = {
    "index_version": pl.String, "run_id": pl.String, "benchmark": pl.String, "regime": pl.String,
    "slice": pl.String, "slice_value": pl.String, "metric": pl.String, "value": pl.Float64, "n": pl.Int32,
}  # fmt: skip


def slice_table(metrics: pl.DataFrame, slice_name: str) -> pl.DataFrame:
    """MRR and hit@5 of the serving, dense and lexical regimes per value of one slice."""
    wanted = metrics.filter(
        (pl.col("slice") == slice_name) & pl.col("metric").is_in(SLICE_METRICS) & pl.col("regime").is_in(SLICE_REGIMES)
    ).with_columns(pl.col("value").round(3))
    if wanted.is_empty():
        return wanted
    return (
        wanted.with_columns((pl.col("regime") + " " + pl.col("metric")).alias("column"), pl.col("n").cast(pl.Int64))
        .pivot(on="column", index=["benchmark", "slice_value", "n"], values="value")
        .sort("benchmark", "slice_value")
    )


def coverage_frame(outcome: EvalOutcome) -> pl.DataFrame:
    """Per benchmark: its hash, questions scored and not in the corpus, and which run measured it."""
    return pl.DataFrame(
        [
            {
                "benchmark": r.benchmark,
                "benchmark_hash": r.benchmark_hash[:12],
                "scored": r.covered,
                "not_in_corpus": r.uncovered,
                "measured_in": outcome.measured_in[r.benchmark],
            }
            for r in outcome.runs
        ]
    )


def regime_hashes(results: pl.DataFrame) -> dict:
    """Regime label -> hash of the retrieval config it ran."""
    return dict(results.select("regime", "retrieval_config_hash").unique().iter_rows()) if len(results) else {}


def eval_data_version(upstream_versions: Sequence[str], runs: Sequence[BenchmarkRun]) -> str:
    """Changes exactly when an upstream data version or a benchmark's content does."""
    return stable_hash([*upstream_versions, *(r.benchmark_hash for r in runs)], 16)


def headline(table: Mapping[tuple[str, str, str], float | None]) -> dict[str, float | None]:
    """The serving regime's overall headline metrics of every benchmark, keyed short enough for
    the UI's metadata column, e.g. ``k8s_bench_eval/mrr@10``."""
    return {
        f"{_benchmark_of(key[1])}/{key[2]}": value
        for key, value in sorted(table.items())
        if key[0] == "serving" and key[1].endswith("overall") and key[2] in HEADLINE_METRICS
    }


def _benchmark_of(overall_slice: str) -> str:
    """The benchmark of an overall slice key (the primary benchmark's is bare ``overall``)."""
    return gate_lib.PRIMARY_BENCHMARK if overall_slice == "overall" else overall_slice.removesuffix("/overall")


def metric_table_for(warehouse: Warehouse, version: str) -> dict[tuple[str, str, str], float | None]:
    """``{(regime, slice, metric): value}`` of the version's eval_run, as gates read it."""
    table = {}
    for b, regime, s, v, metric, value in warehouse.eval_metric_rows(version):
        slice_name = "overall" if s == "overall" else f"{s}={v}"
        table[(regime, gate_lib.slice_key(b, slice_name), metric)] = value
    return table


def gate_outcomes(warehouse: Warehouse, version: str, gates_file: Path | str | None = None) -> list:
    """Every gate of the gates file judged on the version, against the current release (if another)."""
    current = releases.current_release(warehouse)
    baseline = metric_table_for(warehouse, current) if current and current != version else None
    gates = gate_lib.load_gates(gates_file or settings.gates_file())
    sources = (warehouse.version_config(version) or {}).get("sources")
    projects = {s["project"] for s in sources if s.get("project")} if sources else None
    return gate_lib.evaluate_gates(gates, metric_table_for(warehouse, version), baseline, projects)


def gate_frame(outcomes: Sequence[gate_lib.GateOutcome]) -> pl.DataFrame:
    """One row per gate outcome: name, passed, value, baseline, message."""
    return (
        pl.DataFrame(
            [
                {
                    "gate": o.gate.name,
                    "passed": o.passed,
                    "value": o.value,
                    "baseline": o.baseline,
                    "message": o.message,
                }
                for o in outcomes
            ]
        )
        if outcomes
        else pl.DataFrame()
    )
