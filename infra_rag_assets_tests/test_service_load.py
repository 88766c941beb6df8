"""The service as it is used: `infra-rag serve` (uvicorn, real processes) on loopback over the
fixture index, many clients at once, a CLI batch on the same data home, a release switch
during load. Every response must be a 2xx and every answered request must have its trace."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import build_index_version

from eval.loadgen import run_load
from infra_rag_assets.rag.operate import releases
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.operate.traces import read_traces

pytestmark = pytest.mark.slow

QUESTIONS = [
    "How does maxSurge limit pods during a Deployment rollout?",
    "How do I protect the Prometheus UI with basic auth?",
    "What is an Application in Argo CD?",
    "What is a Pod?",
    "How do EndpointSlices track network endpoints?",
    "What does a software supply chain attestation prove?",
    "How do I roll back a Deployment?",
    "Which label selects the pods of a Service?",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """`python -m infra_rag_assets serve` in its own process group, stopped at teardown."""

    def __init__(self, home: Path, workers: int, log: Path, poll_s: float = 0.3, extra: tuple[str, ...] = ()):
        self.port, self.log = _free_port(), log
        env = {**os.environ, "INFRA_RAG_HOME": str(home)}
        env.pop("ANTHROPIC_API_KEY", None)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "infra_rag_assets",
                "serve",
                "--port",
                str(self.port),
                "--workers",
                str(workers),
                "--release-poll",
                str(poll_s),
                *extra,
            ],
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        self.headers: dict[str, str] = {}  # e.g. the API key, for wait_ready and get

    def wait_ready(self, timeout: float = 180) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"server exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                request = urllib.request.Request(f"{self.url}/v1/health", headers=self.headers)
                with urllib.request.urlopen(request, timeout=5) as reply:
                    return json.loads(reply.read())
            except urllib.error.HTTPError as exc:  # 503 = up, but not healthy (e.g. no release)
                return json.loads(exc.read())
            except OSError:
                time.sleep(0.5)
        pytest.fail(f"server not ready in {timeout}s: {self.log.read_text()[-2000:]}")

    def get(self, path: str, headers: dict | None = None) -> dict:
        """GET a JSON path (an error status gives its JSON body)."""
        try:
            request = urllib.request.Request(f"{self.url}{path}", headers={**self.headers, **(headers or {})})
            with urllib.request.urlopen(request, timeout=10) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read())

    def scrape(self) -> dict[tuple[str, ...], float]:
        """/metrics as {(sample name, *label values of route/status or version): value}."""
        from prometheus_client.parser import text_string_to_metric_families

        request = urllib.request.Request(f"{self.url}/metrics", headers=self.headers)
        with urllib.request.urlopen(request, timeout=10) as reply:
            text = reply.read().decode()
        values: dict[tuple[str, ...], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = tuple(sample.labels[k] for k in ("route", "status", "version") if k in sample.labels)
                key = (sample.name, *labels)
                values[key] = values.get(key, 0.0) + sample.value  # summed over the method label
        return values

    def metric_files(self) -> list[str]:
        """The multiprocess files of this start (the workers' PROMETHEUS_MULTIPROC_DIR)."""
        import psutil

        workers = psutil.Process(self.proc.pid).children(recursive=True) or [psutil.Process(self.proc.pid)]
        # the temp-dir watcher `serve` forks before it execs uvicorn is a child too, without the variable
        directory = next(
            p.environ()["PROMETHEUS_MULTIPROC_DIR"] for p in workers if "PROMETHEUS_MULTIPROC_DIR" in p.environ()
        )
        return sorted(os.listdir(directory))

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()


@pytest.fixture
def released_home(fresh_home, built_index):
    home = DataHome.at(fresh_home)
    releases.record(home.warehouse(), built_index["version"], "release", reason="test")
    return home


def _requests(searches: int, answers: int) -> list[tuple[str, dict]]:
    work = [("/v1/search", {"question": QUESTIONS[i % len(QUESTIONS)], "k": 5}) for i in range(searches)]
    for i in range(answers):  # interleaved, as real traffic is
        work.insert(i * (len(work) // max(answers, 1)), ("/v1/answer", {"question": QUESTIONS[i % 4], "offline": True}))
    return work


def _wait_for_traces(home: DataHome, trace_ids: set[str], timeout: float = 20) -> set[str]:
    deadline, missing = time.monotonic() + timeout, set(trace_ids)
    while missing and time.monotonic() < deadline:
        missing = trace_ids - set(read_traces(home.traces_dir())["trace_id"])
        time.sleep(0.5) if missing else None
    return missing


def test_two_workers_hold_concurrent_load_beside_a_cli_batch(released_home, tmp_path, built_index):
    server = Server(released_home.root, workers=2, log=tmp_path / "server.log")
    try:
        assert server.wait_ready()["version"] == built_index["version"]
        batch = tmp_path / "batch.jsonl"
        batch.write_text(
            "".join(json.dumps({"id": i, "question": QUESTIONS[i % len(QUESTIONS)]}) + "\n" for i in range(60))
        )
        cli = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "infra_rag_assets",
                "--home",
                str(released_home.root),
                "search",
                "--batch",
                str(batch),
                "--k",
                "5",
                "-o",
                str(tmp_path / "out.jsonl"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        result = run_load(server.url, _requests(220, 20), concurrency=16)
        code, err = cli.wait(timeout=300), cli.stderr.read().decode()
        scrapes = [server.scrape() for _ in range(6)]  # each on a new connection: any worker answers
        files = server.metric_files()
    finally:
        server.stop()
    for scraped in scrapes:  # whichever worker answered, the counts are the sum over both
        assert scraped[("infra_rag_http_requests_total", "/v1/search", "200")] == 220
        assert scraped[("infra_rag_http_requests_total", "/v1/answer", "200")] == 20
        assert scraped[("infra_rag_release_served", built_index["version"])] == 2
    assert len({name.rsplit("_", 1)[1] for name in files if name.startswith("counter_")}) >= 2, files
    summary = result.summary()
    assert summary["ok"] == 240, f"{summary} {[r.error or r.body for r in result.replies if r.status != 200][:3]}"
    assert code == 0, err[-1500:]
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 60
    trace_ids = {r.body["trace_id"] for r in result.replies}
    assert len(trace_ids) == 240
    assert not _wait_for_traces(released_home, trace_ids), "answered requests without a trace"
    traces = read_traces(released_home.traces_dir())
    assert traces.filter(traces["origin"] == "cli-batch").height == 60
    assert "Traceback" not in server.log.read_text()


def test_release_switch_during_load_loses_no_request(released_home, tmp_path, built_index):
    """Switched by SIGHUP (the poll interval is an hour), then back by a rollback seen by polling."""
    second = _build_second_version(released_home, built_index)
    server = Server(released_home.root, workers=1, log=tmp_path / "server.log", poll_s=3600)

    def release_and_signal() -> None:
        releases.record(released_home.warehouse(), second, "release", reason="switch under load")
        os.kill(server.proc.pid, signal.SIGHUP)

    try:
        assert server.wait_ready()["version"] == built_index["version"]
        switch = threading.Timer(4.0, release_and_signal)
        switch.start()
        result = run_load(server.url, _requests(600, 0), concurrency=8)
        switch.join()
        health = server.get("/v1/health")
    finally:
        server.stop()
    assert result.summary()["ok"] == 600, result.summary()
    versions = [r.body["version"] for r in sorted(result.replies, key=lambda r: r.finished_at)]
    assert versions[0] == built_index["version"] and versions[-1] == second, "the switch never happened in the run"
    first_new = versions.index(second)
    late_old = [v for v in versions[first_new + 8 :] if v != second]  # at most the in-flight ones finish on the old
    assert not late_old, f"{len(late_old)} responses from the old version after the switch"
    assert health["version"] == second and health["checks"]["load"]["release_switches"] == 2

    from fastapi.testclient import TestClient

    from infra_rag_assets.service import ServiceSettings, create_app

    with TestClient(create_app(released_home, ServiceSettings(poll_s=0.2))) as http:
        assert http.post("/v1/search", json={"question": "What is a Pod?"}).json()["version"] == second
        releases.rollback(released_home.warehouse(), reason="back")
        deadline = time.monotonic() + 30
        while http.app.state.serving.current.version != built_index["version"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert http.post("/v1/search", json={"question": "What is a Pod?"}).json()["version"] == built_index["version"]


def _build_second_version(home: DataHome, built_index: dict) -> str:
    """A real second index version of the same sources (cache hits: no model work)."""
    version = build_index_version(home.root, built_index["sources"])
    assert version != built_index["version"]
    return version
