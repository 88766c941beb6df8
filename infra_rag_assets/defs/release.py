"""release: promote an evaluated index version to the one that serves.

It materializes only when eval_run's blocking critical gates passed (Dagster skips it
otherwise), re-checks them at promotion time, and appends a release event to the history.
"""

from datetime import timedelta

import polars as pl

import dagster as dg

from ..rag import releases
from .evaluation import UPSTREAM, gate_outcomes, metric_table_for, upstream_lineage
from .partitions import index_version
from .reporting import md_table
from .resources import RagStore

HEADLINE = [("serving", "overall", "mrr@10"), ("serving", "overall", "hit@5"),
            ("serving", "own_labelled/overall", "mrr@10"), ("serving", "own_labelled/overall", "abstention_recall")]


@dg.asset(
    partitions_def=index_version,
    deps=["eval_run"],
    group_name="serving",
    kinds={"duckdb"},
    owners=["team:search-platform"],
    freshness_policy=dg.FreshnessPolicy.time_window(fail_window=timedelta(days=14), warn_window=timedelta(days=8)),
    description="Points serving at this index version once its eval_run passed every critical gate. "
    "History (who, when, run, version, metrics) is append-only; `infra-rag rollback` moves the pointer back.",
)
def release(context: dg.AssetExecutionContext, store: RagStore) -> dg.MaterializeResult:
    version = context.partition_key
    warehouse = store.warehouse()
    blocking = [o for o in gate_outcomes(store, version) if o.blocking]
    if blocking:  # eval_run's blocking check already stops this; kept for manual launches
        raise dg.Failure(f"{version} fails critical gates: {', '.join(o.gate.name for o in blocking)}")
    metrics = metric_table_for(warehouse, version)
    headline = {"/".join(key): metrics.get(key) for key in HEADLINE}
    previous = releases.current_release(warehouse)
    if previous == version:  # re-evaluated while serving: no new event, the pointer did not move
        event_id = "unchanged (already serving)"
    else:
        event_id = releases.record(warehouse, version, "release", run_id=context.run.run_id,
                                   reason=f"gates passed (run {context.run.run_id[:8]})", metrics=headline,
                                   actor=context.run.tags.get("user", None)).event_id
    lineage = upstream_lineage(context.instance, version, (*UPSTREAM, "eval_run"))
    return dg.MaterializeResult(
        metadata={
            "serving_version": version, "previous_version": previous or "none", "event_id": event_id,
            "headline_metrics": md_table(pl.DataFrame([{"metric": k, "value": v} for k, v in headline.items()])),
            "lineage": md_table(pl.DataFrame(lineage)),
        },
    )

