"""`infra-rag ui` opens the Dagster UI on the same instance and data home the CLI builds into.

DAGSTER_HOME is unset: the CLI puts the instance under $INFRA_RAG_HOME/dagster. A waited-for
`infra-rag build` and a background `infra-rag build --submit` (both launched through
workspace.yaml) are then visible to the webserver that `infra-rag ui` starts (its GraphQL API
on loopback), each under its build job with its code location, and the CLI's build
re-executes from the UI (the `launchPipelineReexecution` mutation behind the Re-execute
button) to a successful run. An `--in-process` build is listed but has no code location.
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

pytestmark = pytest.mark.slow

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
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["data"]


@pytest.fixture
def cli_env(tmp_path):
    corpus = make_fixture_corpus(tmp_path / "corpus")
    sources = write_fixture_sources(tmp_path / "sources.yaml", corpus)
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "ANTHROPIC_API_KEY")}
    env.update(
        INFRA_RAG_HOME=str(tmp_path / "home"),
        INFRA_RAG_SOURCES=str(sources),
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
    )
    return env


def _cli_build(cli_env: dict, cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "infra_rag_assets", "build", *args],
        env=cli_env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def _runs_when_ended(port: int, versions: list[str], ui: subprocess.Popen, deadline: float) -> list[dict]:
    runs = None
    while time.monotonic() < deadline:
        assert ui.poll() is None, ui.stdout.read()[-3000:]
        try:
            runs = _graphql(port, RUNS_QUERY)["runsOrError"]["results"]
        except OSError:
            time.sleep(1)
            continue
        if all(_by_partition(runs, v)["status"] in ("SUCCESS", "FAILURE") for v in versions):
            return runs
        time.sleep(2)
    pytest.fail(f"runs of {versions} did not end in time: {runs}")


def test_cli_build_is_visible_in_the_ui_it_opens_and_re_executes(cli_env, tmp_path):
    version = _cli_build(cli_env, tmp_path, "--through", "documents")
    in_process = _cli_build(cli_env, tmp_path, "--through", "source_pages", "--in-process")
    submitted = _cli_build(cli_env, tmp_path, "--through", "source_pages", "--submit")

    port = _free_port()
    ui = subprocess.Popen(
        [sys.executable, "-m", "infra_rag_assets", "ui", "--port", str(port)],
        env=cli_env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        runs = _runs_when_ended(port, [version, in_process, submitted], ui, deadline)
        built = _by_partition(runs, version)
        assert (built["jobName"], built["status"]) == ("build_documents", "SUCCESS"), built
        assert {"key": "infra_rag/origin", "value": "cli"} in built["tags"]
        assert built["repositoryOrigin"]["repositoryLocationName"] == "infra_rag_assets"
        background = _by_partition(runs, submitted)
        assert (background["jobName"], background["status"]) == ("build_source_pages", "SUCCESS"), background
        assert background["repositoryOrigin"]["repositoryLocationName"] == "infra_rag_assets"
        # Dagster re-executes only runs created from a workspace; an in-process run has no origin.
        assert _by_partition(runs, in_process)["repositoryOrigin"] is None

        launched = _graphql(port, REEXECUTE % built["runId"])["launchPipelineReexecution"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        while time.monotonic() < deadline:
            runs = _graphql(port, RUNS_QUERY)["runsOrError"]["results"]
            children = [r for r in runs if {"key": "dagster/parent_run_id", "value": built["runId"]} in r["tags"]]
            if children and children[0]["status"] in ("SUCCESS", "FAILURE"):
                break
            time.sleep(2)
        assert children and children[0]["status"] == "SUCCESS", children
    finally:
        os.killpg(ui.pid, signal.SIGTERM)
        try:
            ui.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, signal.SIGKILL)


def _by_partition(runs: list[dict], version: str) -> dict:
    (run,) = [
        r
        for r in runs
        if {"key": "dagster/partition", "value": version} in r["tags"]
        and not any(t["key"] == "dagster/parent_run_id" for t in r["tags"])
    ]
    return run
