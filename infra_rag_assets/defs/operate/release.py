"""release and serving_release: approve an evaluated index version, and move what serves.

``release`` (one partition per index version, the end of the build chain) materializes only
when eval_run's blocking critical gates passed (Dagster skips it otherwise) and re-checks them:
it marks the version approved for serving. ``serving_release`` (unpartitioned) is what serves
now: the ``release_version`` job promotes an approved version and the ``rollback`` job serves
the previous one again, each through ``rag.operate.releases`` (record / rollback: the history and the
pointer the service reads); every move is one materialization of serving_release, so the UI
shows what serves, since when, who moved it and why, and its history.
"""

from datetime import UTC, timedelta

import dagster as dg
import polars as pl

from ...rag.evaluate.eval_tables import gate_outcomes, headline, metric_table_for
from ...rag.operate import releases
from ..asset_lineage import lineage_table, upstream_lineage
from ..partitions import index_version
from ..reporting import floats, md_table, rounded, run_link
from ..resources import DataHomeResource, StageGraphResource


def headline_metrics(warehouse, version: str) -> dict[str, float | None]:
    return headline(metric_table_for(warehouse, version))


def _refuse_unless_approved(store: DataHomeResource, version: str) -> None:
    warehouse = store.data_home().warehouse()
    if not warehouse.has_rows("eval_metrics", version):
        raise dg.Failure(f"{version} has no eval_run: run `infra-rag build --index-version {version} --from eval_run`")
    blocking = [o for o in gate_outcomes(store.data_home().warehouse(), version) if o.blocking]
    if blocking:  # eval_run's blocking check already stops this; kept for manual launches
        raise dg.Failure(f"{version} fails critical gates: {', '.join(o.gate.name for o in blocking)}")


@dg.asset(
    partitions_def=index_version,
    deps=["eval_run"],
    group_name="serving",
    kinds={"duckdb"},
    owners=["team:search-platform"],
    description="Approves this index version for serving once its eval_run passed every critical gate "
    "(re-checked here). Serving moves with serving_release (jobs release_version / rollback).",
)
def release(
    context: dg.AssetExecutionContext, store: DataHomeResource, stage_graph: StageGraphResource
) -> dg.MaterializeResult:
    version = context.partition_key
    _refuse_unless_approved(store, version)
    numbers = headline_metrics(store.data_home().warehouse(), version)
    lineage = upstream_lineage(context.instance, version, stage_graph.upstream_of("release"))
    return dg.MaterializeResult(
        metadata={
            **floats(numbers),
            "approved_version": version,
            "lineage": lineage_table(lineage, version),
        }
    )


ACTION_TAG = "infra_rag/action"


class ServingChangeConfig(dg.Config):
    action: str = "release"  # "release": serve `version`; "rollback": serve the previous release again
    version: str = ""
    reason: str = ""
    actor: str = ""  # empty: the run's `user` tag, else the OS user


@dg.asset(
    deps=["release"],
    group_name="serving",
    kinds={"duckdb"},
    owners=["team:search-platform"],
    freshness_policy=dg.FreshnessPolicy.time_window(
        fail_window=timedelta(days=releases.MAX_AGE_DAYS), warn_window=timedelta(days=releases.WARN_AGE_DAYS)
    ),
    description="What serves now. Materialized by the release_version job (serve an approved version) and the "
    "rollback job (serve the previous release again), both through the append-only release history; "
    "metadata names the version, its scorecard, the actor and the reason. The canary checks it hourly.",
)
def serving_release(
    context: dg.AssetExecutionContext, config: ServingChangeConfig, store: DataHomeResource
) -> dg.MaterializeResult:
    warehouse = store.data_home().warehouse()
    actor = config.actor or context.run.tags.get("user") or None
    previous = releases.current_release(warehouse)
    if config.action == "rollback":
        event = releases.rollback(warehouse, reason=config.reason or "rollback", actor=actor)
    elif config.action == "release":
        if not config.version:
            raise dg.Failure("release_version needs config `version`: the index version to serve")
        _refuse_unless_approved(store, config.version)
        if previous == config.version:
            event = releases.history(warehouse)[-1]  # already serving: no new event
            releases.publish_pointer(warehouse)  # idempotent; repairs a pointer a crash left stale
        else:
            event = releases.record(
                warehouse,
                config.version,
                "release",
                run_id=context.run.run_id,
                reason=config.reason or f"gates passed (run {context.run.run_id[:8]})",
                metrics=headline_metrics(warehouse, config.version),
                actor=actor,
            )
    else:
        raise dg.Failure(f"unknown action {config.action!r}: release or rollback")
    context.log.info(f"serving {event.index_version} ({event.action} by {event.actor}: {event.reason})")
    return dg.MaterializeResult(
        metadata={
            **serving_metadata(warehouse, event, moved=previous != event.index_version),
            "this_run": run_link(context.run.run_id),
        },
        # The event's tags (and the run's, below) say release or rollback in the event list.
        tags={ACTION_TAG: event.action},
    )


def serving_metadata(warehouse, event: releases.ReleaseEvent, moved: bool) -> dict:
    numbers = headline_metrics(warehouse, event.index_version)
    scorecard = pl.DataFrame([{"metric": k, "value": rounded(v)} for k, v in numbers.items()])
    history = [
        {
            "at": f"{e.occurred_at:%Y-%m-%d %H:%M:%S}",
            "action": e.action,
            "version": e.index_version,
            "actor": e.actor,
            "reason": e.reason,
        }
        for e in reversed(releases.history(warehouse)[-10:])
    ]
    return {
        "action": event.action if moved else f"{event.action} (unchanged)",
        "serving_version": event.index_version,
        "rolled_back": dg.MetadataValue.float(1.0 if event.action == "rollback" else 0.0),  # plots moves
        "previous_version": event.previous_version or "none",
        "actor": event.actor,
        "reason": event.reason,
        "since": dg.MetadataValue.timestamp(
            event.occurred_at.timestamp() if event.occurred_at.tzinfo else _utc(event.occurred_at)
        ),
        "release_run": run_link(event.run_id),
        "event_id": event.event_id,
        **floats(numbers),
        "scorecard": md_table(scorecard),
        "history": md_table(pl.DataFrame(history)),
    }


def _utc(naive) -> float:
    return naive.replace(tzinfo=UTC).timestamp()


SERVING = dg.AssetSelection.assets(serving_release).without_checks()  # the canary runs on its own clock

release_version_job = dg.define_asset_job(
    name="release_version",
    selection=SERVING,
    executor_def=dg.in_process_executor,
    config={"ops": {"serving_release": {"config": {"action": "release", "version": "", "reason": ""}}}},
    tags={ACTION_TAG: "release"},
    description="Serve an approved index version (set `version`): records a release event.",
)

rollback_job = dg.define_asset_job(
    name="rollback",
    selection=SERVING,
    executor_def=dg.in_process_executor,
    config={"ops": {"serving_release": {"config": {"action": "rollback", "reason": ""}}}},
    tags={ACTION_TAG: "rollback"},
    description="Serve the previously released version again (a new event; nothing deleted).",
)
