"""After a build, serve it: the one rule that the CLI (after the run it waited for) and the
``serve_approved_builds`` sensor (after a daemon-run build) both apply.

A finished ``reindex`` run is served when it approved its version (materialized ``release`` for
it) and no ``release_version`` run has served that build yet; the release run carries the build
run's id (``SERVED_BUILD_TAG``), so whichever caller comes second finds it and skips. Serving an
already-served version is a no-op in ``serving_release`` too, so the rare race of both callers
at the same instant adds no release event.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

SERVED_BUILD_TAG = "infra_rag/serves_build"  # on a release_version run: the build run it serves
SERVING_JOBS = {"release": "release_version", "rollback": "rollback"}


def serving_run_config(action: str, version: str = "", reason: str = "") -> dict:
    """``serving_release``'s op config for a release (of ``version``) or a rollback."""
    if action not in SERVING_JOBS:
        raise ValueError(f"unknown serving action {action!r}: release or rollback")
    config = {"action": action, "reason": reason, **({"version": version} if action == "release" else {})}
    return {"ops": {"serving_release": {"config": config}}}


@dataclass(frozen=True)
class ServingDecision:
    """What to do once a build run has ended: serve ``version`` (when set), or why not."""

    build_run_id: str
    reason: str
    version: str | None = None

    def run_config(self) -> dict:
        return serving_run_config("release", self.version or "", self.reason)

    def tags(self) -> dict[str, str]:
        return {SERVED_BUILD_TAG: self.build_run_id}


def serving_decision(instance: dg.DagsterInstance, run: dg.DagsterRun) -> ServingDecision:
    """Serve the version a finished build run approved, unless that build was served already."""
    short, version = run.run_id[:8], run.tags.get("dagster/partition")
    if run.job_name != "reindex" or not version:
        return ServingDecision(run.run_id, f"run {short}: not an index-version build")
    approved = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("release"), asset_partitions=[version]), limit=1
    ).records
    if not approved or approved[0].run_id != run.run_id:
        return ServingDecision(run.run_id, f"{version} was not approved by run {short}")
    served = instance.get_runs(
        dg.RunsFilter(job_name=SERVING_JOBS["release"], tags={SERVED_BUILD_TAG: run.run_id}), limit=1
    )
    if served:
        return ServingDecision(run.run_id, f"{version} of run {short} is served already (run {served[0].run_id[:8]})")
    return ServingDecision(run.run_id, f"reindex run {short} passed the gates", version)
