"""The operate domain: release, serving_release and served_traces; release, rollback, canary and
upstream-sync jobs, their schedules and the sensors that act on sources and approved builds.

``reindex_after_sync`` requests the whole-chain job, which spans every domain; definitions.py
adds it beside the build jobs."""

import dagster as dg

from .automation import serve_approved_builds, sources_changed
from .operations import canary_hourly, canary_job, release_canary
from .release import release, release_version_job, rollback_job, serving_release
from .served_traces import served_traces
from .upstream import sync_upstream, sync_upstream_hourly

defs = dg.Definitions(
    assets=[release, serving_release, served_traces],
    asset_checks=[release_canary],
    jobs=[release_version_job, rollback_job, canary_job, sync_upstream],
    schedules=[canary_hourly, sync_upstream_hourly],
    sensors=[sources_changed, serve_approved_builds],
)
