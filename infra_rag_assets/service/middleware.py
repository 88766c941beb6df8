"""ASGI middleware: bounds on headers, body size and in-flight work.

Each answers before any JSON is parsed or any thread is taken, so an overloaded or abused
worker spends almost nothing on a request it refuses.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


async def send_error(
    send: Send, status: int, error_type: str, message: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    trace_id = uuid.uuid4().hex
    body = json.dumps({"error": {"type": error_type, "message": message, "trace_id": trace_id}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-trace-id", trace_id.encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class HeaderLimit:
    """431 for a request with more than ``max_count`` headers or more than ``max_bytes`` of them.

    uvicorn (h11) already refuses a request head over its buffer (``server_header_buffer_bytes``)
    with a plain-text 400; this bound sits below it so the common case gets the JSON envelope,
    and it also bounds the count, which no server layer here does."""

    def __init__(self, app: Any, max_count: int, max_bytes: int) -> None:
        self.app, self.max_count, self.max_bytes = app, max_count, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = scope.get("headers") or []
            if len(headers) > self.max_count:
                message = f"more than {self.max_count} request headers"
                return await send_error(send, 431, "headers_too_large", message)
            if sum(len(k) + len(v) for k, v in headers) > self.max_bytes:
                message = f"request headers over {self.max_bytes} bytes"
                return await send_error(send, 431, "headers_too_large", message)
        await self.app(scope, receive, send)


class BodyLimit:
    """413 for bodies over ``max_bytes``, by Content-Length or by counting a streamed (chunked)
    body, and the whole body read before the app sees the request: so a request counts against
    the in-flight bound (``InflightLimit``, inside this one) only once its body has arrived, and
    an oversized chunked body is refused here instead of surfacing as a JSON error."""

    def __init__(self, app: Any, max_bytes: int, timeout_s: float) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            return await self._refuse(send)
        chunks: list[bytes] = []
        try:  # a body trickled in a byte at a time must not hold the connection for ever
            async with asyncio.timeout(self.timeout_s):
                complete = await self._read(receive, chunks)
        except TimeoutError:
            message = f"request body not received within {self.timeout_s:g} s"
            return await send_error(send, 408, "body_timeout", message, [(b"connection", b"close")])
        if complete is None:
            return  # the client left before its body arrived: nothing to answer
        if not complete:
            return await self._refuse(send)
        body, delivered = b"".join(chunks), False

        async def replay() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect notice, as the server sends it

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive, chunks: list[bytes]) -> bool | None:
        """Read the body into ``chunks``: True when complete, False when over the bound, None
        when the client disconnected."""
        seen = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                return False
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return True

    async def _refuse(self, send: Send) -> None:
        await send_error(send, 413, "body_too_large", f"request body over {self.max_bytes} bytes")


class InflightLimit:
    """At most ``max_inflight`` query requests at once in this worker, and of them at most
    ``max_judge_inflight`` judge requests (seconds of CPU each, so a few clients judging would
    starve every search); past either, 503 + Retry-After at once.

    Runs on the event loop thread, so the counters need no lock. ``state`` (ServingState)
    holds the counters /health reports."""

    def __init__(self, app: Any, state: Any, paths: frozenset[str], judge_paths: frozenset[str]) -> None:
        self.app, self.state, self.paths, self.judge_paths = app, state, paths | judge_paths, judge_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in self.paths:
            return await self.app(scope, receive, send)
        settings, judge = self.state.settings, scope["path"] in self.judge_paths
        if self.state.inflight >= settings.max_inflight:
            return await self._refuse(send, "server busy: retry shortly")
        if judge and self.state.judging >= settings.max_judge_inflight:
            busy = f"judge busy: at most {settings.max_judge_inflight} judge request(s) at once per worker"
            return await self._refuse(send, f"{busy}; retry shortly")
        self.state.inflight += 1
        self.state.judging += judge
        try:
            await self.app(scope, receive, send)
        finally:
            self.state.inflight -= 1
            self.state.judging -= judge

    async def _refuse(self, send: Send, message: str) -> None:
        self.state.rejected += 1
        retry = [(b"retry-after", str(self.state.settings.retry_after_s).encode())]
        await send_error(send, 503, "overloaded", message, retry)


class HeadAsGet:
    """HEAD answered as the GET of the same path, headers only (RFC 9110: every GET resource
    takes HEAD); FastAPI routes declare GET alone, so HEAD was 405."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)

        async def headers_only(message: dict) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)
