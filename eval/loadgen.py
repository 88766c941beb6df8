"""A bounded loopback load generator for the HTTP service (test_service_load.py and eval/bench_serving.py).

It lives in eval/, not in the package: a load generator is a measuring tool, never part of what is served.

Fixed request count, fixed concurrency, a timeout per request, loopback targets only: it
stops by itself and never reaches past this machine. Each client thread keeps one HTTP/1.1
connection (as a real client pool would) and reconnects after a connection error.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Reply:
    path: str
    status: int  # 0 = no HTTP response (connection reset, timeout)
    latency_ms: float
    body: dict | None = None
    error: str = ""
    finished_at: float = 0.0


@dataclass
class LoadResult:
    replies: list[Reply]
    wall_s: float
    concurrency: int
    by_status: dict[int, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        ok = [r for r in self.replies if 200 <= r.status < 300]
        lat = sorted(r.latency_ms for r in ok)
        return {
            "requests": len(self.replies),
            "concurrency": self.concurrency,
            "ok": len(ok),
            "errors": len(self.replies) - len(ok),
            "by_status": dict(sorted(self.by_status.items())),
            "rps": round(len(ok) / self.wall_s, 1) if self.wall_s else 0.0,
            "p50_ms": _pct(lat, 0.50),
            "p95_ms": _pct(lat, 0.95),
            "max_ms": round(lat[-1], 1) if lat else None,
            "wall_s": round(self.wall_s, 2),
        }


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return round(values[min(len(values) - 1, int(q * len(values)))], 1)


def run_load(
    base_url: str,
    requests: list[tuple[str, dict]],
    concurrency: int,
    *,
    timeout_s: float = 60.0,
    headers: dict[str, str] | None = None,
) -> LoadResult:
    """POST every (path, json body) once, ``concurrency`` at a time, with ``headers`` added (e.g.
    an API key); returns every reply in order."""
    parts = urlsplit(base_url)
    if not is_loopback(parts.hostname or ""):
        raise ValueError(f"load generator targets loopback only, not {parts.hostname!r}")
    replies: list[Reply | None] = [None] * len(requests)
    cursor, lock = [0], threading.Lock()

    def client() -> None:
        conn = None
        while True:
            with lock:
                index = cursor[0]
                cursor[0] += 1
            if index >= len(requests):
                break
            if conn is None:
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
            replies[index], healthy = _post(conn, *requests[index], headers or {})
            if not healthy:
                conn.close()
                conn = None
        if conn is not None:
            conn.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(max(1, concurrency))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result = LoadResult([r for r in replies if r is not None], time.perf_counter() - started, concurrency)
    for reply in result.replies:
        result.by_status[reply.status] = result.by_status.get(reply.status, 0) + 1
    return result


def _post(conn: http.client.HTTPConnection, path: str, body: dict, headers: dict[str, str]) -> tuple[Reply, bool]:
    payload = json.dumps(body).encode()
    started = time.perf_counter()
    try:
        conn.request("POST", path, body=payload, headers={"content-type": "application/json", **headers})
        response = conn.getresponse()
        raw = response.read()
        elapsed = (time.perf_counter() - started) * 1000
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        keep = response.getheader("connection", "").lower() != "close"
        return Reply(path, response.status, elapsed, parsed, finished_at=time.perf_counter()), keep
    except (OSError, http.client.HTTPException) as exc:
        elapsed = (time.perf_counter() - started) * 1000
        return Reply(path, 0, elapsed, None, f"{type(exc).__name__}: {exc}", time.perf_counter()), False
