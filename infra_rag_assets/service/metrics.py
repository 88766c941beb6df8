"""Prometheus metrics of the service: requests by route template and status, latency,
in-flight requests, rejections, the trace queue and the release each worker serves.

With several uvicorn workers each is its own process, so the counters live in
prometheus_client's multiprocess files (``PROMETHEUS_MULTIPROC_DIR``, a fresh directory per
`infra-rag serve` start) and a scrape answered by any worker sums them all. Without that
directory (tests, a bare ``create_app``) the values live in this app's own registry.

Labels are bounded whatever clients send: the route is one of the app's route templates or
``unmatched``, the method one of the standard ones or ``other``.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from .. import settings
from .middleware import Receive, Scope, Send

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
QUERY_ROUTES = frozenset({"/search", "/answer", "/judge", "/v1/search", "/v1/answer", "/v1/judge"})
REJECTIONS = {
    401: "unauthorized",
    413: "body_too_large",
    429: "rate_limited",
    431: "headers_too_large",
    503: "unavailable",
}
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_LIVE_FILE = re.compile(r"^gauge_live\w+?_(\d+)\.db$")
__all__ = ["CONTENT_TYPE_LATEST", "RecordMetrics", "ServiceMetrics"]


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.directory = settings.metrics_dir()
        reg = self.registry
        self.requests = Counter(
            "infra_rag_http_requests", "HTTP requests answered", ["route", "method", "status"], registry=reg
        )
        self.latency = Histogram(
            "infra_rag_http_request_duration_seconds",
            "query routes: time from request to the end of the response (a stream: its last event)",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.inflight = Gauge(
            "infra_rag_http_inflight_requests", "requests being answered", registry=reg, multiprocess_mode="livesum"
        )
        self.rejections = Counter(
            "infra_rag_http_rejections", "requests refused by a bound or a check", ["route", "status", "reason"],
            registry=reg,
        )  # fmt: skip
        self.trace_queue = Gauge(
            "infra_rag_trace_queue_depth",
            "traces waiting for the writer (each worker's, as of its last request)",
            registry=reg,
            multiprocess_mode="livesum",
        )
        self.release = Gauge(
            "infra_rag_release_served",
            "workers serving each index version (1 per worker on the version it answers with)",
            ["version"],
            registry=reg,
            multiprocess_mode="livesum",
        )

    def switched(self, old: str | None, new: str) -> None:
        if old is not None:
            self.release.labels(old).set(0)
        self.release.labels(new).set(1)

    def scrape(self) -> bytes:
        """The text exposition: every worker's values when multiprocess, else this app's."""
        if not self.directory:
            return generate_latest(self.registry)
        _forget_dead_workers(self.directory)
        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged, path=self.directory)
        return generate_latest(merged)


def _forget_dead_workers(directory: str) -> None:
    """uvicorn restarts workers (SIGHUP, a crash) without a hook to tell prometheus_client, so
    live gauges of exited processes are dropped here; their counters stay (they happened)."""
    for name in os.listdir(directory):
        match = _LIVE_FILE.match(name)
        if match and not _alive(int(match.group(1))):
            multiprocess.mark_process_dead(int(match.group(1)), directory)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RecordMetrics:
    """Outermost middleware: every request is counted, refused ones included."""

    def __init__(self, app: Any, metrics: ServiceMetrics, state: Any, routes: frozenset[str]) -> None:
        self.app, self.metrics, self.state, self.routes = app, metrics, state, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        route = scope["path"] if scope["path"] in self.routes else "unmatched"
        method = scope["method"] if scope["method"] in METHODS else "other"
        status = ["disconnect"]  # no response: the client left before its body arrived
        ended = [False]

        async def recording_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = str(message["status"])
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                ended[0] = True
            await send(message)

        async def watching_receive() -> dict:
            message = await receive()
            if message["type"] == "http.disconnect" and not ended[0]:
                status[0] = "disconnect"  # left before the response ended (a stream): not a plain 200
            return message

        m, started = self.metrics, time.perf_counter()
        m.inflight.inc()
        try:
            await self.app(scope, watching_receive, recording_send)
        except Exception:
            status[0] = "500"  # Starlette's outer error middleware answers it
            raise
        finally:
            m.inflight.dec()
            if route in QUERY_ROUTES:  # the probes' and scrapes' latency is not worth a scrape's cost
                m.latency.labels(route).observe(time.perf_counter() - started)
            m.requests.labels(route, method, status[0]).inc()
            reason = REJECTIONS.get(int(status[0])) if status[0].isdigit() else None
            if reason:
                m.rejections.labels(route, status[0], reason).inc()
            m.trace_queue.set(self.state.sink.queued())
