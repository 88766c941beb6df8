"""Freshness: a sensor that fingerprints every source and builds a new index version when
(and only when) something changed; the reindex job it triggers (defs/jobs.py) runs the whole chain."""

import dagster as dg

from ...rag.index.config import claim_version, sources_fingerprint
from ...rag.ingest.sources import SourceConfigError
from ..partitions import index_version
from ..resources import BuildSettings, RagStore
from .release import release_version_job

# Set on runs whose caller (the CLI) serves the version itself once the run ends; the sensor skips them.
CALLER_SERVES_TAG = "infra_rag/caller_serves"


@dg.sensor(
    job_name="reindex",  # defined in defs/jobs.py from the asset graph
    minimum_interval_seconds=3600,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Hourly: hash every mirror file (git commit / HTTP sources are pinned in sources.yaml). "
    "On a change, register a new index_version and request the reindex run for it; otherwise skip "
    "with the reason.",
)
def sources_changed(context: dg.SensorEvaluationContext, store: RagStore, settings: BuildSettings):
    try:
        config = settings.build_config()
    except SourceConfigError as exc:  # a broken sources.yaml or mirror registers nothing
        return dg.SkipReason(f"sources not usable: {exc}")
    fingerprint = sources_fingerprint(config.sources)
    warehouse = store.warehouse()
    latest = warehouse.newest_version()
    if latest and latest[1] == fingerprint:
        return dg.SkipReason(f"sources unchanged since {latest[0]} (fingerprint {fingerprint[:12]})")
    version = claim_version(warehouse, context.instance.get_dynamic_partitions(index_version.name),
                            config, created_by="sensor")
    changed = _changed_sources(latest[0] if latest else None, config.sources, warehouse)
    return dg.SensorResult(
        dynamic_partitions_requests=[index_version.build_add_request([version])],
        run_requests=[dg.RunRequest(partition_key=version, run_key=f"reindex-{version}",
                                    tags={"infra_rag/origin": "sensor", "infra_rag/changed": ",".join(changed)})],
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
    description="After a daemon-run reindex (the sensor's, or `infra-rag build --submit`) approved its version, "
    "serve it: requests release_version for that version. CLI builds that wait for their run do this themselves.",
)
def serve_approved_builds(context: dg.RunStatusSensorContext):
    run = context.dagster_run
    version = run.tags.get("dagster/partition")
    if run.job_name != "reindex" or not version or run.tags.get(CALLER_SERVES_TAG):
        return dg.SkipReason(f"run {run.run_id[:8]}: not a daemon-run index-version build")
    approved = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("release"), asset_partitions=[version]), limit=1).records
    if not approved or approved[0].run_id != run.run_id:
        return dg.SkipReason(f"{version} was not approved by run {run.run_id[:8]}")
    return dg.RunRequest(run_key=f"serve-{version}-{run.run_id}", run_config={"ops": {"serving_release": {"config": {
        "action": "release", "version": version, "reason": f"reindex run {run.run_id[:8]} passed the gates"}}}})
