"""Upstream sync on a clock: the ``sync_upstream`` job, its hourly schedule, and the sensor
that looks for changed mirrors right after each sync succeeded.

Why a job and not the sensor itself: a depth-1 fetch of a large docs repository takes minutes,
past a sensor evaluation's time limit, and a run keeps its logs in the UI. The order is
Dagster's: ``sync_upstream_hourly`` launches the job; when it succeeds, ``reindex_after_sync``
(a run status sensor) fingerprints the mirrors exactly as ``sources_changed`` does and requests
a ``reindex`` run only when a page changed.
"""

import dagster as dg
import polars as pl

from ...rag.ingest.upstream_sync import sync_sources
from ..reporting import md_table
from ..resources import BuildResource, DataHomeResource
from .automation import request_reindex_if_changed


class SyncConfig(dg.Config):
    sources: list[str] = []  # empty: every source of sources.yaml


@dg.op(description="Bring every mirror to its upstream commit, branch or checksummed URLs (rag/ingest/upstream_sync).")
def sync_mirrors(context: dg.OpExecutionContext, config: SyncConfig, settings: BuildResource) -> None:
    reports = sync_sources(settings.sources(), config.sources or None)
    for report in reports:
        (context.log.error if report.status == "error" else context.log.info)(report.line())
    rows = [
        {
            "source": r.source,
            "status": r.status,
            "commit": r.commit,
            "previous": r.previous_commit,
            "files": r.files,
            "refused": len(r.refused),
            "error": r.error,
        }
        for r in reports
    ]
    context.add_output_metadata({"sources": md_table(pl.DataFrame(rows))})
    if reports and all(r.status == "error" for r in reports):  # nothing could have arrived: a red run, no reindex
        raise dg.Failure(f"no source synced: {reports[0].line()}")


@dg.job(description="Sync the mirrors from upstream; a success lets reindex_after_sync look for changed pages.")
def sync_upstream():
    sync_mirrors()


sync_upstream_hourly = dg.ScheduleDefinition(
    name="sync_upstream_hourly",
    job=sync_upstream,
    cron_schedule="5 * * * *",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Hourly: fetch every source's upstream into its mirror (needs network; off by default).",
)


def reindex_after_sync(reindex_job) -> dg.RunStatusSensorDefinition:
    """The run status sensor requesting ``reindex_job`` after a successful sync changed a page."""

    @dg.run_status_sensor(
        run_status=dg.DagsterRunStatus.SUCCESS,
        monitored_jobs=[sync_upstream],
        request_job=reindex_job,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="After sync_upstream succeeded: fingerprint the mirrors; on a change register a new "
        "index_version and request reindex for it, else skip with the reason.",
    )
    def reindex_after_sync(context: dg.RunStatusSensorContext, store: DataHomeResource, settings: BuildResource):
        return request_reindex_if_changed(context.instance, store, settings, origin="sync")

    return reindex_after_sync
