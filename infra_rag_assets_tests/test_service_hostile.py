"""Hostile clients against the real server (`infra-rag serve`: uvicorn on h11, real sockets):
oversized and too many headers, malformed request lines, bad Content-Length, unknown methods,
missing or wrong API keys, and SIGTERM while requests arrive. None may answer 5xx, reset an
accepted connection or starve the normal requests running beside them."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import threading
import time

import pytest
from test_service_load import QUESTIONS, Server

from eval.loadgen import run_load
from infra_rag_assets.rag.operate import releases
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.service import ServiceSettings

pytestmark = pytest.mark.slow
KEY = "hostile-suite-key"
AUTH = {"authorization": f"Bearer {KEY}"}
LIMITS = ServiceSettings()


@pytest.fixture
def released_home(fresh_home, built_index):
    home = DataHome.at(fresh_home)
    releases.record(home.warehouse(), built_index["version"], "release", reason="test")
    return home


def raw(port: int, data: bytes, timeout: float = 10) -> bytes:
    """Send bytes as they are and read until the server closes (every request here says
    ``connection: close`` or is one the server closes on)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def request_head(method: str = "POST", headers: dict | None = None, body: bytes = b"") -> bytes:
    lines = [f"{method} /v1/search HTTP/1.1", "host: 127.0.0.1", f"authorization: Bearer {KEY}",
             f"content-length: {len(body)}", "content-type: application/json", "connection: close"]  # fmt: skip
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def status_and_json(response: bytes) -> tuple[int, dict | None]:
    head, _, body = response.partition(b"\r\n\r\n")
    if not head:
        return 0, None  # closed without an answer
    status = int(head.split(b" ", 2)[1])
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


SEARCH = json.dumps({"question": "What is a Pod?", "k": 1}).encode()
# (what, raw request, status, error type in the JSON envelope or None where uvicorn answers itself)
HOSTILE = [
    ("too many headers", request_head(headers={f"x-h{i}": "v" for i in range(LIMITS.max_header_count)}, body=SEARCH),
     431, "headers_too_large"),
    ("headers over the app's bound", request_head(headers={"x-big": "v" * LIMITS.max_header_bytes}, body=SEARCH),
     431, "headers_too_large"),
    # uvicorn's h11 buffer bounds a head still arriving: here one that has not ended yet
    ("head over uvicorn's buffer", request_head(headers={"x-big": "v" * LIMITS.server_header_buffer_bytes})[:-4],
     400, None),
    ("unknown method", request_head("BREW", body=SEARCH), 405, "method_not_allowed"),
    ("known method, wrong route", request_head("DELETE"), 405, "method_not_allowed"),
    ("malformed request line", b"GARBAGE\r\n\r\n", 400, None),
    ("bad content-length", request_head().replace(b"content-length: 0", b"content-length: abc"), 400, None),
    ("two content-lengths", request_head(headers={"content-length": "5"}, body=SEARCH), 400, None),
    ("no API key", request_head(body=SEARCH).replace(f"authorization: Bearer {KEY}".encode(), b"x-a: b"),
     401, "unauthorized"),
    ("wrong API key", request_head(body=SEARCH).replace(KEY.encode(), b"guess"), 401, "unauthorized"),
]  # fmt: skip


def test_hostile_requests_get_clean_answers_and_never_starve_normal_ones(released_home, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY}\n")
    server = Server(released_home.root, workers=1, log=tmp_path / "server.log", extra=("--api-key-file", str(keys)))
    server.headers = AUTH
    try:
        server.wait_ready()
        for what, data, status, error_type in HOSTILE:
            got, body = status_and_json(raw(server.port, data))
            assert got == status, what
            if error_type:
                assert body and body["error"]["type"] == error_type and body["error"]["trace_id"], what
        stop, hostile_sent = threading.Event(), [0]

        def attack() -> None:
            while not stop.is_set():
                for _, data, _, _ in HOSTILE:
                    raw(server.port, data)
                    hostile_sent[0] += 1

        attackers = [threading.Thread(target=attack, daemon=True) for _ in range(4)]
        for thread in attackers:
            thread.start()
        work = [("/v1/search", {"question": QUESTIONS[i % len(QUESTIONS)], "k": 5}) for i in range(60)]
        result = run_load(server.url, work, concurrency=4, headers=AUTH)
        stop.set()
        for thread in attackers:
            thread.join(30)
        metrics = server.scrape()
    finally:
        server.stop()
    assert result.summary()["ok"] == 60, result.summary()
    assert hostile_sent[0] >= len(HOSTILE), "the attack never ran beside the load"
    assert not any(key[0] == "infra_rag_http_requests_total" and key[-1].startswith("5") for key in metrics), metrics
    assert metrics[("infra_rag_http_rejections_total", "/v1/search", "431")] >= 2
    log = server.log.read_text()
    assert "Traceback" not in log and " 500 " not in log


def test_sigterm_answers_what_was_accepted_and_refuses_cleanly(released_home, tmp_path):
    """Requests running at SIGTERM finish; connections opened before it but used after it are
    still answered (with Connection: close) during the drain; readiness turns 503; no reset."""
    server = Server(released_home.root, workers=1, log=tmp_path / "server.log")
    try:
        server.wait_ready()
        idle = [http.client.HTTPConnection("127.0.0.1", server.port, timeout=30) for _ in range(4)]
        for conn in idle:
            conn.connect()  # accepted by the server, no request yet
        running: list = []
        load = threading.Thread(
            target=lambda: running.append(
                run_load(server.url, [("/v1/search", {"question": q, "k": 5}) for q in QUESTIONS * 3], concurrency=6)
            )
        )
        load.start()
        time.sleep(0.5)  # the load is running
        os.kill(server.proc.pid, signal.SIGTERM)
        time.sleep(0.3)
        ready, _ = status_and_json(raw(server.port, b"GET /v1/readyz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"))
        late = []
        for conn in idle:
            conn.request("POST", "/v1/search", body=SEARCH, headers={"content-type": "application/json"})
            reply = conn.getresponse()
            late.append((reply.status, reply.getheader("connection"), json.loads(reply.read())))
        load.join(60)
        code = server.proc.wait(timeout=LIMITS.drain_s + LIMITS.graceful_shutdown_s + 20)
    finally:
        server.stop()
    assert ready == 503
    assert [(status, connection) for status, connection, _ in late] == [(200, "close")] * 4
    assert all(body["hits"] for _, _, body in late)
    replies = running[0].replies
    assert replies and all(r.status in (200, 503) for r in replies), [(r.status, r.error) for r in replies]
    assert code in (0, -signal.SIGTERM)
    assert "draining" in server.log.read_text()
