"""Freshness: a sensor that fingerprints every source and builds a new index version when
(and only when) something changed; the reindex job it triggers (defs/jobs.py) runs the whole chain."""

import dagster as dg

from ...rag.index.config import claim_version, sources_fingerprint
from ...rag.ingest.sources import SourceConfigError
from ..partitions import index_version
from ..resources import BuildResource, DataHomeResource
from .release import release_version_job
from .serving import serving_decision


@dg.sensor(
    job_name="reindex",  # defined in defs/jobs.py from the asset graph
    minimum_interval_seconds=3600,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Hourly: hash every mirror file (git commit / HTTP sources are pinned in sources.yaml). "
    "On a change, register a new index_version and request the reindex run for it; otherwise skip "
    "with the reason.",
)
def sources_changed(context: dg.SensorEvaluationContext, store: DataHomeResource, settings: BuildResource):
    return request_reindex_if_changed(context.instance, store, settings, origin="sensor")


def request_reindex_if_changed(instance, store: DataHomeResource, settings: BuildResource, origin: str):
    """A new index_version and its reindex run when a mirror's fingerprint moved, else the reason
    to skip; shared with ``reindex_after_sync`` (defs/operate/upstream.py)."""
    try:
        config = settings.build_config()
    except SourceConfigError as exc:  # a broken sources.yaml or mirror registers nothing
        return dg.SkipReason(f"sources not usable: {exc}")
    fingerprint = sources_fingerprint(config.sources)
    warehouse = store.data_home().warehouse()
    latest = warehouse.newest_version()
    if latest and latest[1] == fingerprint:
        return dg.SkipReason(f"sources unchanged since {latest[0]} (fingerprint {fingerprint[:12]})")
    version = claim_version(warehouse, instance.get_dynamic_partitions(index_version.name), config, created_by=origin)
    changed = _changed_sources(latest[0] if latest else None, config.sources, warehouse)
    return dg.SensorResult(
        dynamic_partitions_requests=[index_version.build_add_request([version])],
        run_requests=[
            dg.RunRequest(
                partition_key=version,
                run_key=f"reindex-{version}",
                tags={"infra_rag/origin": origin, "infra_rag/changed": ",".join(changed)},
            )
        ],
    )


def _changed_sources(previous: str | None, snapshots: list[dict], warehouse) -> list[str]:
    """Names of sources whose fingerprint differs from the previous version's."""
    if previous is None:
        return [s["name"] for s in snapshots]
    before = {s["name"]: s["fingerprint"] for s in (warehouse.version_config(previous) or {}).get("sources", [])}
    return [s["name"] for s in snapshots if before.get(s["name"]) != s["fingerprint"]]


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    request_job=release_version_job,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="After a reindex run approved its version, serve it (requests release_version), unless the "
    "caller that waited for the build served it already: the rule of defs/operate/serving.py, shared with the CLI.",
)
def serve_approved_builds(context: dg.RunStatusSensorContext):
    decision = serving_decision(context.instance, context.dagster_run)
    if decision.version is None:
        return dg.SkipReason(decision.reason)
    return dg.RunRequest(
        run_key=f"serve-{decision.version}-{decision.build_run_id}",
        run_config=decision.run_config(),
        tags=decision.tags(),
    )
