"""The body bound as ASGI middleware sees it: a body trickled slower than the deadline gets a
408 envelope and the app never runs; a complete body reaches the app exactly once."""

from __future__ import annotations

import asyncio
import json

import pytest

from infra_rag_assets.service.middleware import BodyLimit

pytestmark = pytest.mark.unit
SCOPE = {"type": "http", "path": "/v1/search", "headers": [(b"content-type", b"application/json")]}


def run(max_bytes: int, timeout_s: float, messages: list[dict], gap_s: float) -> tuple[list[dict], list[bytes]]:
    sent, seen_by_app = [], []

    async def receive() -> dict:
        await asyncio.sleep(gap_s)
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    async def app(scope, receive, send) -> None:
        seen_by_app.append((await receive())["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    asyncio.run(BodyLimit(app, max_bytes, timeout_s)(SCOPE, receive, send))
    return sent, seen_by_app


def test_a_slow_body_is_408_and_never_reaches_the_app():
    trickle = [{"type": "http.request", "body": b"x", "more_body": True} for _ in range(50)]
    sent, seen = run(1024, 0.3, trickle, gap_s=0.05)
    assert sent[0]["status"] == 408 and not seen
    assert json.loads(sent[1]["body"])["error"]["type"] == "body_timeout"
    assert (b"connection", b"close") in sent[0]["headers"]


def test_a_body_in_time_reaches_the_app_whole_and_an_oversized_one_is_413():
    parts = [{"type": "http.request", "body": b'{"q":', "more_body": True},
             {"type": "http.request", "body": b' "x"}', "more_body": False}]  # fmt: skip
    sent, seen = run(1024, 5, parts, gap_s=0.01)
    assert sent[0]["status"] == 200 and seen == [b'{"q": "x"}']
    big = [{"type": "http.request", "body": b"x" * 600, "more_body": True} for _ in range(3)]
    sent, seen = run(1024, 5, big, gap_s=0)
    assert sent[0]["status"] == 413 and not seen
