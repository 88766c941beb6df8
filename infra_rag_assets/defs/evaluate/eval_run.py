"""eval_run: score every retrieval regime of one index version on the benchmarks; gates.

Regimes are rows of one run, not a second partition dimension: they must be compared on the
same chunks and questions at the same moment, share one embedding of each question, and make
one scorecard. A regime dimension would multiply runs and scatter that comparison.

A benchmark whose every input is identical to one an earlier version already scored (same
content hashes upstream, configuration, questions, code: ``rag/evaluate/reuse.py``) is read
back instead of asked again, so an unchanged rebuild re-asks nothing; ``reused_rows`` and the
coverage table say which version measured each benchmark.
"""

from datetime import UTC

import dagster as dg
import polars as pl

from ... import settings
from ...rag.evaluate import gates as gate_lib
from ...rag.evaluate.benchmarks import load_benchmark
from ...rag.evaluate.evaluation import REGIMES, BenchmarkRun, run_benchmark, scorecard
from ...rag.evaluate.metrics import METRIC_NAMES
from ...rag.evaluate.reuse import content_key, degraded_regimes, load_run, probe_degraded, save_run
from ...rag.index.config import stable_hash
from ...rag.operate import releases
from ..partitions import index_version
from ..reporting import floats, log_progress, md_table, run_link, ui_url
from ..resources import PROJECT_ROOT, RagStore

UPSTREAM = ("source_pages", "documents", "chunks", "vectors", "lexical_index", "abstention_calibration",
            "page_ranker")
# Headline numbers, emitted as float metadata (plotted across versions in the UI) by eval_run,
# release and serving_release: (regime, slice, metric) as the gates name them.
HEADLINE_METRICS = ("mrr@10", "hit@5", "latency_p95_ms", "abstention_recall")


def headline(table: dict) -> dict[str, float]:
    """The serving regime's overall headline metrics of every benchmark, e.g. ``serving/overall/mrr@10``."""
    return {"/".join(key): value for key, value in sorted(table.items())
            if key[0] == "serving" and key[1].endswith("overall") and key[2] in HEADLINE_METRICS}
ASKED = "this run"
def gates_file() -> str:
    return str(settings.gates_file())


class EvalRunConfig(dg.Config):
    benchmarks: list[str] = ["k8s_bench_eval", "own_labelled", "off_topic", "near_miss_blind"]
    regimes: list[str] = list(REGIMES)
    k: int = 10
    serving_config: str = "hybrid-learned"  # what the release would serve; gates judge regime "serving"
    serving_k: int = 10
    # Tuning experiments recorded as extra regimes of this run: name -> overrides of a named
    # config, e.g. {"alpha-0.4": {"base": "hybrid-weighted", "alpha": 0.4}}.
    experiments: dict[str, dict] = {}
    # Read back a benchmark an earlier version scored from identical inputs and code, instead of
    # asking it again (latencies are then the earlier run's: see the coverage table).
    reuse_identical: bool = True


@dg.asset(
    partitions_def=index_version,
    deps=["vectors", "lexical_index", "abstention_calibration", "page_ranker"],
    group_name="evaluation",
    kinds={"duckdb", "python"},
    owners=["team:search-platform"],
    description="Scores dense, lexical, hybrid-RRF, hybrid-weighted, hybrid-page and hybrid+rerank retrieval of this "
    "index version on the k8s-docs-rag-bench eval split and our own labelled sets: per-question rows "
    "and metrics in DuckDB, the scorecard as metadata, lineage to every upstream materialization.",
)
def eval_run(context: dg.AssetExecutionContext, config: EvalRunConfig, store: RagStore) -> dg.MaterializeResult:
    from ...rag.search.engine import QueryEngine, one_torch_thread

    version, run_id = context.partition_key, context.run.run_id
    missing = _missing_indexes(store, version)
    if missing:  # one line instead of the search library's "table ... was not found" trace
        raise dg.Failure(f"index version {version} has no {' or '.join(missing)} yet: build it first "
                         f"(`infra-rag build --version {version} --through indexes`)")
    warehouse = store.warehouse()
    engine = QueryEngine(store.data_home(), version)
    # Coverage by the built corpus (every page record), not by indexed chunks: a page that
    # parsed to no content is in the corpus, and a question about it is a scored miss.
    known = warehouse.doc_ids(version)
    lineage = upstream_lineage(context.instance, version)
    inputs = _shared_inputs(config, engine, known, lineage, warehouse.version_config(version))
    with one_torch_thread():  # per-question latency as served (see engine.single_thread_queries)
        runs, measured_in = _run_benchmarks(context, config, engine, known, inputs)
    results, metrics = _frames(runs, version, run_id)
    warehouse.replace_partition("eval_results", version, results)
    warehouse.replace_partition("eval_metrics", version, metrics)
    table = metric_table_for(warehouse, version)
    return dg.MaterializeResult(
        metadata={
            **floats(headline(table)),
            "scorecard": dg.MetadataValue.md(scorecard(runs)),
            "dagster/row_count": len(results),
            "coverage": md_table(pl.DataFrame([{"benchmark": r.benchmark, "benchmark_hash": r.benchmark_hash[:12],
                                                "scored": r.covered, "not_in_corpus": r.uncovered,
                                                "measured_in": measured_in[r.benchmark]} for r in runs])),
            "reused_rows": sum(len(r.rows) for r in runs if measured_in[r.benchmark] != ASKED),
            "by_project": md_table(_slice_table(metrics, "project"), 30),
            "by_category": md_table(_slice_table(metrics, "category"), 30),
            "by_page_kind": md_table(_slice_table(metrics, "page_kind"), 30),
            "upstream_materializations": lineage_table(lineage),
            **({"upstream_newest_at": dg.MetadataValue.timestamp(max(r["epoch"] for r in lineage))}
               if any(r["epoch"] for r in lineage) else {}),
            "retrieval_configs": dg.MetadataValue.json(_regime_hashes(results)),
            "eval_run": run_link(run_id),
            "serving_config": f"{config.serving_config} (k={config.serving_k})",
            # The floor the serving regime (and so the abstention gates) was judged at.
            "abstention_floor": str(engine.resolve(config.serving_config).floor),
            "abstention_floor_calibrated": engine.calibration is not None,
        },
        data_version=dg.DataVersion(stable_hash([r["data_version"] for r in lineage] +
                                                [r.benchmark_hash for r in runs], 16)),
    )


def _missing_indexes(store: RagStore, version: str) -> list[str]:
    """Which of this version's indexes are not on disk (checked in the data, not the event log)."""
    from ...rag.index.vector_store import table_exists

    home = store.data_home()
    missing = [] if table_exists(home.vectors_uri(), version) else ["vectors"]
    return missing + ([] if (home.tantivy_root() / version).is_dir() else ["lexical_index"])


def _shared_inputs(config: EvalRunConfig, engine, known: set[str], lineage: list[dict],
                   build_config: dict | None) -> dict:
    """What every benchmark's scores depend on besides its own questions (content, not names)."""
    regimes = [*config.regimes, *experiment_configs(config)]
    return {"upstream": {row["asset"]: row["data_version"] for row in lineage},
            "build_config": build_config, "known_doc_ids": stable_hash(sorted(known), 32),
            "regimes": [engine.resolve(r).to_dict() for r in regimes],
            "labels": [r if isinstance(r, str) else r.name for r in regimes],
            "serving": engine.resolve(config.serving_config).to_dict(), "k": config.k,
            "serving_k": config.serving_k}


def _run_benchmarks(context: dg.AssetExecutionContext, config: EvalRunConfig, engine, known: set[str],
                    inputs: dict) -> tuple[list[BenchmarkRun], dict[str, str]]:
    """Each benchmark scored, or read back from an identical earlier scoring; and which run
    measured each benchmark (``ASKED``, or the version whose scoring was read back)."""
    version, root = context.partition_key, engine.home.root / "eval_cache"
    runs, measured_in = [], {}
    for name in config.benchmarks:
        bench = load_benchmark(name, PROJECT_ROOT)
        # No reuse without a content address for every upstream (e.g. an index built outside Dagster).
        addressed = config.reuse_identical and all(inputs["upstream"].values())
        key = content_key("eval_run", {**inputs, "benchmark": bench.version_hash})
        stored = load_run(root, key) if addressed else None
        if stored is not None and degraded_regimes(stored[0]) != _degraded_now(engine, config, bench):
            context.log.info(f"{bench.name}: a regime degrades differently than when {stored[1]} scored it")
            stored = None
        if stored is not None:
            context.log.info(f"{bench.name}: reused the scoring of {stored[1]} (identical inputs and code)")
            runs.append(stored[0])
            measured_in[bench.name] = stored[1]
            continue
        context.log.info(f"{bench.name}: {len(bench.records)} questions × {len(config.regimes)} regimes")
        run = run_benchmark(engine, bench, known, [*config.regimes, *experiment_configs(config)], config.k,
                            serving=(config.serving_config, config.serving_k),
                            progress=log_progress(context, f"{bench.name}: question-regime pairs", 500))
        if addressed:
            save_run(root, key, run, version)
        runs.append(run)
        measured_in[bench.name] = ASKED
    return runs, measured_in


def _degraded_now(engine, config: EvalRunConfig, bench) -> dict[str, bool]:
    question = next((r.question for r in bench.records), "")
    return probe_degraded(engine, question, [*config.regimes, *experiment_configs(config)],
                          (config.serving_config, config.serving_k), config.k)


def experiment_configs(config: EvalRunConfig) -> list:
    """Each experiment = a named config with overrides, labelled with the experiment's name. An
    explicit ``floor`` is used as given, not replaced by the version's calibrated floor."""
    from ...rag.search.engine import named_config
    from ...rag.search.retrieval import RetrievalConfig

    out = []
    for name, overrides in config.experiments.items():
        overrides = dict(overrides)
        if "floor" in overrides:
            overrides.setdefault("calibrated_floor", False)
        base = named_config(overrides.pop("base", "hybrid-weighted"))
        out.append(RetrievalConfig.from_dict({**base.to_dict(), **overrides, "name": name}))
    return out


def _frames(runs: list[BenchmarkRun], version: str, run_id: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-question rows and long-format metrics (one row per regime × slice × metric)."""
    results, metrics = [], []
    for run in runs:
        results += [{**row, "index_version": version, "run_id": run_id, "benchmark": run.benchmark,
                     "benchmark_hash": run.benchmark_hash} for row in run.rows]
        for regime, summaries in run.summaries.items():
            for summary in summaries:
                slice_name, _, slice_value = summary["slice"].partition("=")
                metrics += [{"index_version": version, "run_id": run_id, "benchmark": run.benchmark,
                             "regime": regime, "slice": slice_name, "slice_value": slice_value, "metric": metric,
                             "value": None if summary.get(metric) is None else float(summary[metric]),
                             "n": summary.get("n")} for metric in METRIC_NAMES]
    return (pl.DataFrame(results, infer_schema_length=None).drop("ndcg", strict=False),
            pl.DataFrame(metrics, schema_overrides={"value": pl.Float64, "n": pl.Int32}))


def _slice_table(metrics: pl.DataFrame, slice_name: str) -> pl.DataFrame:
    wanted = (metrics.filter((pl.col("slice") == slice_name) & pl.col("metric").is_in(["mrr@10", "hit@5"])
                             & pl.col("regime").is_in(["serving", "dense", "lexical"]))
              .with_columns(pl.col("value").round(3)))
    if wanted.is_empty():
        return wanted
    return (wanted.with_columns((pl.col("regime") + " " + pl.col("metric")).alias("column"),
                                pl.col("n").cast(pl.Int64))
            .pivot(on="column", index=["benchmark", "slice_value", "n"], values="value")
            .sort("benchmark", "slice_value"))


def _regime_hashes(results: pl.DataFrame) -> dict:
    return dict(results.select("regime", "retrieval_config_hash").unique().iter_rows()) if len(results) else {}


def upstream_lineage(instance: dg.DagsterInstance, version: str, assets=UPSTREAM) -> list[dict]:
    """The latest materialization of each asset for ``version``: run id + data version."""
    rows = []
    for asset in assets:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[version]), limit=1).records
        event = records[0] if records else None
        rows.append({"asset": asset, "run_id": event.run_id if event else "",
                     "data_version": (event.asset_materialization.tags or {}).get("dagster/data_version", "")
                     if event else "", "at": _utc_text(event.timestamp) if event else "",
                     "epoch": event.timestamp if event else 0.0})
    return rows


def _utc_text(epoch: float) -> str:
    from datetime import datetime

    return f"{datetime.fromtimestamp(epoch, UTC):%Y-%m-%d %H:%M:%S} UTC"


def lineage_table(lineage: list[dict]) -> dg.MarkdownMetadataValue:
    """Upstream materializations as Markdown: run ids link to their run pages, times are UTC dates."""
    lines = ["| asset | run | data version | at |", "|---|---|---|---|"]
    for row in lineage:
        run = f"[{row['run_id'][:8]}]({ui_url()}/runs/{row['run_id']})" if row["run_id"] else "not materialized"
        lines.append(f"| {row['asset']} | {run} | {row['data_version'][:16]} | {row['at']} |")
    return dg.MetadataValue.md("\n".join(lines))


def metric_table_for(warehouse, version: str) -> dict:
    """``{(regime, slice, metric): value}`` of the version's eval_run, as gates read it."""
    table = {}
    for b, regime, s, v, metric, value in warehouse.eval_metric_rows(version):
        slice_name = "overall" if s == "overall" else f"{s}={v}"
        table[(regime, gate_lib.slice_key(b, slice_name), metric)] = value
    return table


def gate_outcomes(store: RagStore, version: str) -> list:
    warehouse = store.warehouse()
    current = releases.current_release(warehouse)
    baseline = metric_table_for(warehouse, current) if current and current != version else None
    return gate_lib.evaluate_gates(gate_lib.load_gates(gates_file()), metric_table_for(warehouse, version), baseline)


def _gate_result(outcomes: list, severity: str) -> dg.AssetCheckResult:
    chosen = [o for o in outcomes if o.gate.severity == severity]
    failed = [o for o in chosen if not o.passed]
    table = pl.DataFrame([{"gate": o.gate.name, "passed": o.passed, "value": o.value, "baseline": o.baseline,
                           "message": o.message} for o in chosen]) if chosen else pl.DataFrame()
    return dg.AssetCheckResult(
        passed=not failed,
        severity=dg.AssetCheckSeverity.ERROR if severity == "critical" else dg.AssetCheckSeverity.WARN,
        metadata={"gates": md_table(table, 50), "failed": ", ".join(o.gate.name for o in failed) or "none"})


@dg.asset_check(asset=eval_run, blocking=True, partitions_def=index_version,
                description="Critical gates of eval/gates.yaml (floors and no-regression vs the current "
                "release). Blocking: a failing candidate cannot materialize release.")
def critical_gates(context: dg.AssetCheckExecutionContext, store: RagStore) -> dg.AssetCheckResult:
    return _gate_result(gate_outcomes(store, context.partition_key), "critical")


@dg.asset_check(asset=eval_run, partitions_def=index_version,
                description="Warning gates of eval/gates.yaml: reported, never blocking.")
def warning_gates(context: dg.AssetCheckExecutionContext, store: RagStore) -> dg.AssetCheckResult:
    return _gate_result(gate_outcomes(store, context.partition_key), "warning")
