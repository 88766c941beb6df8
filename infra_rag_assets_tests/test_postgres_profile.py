"""The production profile (deploy/dagster.production.yaml) against a real PostgreSQL 15 server.

Not a schema check: a throwaway server (pg_server.py) holds the Dagster instance, and

(1) ``infra-rag build --through documents`` runs in-process on it: its run and its
    materializations are rows in Postgres, read back with the driver;
(2) two ``infra-rag build --submit`` builds wait in the QueuedRunCoordinator's queue until
    ``dagster-daemon run`` launches them; both succeed and their ``lexical_index`` steps (pool
    ``tantivy_writer``, limit 1) never overlap;
(3) a run worker killed with SIGKILL while it holds the ``lancedb_writer`` slot is failed by the
    code server, its slot is freed by the daemon's run monitoring, and run retries rerun it to
    success.

Each site pins the writer pools first, as deploy/README.md says a PostgreSQL deployment must:
left to ``default_limit``, two runs that first use a pool at the same moment race to create its
row and one of them fails (Dagster issue #33552; this test failed so in CI).

The only change to the production yaml is shorter daemon intervals (run monitoring polls
every 2 s instead of 60 s) so the test ends in minutes. Every subprocess gets this checkout on
PYTHONPATH, as the package may be installed from another checkout.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import load_factor, make_fixture_corpus, write_fixture_sources
from pg_server import pg_server  # noqa: F401 - fixture

from infra_rag_assets.package_data import workspace_yaml

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = ROOT / "deploy" / "dagster.production.yaml"
TIMEOUT_S = 240


@pytest.fixture
def site(tmp_path, pg_server, request):  # noqa: F811
    """A data home, fixture sources and a DAGSTER_HOME holding the production yaml (own database)."""
    db = "t_" + request.node.name.lower().replace("[", "_").replace("]", "")[:40]
    pg_server.query_admin(f"CREATE DATABASE {db}")
    corpus = make_fixture_corpus(tmp_path / "corpus")
    sources = write_fixture_sources(tmp_path / "sources.yaml", corpus)
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    config = yaml.safe_load(PRODUCTION.read_text())
    config["run_monitoring"].update(poll_interval_seconds=2, free_slots_after_run_end_seconds=1)
    (dagster_home / "dagster.yaml").write_text(yaml.safe_dump(config))
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {
        **os.environ,
        **pg_server.env(),
        "DAGSTER_PG_DB": db,
        "DAGSTER_HOME": str(dagster_home),
        "INFRA_RAG_HOME": str(tmp_path / "home"),
        "INFRA_RAG_SOURCES": str(sources),
        "PYTHONPATH": pythonpath,
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("ANTHROPIC_API_KEY", None)
    # the deploy step of deploy/README.md, "Pin the writer pools once"
    for pool in sorted(writer_pools()):
        pinned = subprocess.run(
            [_script("dagster"), "instance", "concurrency", "set", pool, "1"],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert pinned.returncode == 0, pinned.stderr[-2000:]
    return {"env": env, "db": db, "pg": pg_server}


def _script(name: str) -> str:
    """A console script installed beside this interpreter (dagster's CLIs have no `python -m` form)."""
    script = Path(sys.executable).with_name(name)
    return str(script) if script.exists() else name


def writer_pools() -> set[str]:
    """The pools the product's assets run in (read from the definitions, not listed here)."""
    from infra_rag_assets.definitions import defs

    return {op.pool for op in (getattr(a, "op", None) for a in defs.assets) if op is not None and op.pool}


def _sql(site, sql: str, params: tuple = ()) -> list[tuple]:
    return site["pg"].query(sql, params, db=site["db"])


def _cli(site, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "infra_rag_assets", *args],
        env=site["env"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _runs(site) -> dict[str, tuple[str, str]]:
    """The build runs (job ``build_*``): the daemon also runs the hourly canary schedule, whose
    run lands among them when a test crosses the hour."""
    rows = _sql(site, "SELECT run_id, pipeline_name, status FROM runs WHERE pipeline_name LIKE %s", ("build%",))
    return {run_id: (job, status) for run_id, job, status in rows}


def _wait(predicate, what: str, timeout: float = TIMEOUT_S, daemon: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if daemon is not None and daemon.poll() is not None:
            pytest.fail(f"daemon exited while waiting for {what}: {daemon.stdout.read()[-2000:]}")
        time.sleep(1)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def _steps(site, run_id: str, step: str) -> dict[str, float]:
    rows = _sql(
        site,
        "SELECT dagster_event_type, extract(epoch from timestamp) FROM event_logs "
        "WHERE run_id = %s AND step_key = %s AND dagster_event_type IN "
        "('STEP_START', 'STEP_SUCCESS', 'STEP_FAILURE')",
        (run_id, step),
    )
    return {kind: float(at) for kind, at in rows}


@pytest.fixture
def daemon(site):
    proc = subprocess.Popen(
        [_script("dagster-daemon"), "run", "-w", str(workspace_yaml())],
        env=site["env"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    yield proc
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    _kill_leftovers(site["env"]["DAGSTER_HOME"])


def _kill_leftovers(dagster_home: str) -> None:
    """Code servers the daemon started in their own sessions (and a run worker's server orphaned
    by the kill test) outlive the daemon's process group: end every process of this instance."""
    import psutil

    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.info["pid"] != os.getpid() and any(dagster_home in part for part in proc.info["cmdline"] or ()):
            try:
                proc.kill()
            except psutil.Error:
                pass


def test_cli_build_writes_its_run_and_materializations_to_postgres(site):
    version = _cli(site, "build", "--through", "documents").stdout.strip().splitlines()[-1]
    runs = _runs(site)
    assert list(runs.values()) == [("build_documents", "SUCCESS")], runs
    (run_id,) = runs
    tags = dict(_sql(site, "SELECT key, value FROM run_tags WHERE run_id = %s", (run_id,)))
    assert tags["dagster/partition"] == version and tags["infra_rag/origin"] == "cli"
    materialized = _sql(
        site,
        "SELECT asset_key, partition FROM event_logs WHERE run_id = %s AND "
        "dagster_event_type = 'ASSET_MATERIALIZATION' ORDER BY id",
        (run_id,),
    )
    assert materialized == [('["source_pages"]', version), ('["documents"]', version)]
    assert _sql(site, "SELECT partition FROM dynamic_partitions WHERE partitions_def_name = 'index_version'") == [
        (version,)
    ]


def test_daemon_runs_two_queued_builds_one_tantivy_writer_at_a_time(site, daemon):
    submits = [
        subprocess.Popen(
            [sys.executable, "-m", "infra_rag_assets", "build", "--through", "lexical_index", "--submit"],
            env=site["env"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]  # at once: distinct versions
    versions = []
    for proc in submits:
        out, err = proc.communicate(timeout=TIMEOUT_S)
        assert proc.returncode == 0, err[-2000:]
        versions.append(out.strip().splitlines()[-1])
    assert len(set(versions)) == 2
    runs = _runs(site)
    assert sorted(runs.values()) == [("build_lexical_index", "QUEUED")] * 2 or all(
        status != "NOT_STARTED" for _, status in runs.values()
    ), runs

    def finished():
        """Each run's lexical_index step window, once every run succeeded and logged both ends of
        it; a failed run fails the test with its step failures, not a missing event later."""
        states = _runs(site)
        failed = {r: s for r, (_, s) in states.items() if s in ("FAILURE", "CANCELED")}
        assert not failed, f"runs failed: {failed}\n" + "\n".join(_failures(site, r) for r in failed)
        if not all(s == "SUCCESS" for _, s in states.values()):
            return None
        steps = {r: _steps(site, r, "lexical_index") for r in states}
        return all({"STEP_START", "STEP_SUCCESS"} <= set(s) for s in steps.values()) and steps

    what = "both queued builds to succeed and log their lexical_index steps"
    steps = _wait(finished, what, timeout=TIMEOUT_S * load_factor(), daemon=daemon)
    windows = sorted((steps[r]["STEP_START"], steps[r]["STEP_SUCCESS"]) for r in runs)
    assert len(windows) == 2 and windows[0][1] <= windows[1][0], f"tantivy_writer steps overlapped: {windows}"
    pools = dict(_sql(site, "SELECT concurrency_key, count(*) FROM concurrency_slots GROUP BY concurrency_key"))
    assert pools.get("tantivy_writer") == 1
    partitions = {v for (v,) in _sql(site, "SELECT value FROM run_tags WHERE key = 'dagster/partition'")}
    assert partitions == set(versions)


def _failures(site, run_id: str) -> str:
    """What a failed run says: its step and run failures and its engine events, one line each.
    Dagster stores a run failure as ``PIPELINE_FAILURE`` (its pre-1.0 name), not ``RUN_FAILURE``."""
    rows = _sql(
        site,
        "SELECT step_key, dagster_event_type, event FROM event_logs WHERE run_id = %s AND dagster_event_type IN "
        "('STEP_FAILURE', 'PIPELINE_FAILURE', 'RUN_FAILURE', 'ENGINE_EVENT') ORDER BY id",
        (run_id,),
    )
    return "\n".join(f"{run_id[:8]} {step or ''} {kind}: {_said(event)}" for step, kind, event in rows)


def _said(event: str) -> str:
    """An event's message and, for a failure, its error's class, message and innermost frames."""
    entry = json.loads(event)
    data = (entry.get("dagster_event") or {}).get("event_specific_data") or {}
    error = data.get("error") or {}
    while error.get("cause"):
        error = error["cause"]
    frames = "".join(error.get("stack") or [])[-1200:]
    said = entry.get("user_message") or (entry.get("dagster_event") or {}).get("message") or ""
    return f"{said} {error.get('cls_name') or ''}: {error.get('message') or ''}\n{frames}".strip()


def _worker_pid(site, run_id: str) -> int | None:
    """The run worker's pid, from the engine event it logs when it starts."""
    for (event,) in _sql(
        site,
        "SELECT event FROM event_logs WHERE run_id = %s AND dagster_event_type = 'ENGINE_EVENT' ORDER BY id",
        (run_id,),
    ):
        found = re.search(r"Started process for run \(pid: (\d+)\)", event)
        if found:
            return int(found.group(1))
    return None


def test_killed_run_worker_is_failed_and_its_pool_slot_freed(site, daemon):
    _cli(site, "build", "--through", "vectors", "--submit")
    (run_id,) = _runs(site)
    _wait(lambda: _steps(site, run_id, "vectors").get("STEP_START"), "the vectors step to start", daemon=daemon)
    holder = _sql(site, "SELECT run_id FROM concurrency_slots WHERE concurrency_key = 'lancedb_writer'")
    assert holder == [(run_id,)], f"the vectors step should hold the lancedb_writer slot: {holder}"
    pid = _wait(lambda: _worker_pid(site, run_id), "the run worker pid", timeout=30)
    os.kill(pid, signal.SIGKILL)

    _wait(lambda: _runs(site)[run_id][1] == "FAILURE", "the killed run to be marked failed", daemon=daemon)
    _wait(
        lambda: (
            _sql(site, "SELECT run_id FROM concurrency_slots WHERE concurrency_key = 'lancedb_writer'") != [(run_id,)]
        ),
        "run monitoring to free the killed run's slot",
        daemon=daemon,
    )
    # run_retries (retry_on_asset_or_op_failure: false still retries a crashed worker) reruns it.
    retry = _wait(
        lambda: next((r for r, (_, s) in _runs(site).items() if r != run_id and s == "SUCCESS"), None),
        "the retried run to succeed",
        daemon=daemon,
    )
    parent = dict(_sql(site, "SELECT key, value FROM run_tags WHERE run_id = %s", (retry,)))
    assert parent.get("dagster/parent_run_id") == run_id
