"""`infra-rag ui` opens the Dagster UI on the same instance and data home the CLI builds into.

DAGSTER_HOME is unset: the CLI puts the instance under $INFRA_RAG_HOME/dagster. An in-process
`infra-rag build` and a queued `infra-rag build --submit` are then visible to the webserver
that `infra-rag ui` starts (its GraphQL API on loopback): both under their build job; the
queued one is launched by the daemon `dagster dev` runs, and re-executes from the UI (the
`launchPipelineReexecution` mutation behind the Re-execute button).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import make_fixture_corpus, write_fixture_sources

ROOT = Path(__file__).resolve().parents[1]
RUNS_QUERY = """{ runsOrError { ... on Runs { results { runId jobName status tags { key value }
  repositoryOrigin { repositoryLocationName } } } } }"""


REEXECUTE = """mutation { launchPipelineReexecution(reexecutionParams: {parentRunId: "%s", strategy: ALL_STEPS})
  { __typename ... on PythonError { message } } }"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["data"]


@pytest.fixture
def cli_env(tmp_path):
    corpus = make_fixture_corpus(tmp_path / "corpus")
    sources = write_fixture_sources(tmp_path / "sources.yaml", corpus)
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "ANTHROPIC_API_KEY")}
    env.update(INFRA_RAG_HOME=str(tmp_path / "home"), INFRA_RAG_SOURCES=str(sources),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    return env


def test_cli_build_is_visible_in_the_ui_it_opens(cli_env, tmp_path):
    build = subprocess.run([sys.executable, "-m", "infra_rag_assets", "build", "--through", "documents"],
                           env=cli_env, cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False)
    assert build.returncode == 0, build.stderr[-2000:]
    version = build.stdout.strip().splitlines()[-1]
    submit = subprocess.run([sys.executable, "-m", "infra_rag_assets", "build", "--through", "source_pages",
                             "--submit"], env=cli_env, cwd=tmp_path, capture_output=True, text=True, timeout=240,
                            check=False)
    assert submit.returncode == 0, submit.stderr[-2000:]
    queued_version = submit.stdout.strip().splitlines()[-1]

    port = _free_port()
    ui = subprocess.Popen([sys.executable, "-m", "infra_rag_assets", "ui", "--port", str(port)], env=cli_env,
                          cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True)
    try:
        deadline, runs = time.monotonic() + 180, None
        while time.monotonic() < deadline and runs is None:
            assert ui.poll() is None, ui.stdout.read()[-3000:]
            try:
                runs = _graphql(port, RUNS_QUERY)["runsOrError"]["results"]
            except OSError:
                time.sleep(1)
        assert runs is not None, "the webserver did not answer in 180 s"
        queued = _by_partition(runs, queued_version)
        while time.monotonic() < deadline and _by_partition(runs, queued_version)["status"] != "SUCCESS":
            time.sleep(2)
            runs = _graphql(port, RUNS_QUERY)["runsOrError"]["results"]
        queued = _by_partition(runs, queued_version)
        assert (queued["jobName"], queued["status"]) == ("build_source_pages", "SUCCESS"), queued
        assert queued["repositoryOrigin"]["repositoryLocationName"] == "infra_rag_assets"
        launched = _graphql(port, REEXECUTE % queued["runId"])["launchPipelineReexecution"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
    finally:
        os.killpg(ui.pid, signal.SIGTERM)
        try:
            ui.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, signal.SIGKILL)
    run = _by_partition(runs, version)
    assert (run["jobName"], run["status"]) == ("build_documents", "SUCCESS")
    assert {"key": "infra_rag/origin", "value": "cli"} in run["tags"]
    # Dagster re-executes only runs created from a workspace (they record the code location);
    # an in-process run has none, so the UI cannot re-execute it (README: use --submit).
    assert run["repositoryOrigin"] is None


def _by_partition(runs: list[dict], version: str) -> dict:
    (run,) = [r for r in runs if {"key": "dagster/partition", "value": version} in r["tags"]
              and not any(t["key"] == "dagster/parent_run_id" for t in r["tags"])]
    return run
