"""eval_run: score every retrieval regime of one index version on the benchmarks; gates.

Regimes are rows of one run, not a second partition dimension: they must be compared on the
same chunks and questions at the same moment, share one embedding of each question, and make
one scorecard. A regime dimension would multiply runs and scatter that comparison.

A benchmark whose every input is identical to one an earlier version already scored (same
content hashes upstream, configuration, questions, code: ``rag/evaluate/reuse.py``) is read
back instead of asked again, so an unchanged rebuild re-asks nothing; ``reused_rows`` and the
coverage table say which version measured each benchmark. The run itself is
``rag/evaluate/eval_job.py``, what to run ``eval_plan.py``, the frames, tables and gates
``eval_tables.py``; this adapter reads lineage and writes the metadata.
"""

import dagster as dg
import polars as pl

from ...rag.evaluate import eval_plan, eval_tables
from ...rag.evaluate.eval_job import IndexesMissing, evaluate_version
from ...rag.evaluate.eval_plan import EvalOutcome, EvalPlan
from ...rag.evaluate.eval_tables import (
    coverage_frame,
    eval_data_version,
    gate_frame,
    headline,
    metric_table_for,
    regime_hashes,
    slice_table,
)
from ...rag.evaluate.evaluation import degraded_reasons, scorecard
from ...rag.judge.judge_backends import chosen_backend
from ...rag.search.retrieval_settings import RetrievalSettings
from ..asset_lineage import data_versions, lineage_metadata, materialization_path, upstream_lineage
from ..partitions import index_version
from ..reporting import floats, log_progress, md_table, run_link
from ..resources import DataHomeResource, StageGraphResource
from .answer_report import answer_metadata, lineage_tables


class EvalRunConfig(dg.Config):
    """The library's ``EvalPlan`` as Dagster run config: every default is the plan's (one home)."""

    benchmarks: list[str] = list(EvalPlan.benchmarks)
    regimes: list[str] = list(EvalPlan.regimes)
    k: int = EvalPlan.k
    serving_config: str = EvalPlan.serving_config  # what the release would serve; gates judge regime "serving"
    serving_k: int = EvalPlan.serving_k
    # Tuning experiments recorded as extra regimes of this run: name -> overrides of a named
    # config, e.g. {"alpha-0.4": {"base": "hybrid-weighted", "alpha": 0.4}}.
    experiments: dict[str, dict] = {}
    # Read back a benchmark an earlier version scored from identical inputs and code, instead of
    # asking it again (latencies are then the earlier run's: see the coverage table).
    reuse_identical: bool = EvalPlan.reuse_identical
    # Benchmarks answered by the serving answerer, judged by support_judge and scored (TRACe,
    # correctness, citations, safety). None: the benchmarks above plus the adversarial safety
    # set; an empty list skips answers (their gates are then unmeasured and fail).
    answer_benchmarks: list[str] | None = None
    # Gate fire drill: "unsupported-sentence" or "no-citations" damages every answer, and the
    # critical answer gates must then refuse the release.
    answer_fault: str = EvalPlan.answer_fault
    # Who judges the answers: "trained" (the version's support judge) or "claude" (needs
    # ANTHROPIC_API_KEY; docs/answers.md "Claude judge"); empty: INFRA_RAG_JUDGE_BACKEND, else trained.
    judge_backend: str = EvalPlan.judge_backend

    def plan(self) -> EvalPlan:
        """The same settings as the library's plain plan, which knows nothing of Dagster."""
        return EvalPlan(**self.model_dump())


def experiment_configs(config: EvalRunConfig) -> list[RetrievalSettings]:
    """The run's tuning experiments as retrieval configs (see ``eval_plan.experiment_configs``)."""
    return eval_plan.experiment_configs(config.experiments)


@dg.asset(
    partitions_def=index_version,
    deps=["vectors", "lexical_index", "abstention_calibration", "page_ranker", "support_judge", "answer_reader"],
    group_name="evaluation",
    kinds={"duckdb", "python"},
    owners=["team:search-platform"],
    description="Scores dense, lexical, hybrid-RRF, hybrid-weighted, hybrid-page and hybrid+rerank retrieval of this "
    "index version on the k8s-docs-rag-bench eval split and our own labelled sets, and the answers the serving "
    "config gives (adherence, TRACe, correctness, citation validity, safety; judged by the version's support "
    "judge): per-question rows and metrics in DuckDB, the scorecards as metadata, the path from each answer's "
    "cited pages to their bytes (questions, cited_pages), lineage to every upstream materialization.",
)
def eval_run(
    context: dg.AssetExecutionContext, config: EvalRunConfig, store: DataHomeResource, stage_graph: StageGraphResource
) -> dg.MaterializeResult:
    version, run_id, home = context.partition_key, context.run.run_id, store.data_home()
    lineage = upstream_lineage(context.instance, version, stage_graph.upstream_of("eval_run"))
    try:  # a claude judge without a key fails here, before any scoring
        backend = chosen_backend(config.judge_backend or None)
    except (ValueError, RuntimeError) as exc:
        raise dg.Failure(str(exc)) from None
    try:
        run = evaluate_version(
            config.plan(), home, version, run_id, data_versions(lineage), backend, log=context.log.info,
            progress=lambda label, every: log_progress(context, label, every),
        )  # fmt: skip
    except IndexesMissing as exc:
        raise dg.Failure(str(exc)) from None
    warehouse, engine = home.warehouse(), run.engine
    return dg.MaterializeResult(
        metadata={
            **floats(headline(metric_table_for(warehouse, version))),
            **_report_metadata(run.retrieval, run.results, run.metrics, degraded_reasons(engine, run.retrieval.runs)),
            **answer_metadata(run.answers, run.answer_rows, run.answer_metrics, run.judge_note),
            **lineage_tables(run.answer_rows, run.results, _pages(warehouse, version), _pages_link(lineage, version)),
            **lineage_metadata(lineage, version),
            "retrieval_configs": dg.MetadataValue.json(regime_hashes(run.results)),
            "eval_run": run_link(run_id),
            "serving_config": f"{config.serving_config} (k={config.serving_k})",
            "judge_backend": backend,
            # The floor the serving regime (and so the abstention gates) was judged at.
            "abstention_floor": str(engine.resolve(config.serving_config).floor),
            "abstention_floor_calibrated": engine.calibration is not None,
        },
        data_version=dg.DataVersion(
            eval_data_version([r["data_version"] for r in lineage], [*run.retrieval.runs, *run.answers.runs])
        ),
    )


def _pages(warehouse, version: str) -> pl.DataFrame:
    return warehouse.frame("SELECT doc_id, bytes_hash, url FROM source_pages WHERE index_version = ?", [version])


def _pages_link(lineage: list[dict], version: str) -> str:
    """The source_pages materialization of this version (where every cited page's bytes were read)."""
    row = next((r for r in lineage if r["asset"] == "source_pages" and r["run_id"]), None)
    return materialization_path("source_pages", version, row["epoch"]) if row else ""


def _report_metadata(outcome: EvalOutcome, results: pl.DataFrame, metrics: pl.DataFrame, reasons: dict) -> dict:
    """Scorecard (with why a regime degraded), row counts, coverage and the per-slice tables."""
    return {
        "scorecard": dg.MetadataValue.md(scorecard(outcome.runs, reasons=reasons)),
        "degraded_reasons": dg.MetadataValue.json(reasons),
        "dagster/row_count": len(results),
        "coverage": md_table(coverage_frame(outcome)),
        "reused_rows": outcome.reused_rows,
        **{f"by_{name}": md_table(slice_table(metrics, name), 30) for name in ("project", "category", "page_kind")},
    }


def _gate_result(outcomes: list, severity: str) -> dg.AssetCheckResult:
    chosen = [o for o in outcomes if o.gate.severity == severity]
    failed = [o for o in chosen if not o.passed]
    return dg.AssetCheckResult(
        passed=not failed,
        severity=dg.AssetCheckSeverity.ERROR if severity == "critical" else dg.AssetCheckSeverity.WARN,
        metadata={
            "gates": md_table(gate_frame(chosen), 50),
            "failed": ", ".join(o.gate.name for o in failed) or "none",
            # Each gate's measured value as a float (plotted across versions); unmeasured: absent.
            **floats({o.gate.name: o.value for o in chosen}),
            "passed_gates": dg.MetadataValue.int(len(chosen) - len(failed)),
        },
    )


@dg.asset_check(
    asset=eval_run,
    blocking=True,
    partitions_def=index_version,
    description="Critical gates of gates.yaml (settings.gates_file) (floors and no-regression vs the current "
    "release). Blocking: a failing candidate cannot materialize release.",
)
def critical_gates(context: dg.AssetCheckExecutionContext, store: DataHomeResource) -> dg.AssetCheckResult:
    return _gate_result(eval_tables.gate_outcomes(store.data_home().warehouse(), context.partition_key), "critical")


@dg.asset_check(
    asset=eval_run,
    partitions_def=index_version,
    description="Warning gates of gates.yaml: reported, never blocking.",
)
def warning_gates(context: dg.AssetCheckExecutionContext, store: DataHomeResource) -> dg.AssetCheckResult:
    return _gate_result(eval_tables.gate_outcomes(store.data_home().warehouse(), context.partition_key), "warning")
