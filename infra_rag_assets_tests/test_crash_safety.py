"""Crash safety of `infra-rag build` on the fixture corpus, with real processes and stores.

(a) A build whose run worker is killed with SIGKILL while it embeds (what the OOM killer
    does) leaves the released version serving, the waiting CLI ends with a one-line error,
    and the next build completes (no lock, pool slot or staging directory left blocking it).
(b) Two builds started at once on one data home both finish, or one fails with a one-line
    error; afterwards every version's chunk count == LanceDB rows == Tantivy documents and no
    staging directory is left next to the published indexes.

Builds run ``--through indexes``: eval_run and release need the benchmark corpus, and the
release under test is recorded by hand with the release history API, as `infra-rag release`
would record it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_fixture_corpus, write_fixture_sources

from infra_rag_assets.package_data import dagster_yaml_template
from infra_rag_assets.rag.index.lexical_store import LexicalSearcher
from infra_rag_assets.rag.index.vector_store import count_rows
from infra_rag_assets.rag.operate import releases
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.engine import QueryEngine, resolve_version

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT_S = 240
EXTRA_PAGE = """---
title: Crash test page
---
# Crash test page

A page added after the first build so the next version differs from the released one and its
new chunks must be embedded (the embedding cache has no vectors for them). PodDisruptionBudget
objects limit voluntary disruptions; a rollout pauses when it would break the budget.
"""


@pytest.fixture
def site(tmp_path, fresh_home, monkeypatch):
    """A data home holding one released version, its own corpus copy, sources and DAGSTER_HOME."""
    corpus = make_fixture_corpus(tmp_path / "corpus")
    sources = write_fixture_sources(tmp_path / "sources.yaml", corpus)
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    shutil.copyfile(dagster_yaml_template(), dagster_home / "dagster.yaml")  # what the CLI installs
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))  # the yaml reads it; so does polling here
    home = DataHome.at(fresh_home)
    released = home.warehouse().rows("SELECT index_version FROM index_versions")[0][0]
    releases.record(home.warehouse(), released, "release", reason="crash-safety baseline")
    env = {
        **os.environ,
        "INFRA_RAG_HOME": str(fresh_home),
        "INFRA_RAG_SOURCES": str(sources),
        "DAGSTER_HOME": str(dagster_home),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("ANTHROPIC_API_KEY", None)
    return {"home": home, "corpus": corpus, "env": env, "dagster_home": dagster_home, "released": released}


def _start_build(env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "infra_rag_assets", "build", "--through", "indexes"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"build did not finish in {BUILD_TIMEOUT_S}s; stderr tail: {err[-800:]}")
    return proc.returncode, out, err


def _wait_for_step(dagster_home: Path, step: str, proc: subprocess.Popen, timeout: float = 180) -> str:
    """Poll the build's Dagster event log until ``step`` has started; returns the run id."""
    import dagster as dg

    deadline = time.monotonic() + timeout
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"build exited early: {proc.communicate()[1][-800:]}"
            for run in instance.get_runs(limit=1):
                starts = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)
                if any(e.step_key == step for e in starts):
                    return run.run_id
            time.sleep(0.2)
    pytest.fail(f"step {step} never started within {timeout}s")


def _run_worker_pid(dagster_home: Path, run_id: str, timeout: float = 60) -> int:
    """The pid the run's worker tagged its run with as it started its resources."""
    import dagster as dg

    deadline = time.monotonic() + timeout
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        while time.monotonic() < deadline:
            pid = instance.get_run_by_id(run_id).tags.get("infra_rag/pid")
            if pid:
                return int(pid)
            time.sleep(0.2)
    pytest.fail(f"run {run_id} was never tagged with its worker's pid")


def _step_succeeded(dagster_home: Path, run_id: str, step: str) -> bool:
    import dagster as dg

    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        return any(e.step_key == step for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_SUCCESS))


def _serves(home: DataHome, expected_version: str) -> None:
    engine = QueryEngine.open(home)
    assert engine.version == expected_version
    hits = engine.search("What does maxSurge control in a Deployment?", k=5).hits
    assert hits and hits[0].doc_id == "kubernetes:concepts_workloads_controllers_deployment"


def _assert_consistent(home: DataHome, versions: list[str]) -> None:
    """DuckDB opens; each version's chunks == vector rows == lexical docs; no temp dirs left."""
    counts = dict(home.warehouse().rows("SELECT index_version, count(*) FROM chunks GROUP BY 1"))
    for version in versions:
        chunks = counts.get(version, 0)
        assert chunks > 0, f"{version} has no chunks"
        assert count_rows(home.vectors_uri(), version) == chunks, f"{version}: vector rows != chunks"
        assert LexicalSearcher.open(home.version(version).tantivy).doc_count() == chunks, version
    leftovers = [p.name for p in home.tantivy_root().iterdir() if p.name.startswith((".staging-", ".old-"))]
    assert not leftovers, f"temporary index dirs left: {leftovers}"


def test_kill_9_while_embedding_keeps_release_serving_and_next_build_completes(site, tmp_path):
    home, env = site["home"], site["env"]
    released_chunks = home.warehouse().rows("SELECT count(*) FROM chunks WHERE index_version = ?", [site["released"]])[
        0
    ][0]
    (site["corpus"] / "kubernetes" / "crash-test.md").write_text(EXTRA_PAGE)
    shutil.rmtree(home.cache_dir(), ignore_errors=True)  # every chunk must be embedded again
    proc = _start_build(env)
    run_id = _wait_for_step(site["dagster_home"], "vectors", proc)
    time.sleep(3)  # into the model load / embedding loop of the vectors step
    assert proc.poll() is None, "build ended before it could be killed"
    assert not _step_succeeded(site["dagster_home"], run_id, "vectors"), "kill came too late"
    worker = _run_worker_pid(site["dagster_home"], run_id)
    assert worker != proc.pid  # the CLI launched the run through the workspace; it runs elsewhere
    os.kill(worker, signal.SIGKILL)
    code, _out, err = _finish(proc)
    assert code == 1 and err.strip().splitlines()[-1].startswith("error: build of"), err[-800:]
    assert "Traceback" not in err

    killed = [v for (v,) in home.warehouse().rows("SELECT index_version FROM index_versions") if v != site["released"]]
    assert len(killed) == 1, "the killed build must have registered its own, new version"
    assert releases.current_release(home.warehouse()) == site["released"]
    assert (
        home.warehouse().rows("SELECT count(*) FROM chunks WHERE index_version = ?", [site["released"]])[0][0]
        == released_chunks
    )
    _serves(home, site["released"])
    # With no release at all, the fallback ("newest fully indexed") must skip the killed version.
    unreleased = DataHome.at(shutil.copytree(home.root, tmp_path / "unreleased"))
    unreleased.warehouse().execute("DELETE FROM releases")
    releases.publish_pointer(unreleased.warehouse())
    assert resolve_version(unreleased) == site["released"]

    code, out, err = _finish(_start_build(env))
    assert code == 0, f"build after the kill failed: {err[-800:]}"
    rebuilt = out.strip().splitlines()[-1]
    assert rebuilt not in (site["released"], killed[0])
    _assert_consistent(home, [site["released"], rebuilt])
    assert QueryEngine.open(home, rebuilt).search("PodDisruptionBudget voluntary disruptions", k=3).hits
    _serves(home, site["released"])  # still the release: a build never moves the pointer


def test_two_builds_at_once_both_finish_or_one_fails_cleanly(site):
    home, env = site["home"], site["env"]
    procs = [_start_build(env), _start_build(env)]
    results = [_finish(p) for p in procs]
    built = []
    for code, out, err in results:
        if code == 0:
            built.append(out.strip().splitlines()[-1])
        else:
            lines = [line for line in err.strip().splitlines() if line.strip()]
            assert "Traceback" not in err, err[-1500:]
            assert lines and lines[-1].startswith("error:"), err[-800:]
    assert built, f"neither build finished: {[r[2][-400:] for r in results]}"
    assert len(set(built)) == len(built), f"two builds wrote one version: {built}"
    _assert_consistent(home, [site["released"], *built])
    _serves(home, site["released"])
