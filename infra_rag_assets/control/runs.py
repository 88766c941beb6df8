"""Run a job of the code location and read how it went, the same way for every caller.

Two ways to run, chosen by the instance:

* **launched through the workspace** (``dagster job launch -w workspace.yaml``), Dagster's public
  way to create a run from a code location. The run carries its code-location origin, so the
  UI's Re-execute works on it, and it runs in the instance's run launcher, exactly as a run
  started from the UI would. With the embedded profile's DefaultRunCoordinator it starts at
  once and the caller waits for it; with a QueuedRunCoordinator it waits for the daemon.
* **in-process** (``dg.execute_job``), for ephemeral instances (tests), asset subsets that no
  job names (``--from``), and queued instances where the caller must not depend on a daemon.

Either way the outcome is read from the run's events (``RunOutcome``), and every run worker
tags its run with its host and pid so a run whose process died can be recognised later.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from .. import settings
from ..defs.resources import HOST_TAG, PID_TAG
from ..package_data import workspace_yaml
from ..rag.operate.processes import pid_alive

ENDED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
_STEP_FAILURE = dg.DagsterEventType.STEP_FAILURE.value
_CHECK = dg.DagsterEventType.ASSET_CHECK_EVALUATION.value


@dataclass
class RunOutcome:
    """What a caller needs from a finished run: success, the first failure, materializations, checks."""

    run_id: str
    success: bool
    all_events: Sequence[dg.DagsterEvent] = field(default_factory=list)

    @classmethod
    def of(cls, result: dg.JobExecutionResult) -> RunOutcome:
        return cls(result.run_id, result.success, list(result.all_events))

    @classmethod
    def read(cls, instance: dg.DagsterInstance, run_id: str) -> RunOutcome:
        run = instance.get_run_by_id(run_id)
        events = [e.dagster_event for e in instance.all_logs(run_id) if e.dagster_event is not None]
        return cls(run_id, run is not None and run.status == dg.DagsterRunStatus.SUCCESS, events)

    def failure(self) -> str:
        """``step: last line of its error``, or '' for a successful run."""
        failed = [e for e in self.all_events if e.event_type_value == _STEP_FAILURE]
        if failed:
            error = failed[0].step_failure_data.error
            return f"{failed[0].step_key}: {error.message.strip().splitlines()[-1] if error else 'failed'}"
        return "" if self.success else f"run {self.run_id[:8]} did not succeed (see its log in the Dagster UI)"

    def asset_materializations_for_node(self, asset: str) -> list[dg.AssetMaterialization]:
        """As ``dg.JobExecutionResult``'s (an asset's op is named after it), for either kind of run."""
        return [
            e.step_materialization_data.materialization
            for e in self.all_events
            if e.is_step_materialization and e.asset_key == dg.AssetKey(asset)
        ]

    def get_asset_check_evaluations(self) -> list[dg.AssetCheckEvaluation]:
        return [e.asset_check_evaluation_data for e in self.all_events if e.event_type_value == _CHECK]

    def check_warnings(self) -> list[str]:
        """One line per failed WARN check (what the UI shows in yellow): warnings fail no build,
        but must not pass unseen."""
        lines = []
        for evaluation in self.get_asset_check_evaluations():
            if evaluation.passed or evaluation.severity != dg.AssetCheckSeverity.WARN:
                continue
            summary = evaluation.metadata.get("summary")
            detail = getattr(summary, "value", summary) or "failed"
            lines.append(
                f"check {evaluation.asset_check_key.name} on {evaluation.asset_key.to_user_string()}: {detail}"
            )
        return lines


def launches_at_once(instance: dg.DagsterInstance) -> bool:
    """Whether a run launched through the workspace starts now (no queue) on a persistent instance."""
    return not instance.is_ephemeral and not isinstance(instance.run_coordinator, dg.QueuedRunCoordinator)


def run_job(
    instance: dg.DagsterInstance,
    job_name: str,
    run_config: dict,
    tags: dict[str, str],
    asset_subset: list[str] | None = None,
    in_process: bool = False,
) -> RunOutcome:
    """Run ``job_name`` to its end: launched through the workspace when the instance starts runs
    at once and the whole job runs, else in-process. Blocks until the run has ended."""
    if not in_process and asset_subset is None and launches_at_once(instance):
        run_id, process = launch(instance, job_name, run_config, tags, detach=False)
        return wait_for(instance, run_id, process)
    job = dg.build_reconstructable_job("infra_rag_assets.control.stages", "job_named", reconstructable_args=(job_name,))
    selection = [dg.AssetKey(a) for a in asset_subset] if asset_subset else None
    result = dg.execute_job(
        job,
        instance,
        run_config=run_config,
        raise_on_error=False,
        tags={**tags, HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())},
        asset_selection=selection,
    )
    return RunOutcome.of(result)


def launch(
    instance: dg.DagsterInstance, job_name: str, run_config: dict, tags: dict[str, str], detach: bool
) -> tuple[str, subprocess.Popen]:
    """Start ``dagster job launch`` for a new run id; its output goes to <DAGSTER_HOME>/launches/.

    ``detach`` puts it in its own session, so the run outlives this process and its Ctrl-C.
    """
    run_id = str(uuid.uuid4())
    log_dir = launch_logs(instance)
    log_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "dagster",
        "job",
        "launch",
        "-w",
        str(workspace_yaml()),
        "-l",
        "infra_rag_assets",
        "-j",
        job_name,
        "--run-id",
        run_id,
        "--tags",
        json.dumps(tags),
        "--config-json",
        json.dumps(run_config),
    ]
    with open(log_dir / f"{run_id}.log", "w") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=detach,
            env=settings.child_environment(dagster_home=instance.root_directory),
        )
    return run_id, process


def wait_until_created(
    instance: dg.DagsterInstance, run_id: str, process: subprocess.Popen, timeout: float = 300
) -> dg.DagsterRun:
    """The run once ``dagster job launch`` has stored it; a one-line error if the launch failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = instance.get_run_by_id(run_id)
        if run is not None:
            return run
        if process.poll() not in (None, 0):
            raise ValueError(f"dagster job launch failed: {last_launch_line(instance, run_id)}")
        time.sleep(0.3)
    raise ValueError(f"dagster job launch did not create run {run_id} within {timeout:.0f}s")


def wait_for(
    instance: dg.DagsterInstance, run_id: str, process: subprocess.Popen, start_timeout_s: float = 600
) -> RunOutcome:
    """Block until the run has ended.

    The run worker outlives ``dagster job launch`` (which exits once its code server stops), so
    the worker's own pid tag tells whether the run is still alive: when that process is gone
    the run is failed and its pool slots freed (``release_dead_builds``). A run that never
    tagged a worker within ``start_timeout_s`` of the launcher's exit is failed too.
    """
    wait_until_created(instance, run_id, process)
    exited_at = None
    while (run := instance.get_run_by_id(run_id)).status not in ENDED:
        pid = int(run.tags.get(PID_TAG) or 0)
        if pid and run.tags.get(HOST_TAG) == socket.gethostname() and not pid_alive(pid):
            release_dead_builds(instance)
            break
        if not pid and process.poll() is not None and run.status != dg.DagsterRunStatus.QUEUED:
            exited_at = exited_at or time.monotonic()
            if time.monotonic() - exited_at > start_timeout_s:
                instance.report_run_failed(run, message=f"no run worker started within {start_timeout_s:.0f}s")
                break
        time.sleep(0.5)
    process.wait()
    if instance.get_run_by_id(run_id).status != dg.DagsterRunStatus.SUCCESS:
        release_dead_builds(instance)  # a failed run's worker may have died holding a pool slot
    return RunOutcome.read(instance, run_id)


def launch_logs(instance: dg.DagsterInstance) -> Path:
    """Where ``dagster job launch``'s output goes: <DAGSTER_HOME>/launches/."""
    return Path(instance.root_directory) / "launches"


def last_launch_line(instance: dg.DagsterInstance, run_id: str) -> str:
    log = launch_logs(instance) / f"{run_id}.log"
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()] if log.exists() else []
    return lines[-1] if lines else "no output"


def release_dead_builds(instance: dg.DagsterInstance) -> list[str]:
    """Fail this host's runs whose worker process is gone, and free pool slots held or awaited by ended runs.

    A run worker killed with SIGKILL (``kill -9``, the OOM killer) never ends its run: the run
    stays STARTED and keeps its slot in the ``lancedb_writer``/``tantivy_writer`` pool, so every
    later build would wait for that pool forever. Runs are matched by the host and pid tags their
    worker set, so a run of another host sharing the instance is never failed; a reused pid only
    delays the cleanup. The code server that launched a run may also mark it failed itself when
    its worker dies, without freeing the slot: so every slot whose run has ended is freed, which
    is what a daemon's run monitoring does (and nothing would do without a daemon).
    """
    host = socket.gethostname()
    active = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
    released = []
    for run in instance.get_runs(dg.RunsFilter(statuses=active, tags={HOST_TAG: host})):
        pid = int(run.tags.get(PID_TAG) or 0)
        if not pid or pid == os.getpid() or pid_alive(pid):
            continue
        instance.report_run_failed(run, message=f"run worker {pid} on {host} died; pool slots freed")
        released.append(run.run_id)
    _free_slots_of_ended_runs(instance)
    return released


def _free_slots_of_ended_runs(instance: dg.DagsterInstance) -> None:
    # No public API frees op-concurrency slots without a daemon; these are the storage calls the
    # daemon's run monitoring makes itself (dagster/_daemon/monitoring/concurrency.py).
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return
    holders = set()
    for key in storage.get_concurrency_keys():
        info = storage.get_concurrency_info(key)
        holders |= {slot.run_id for slot in [*info.claimed_slots, *info.pending_steps]}
    for run_id in holders:
        run = instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            storage.free_concurrency_slots_for_run(run_id)
