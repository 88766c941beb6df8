"""POST /v1/judge under load, at loopback (`infra-rag serve`, a real uvicorn worker): judge
requests are bounded in number (their own in-flight bound inside --max-inflight) and in size
(passages × characters), so clients judging cannot starve the searches beside them."""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.error
import urllib.request

import pytest
from conftest import load_factor
from test_service_load import QUESTIONS, Server

from infra_rag_assets.service.models import MAX_JUDGE_CHARS

pytestmark = pytest.mark.slow

SENTENCE = "The default value of maxSurge is 25% and it bounds how many extra Pods a rollout creates. "


def _post(url: str, body: dict, timeout: float = 120) -> tuple[int, dict, float]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read()), time.perf_counter() - started
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), time.perf_counter() - started


def _judge_body(chars: int) -> dict:
    passages = [{"id": f"p{i}", "text": (SENTENCE * 40)[:4000]} for i in range(max(chars // 4000, 1))]
    answer = "The default value of maxSurge is 25%. [1] It bounds extra Pods. [2]"
    return {"id": "load", "question": "What is the default maxSurge?", "passages": passages, "answer": answer}


def _search_p95(url: str, n: int) -> float:
    times = [_post(f"{url}/v1/search", {"question": QUESTIONS[i % len(QUESTIONS)], "k": 5})[2] for i in range(n)]
    return statistics.quantiles(times, n=20)[-1]


def test_judge_requests_are_bounded_and_searches_keep_their_latency(fresh_judged_home, tmp_path):
    server = Server(fresh_judged_home, workers=1, log=tmp_path / "serve.log", extra=("--max-inflight", "8"))
    try:
        server.wait_ready()
        url = server.url
        too_big = _post(f"{url}/v1/judge", _judge_body(MAX_JUDGE_CHARS + 8000))
        assert too_big[0] == 422 and f"{MAX_JUDGE_CHARS:,}" in too_big[1]["error"]["message"], too_big[1]
        assert _post(f"{url}/v1/judge", _judge_body(16000))[0] == 200  # warm the judge
        unloaded = _search_p95(url, 30)

        statuses: list[tuple[int, str]] = []
        stop = threading.Event()

        def judge_client() -> None:
            while not stop.is_set():
                status, body, _ = _post(f"{url}/v1/judge", _judge_body(16000))
                statuses.append((status, body.get("error", {}).get("message", "")))
                time.sleep(0.05) if status == 503 else None

        clients = [threading.Thread(target=judge_client) for _ in range(4)]
        for client in clients:
            client.start()
        time.sleep(1.0)
        loaded = _search_p95(url, 30)
        stop.set()
        for client in clients:
            client.join(timeout=120)
        assert not any(c.is_alive() for c in clients)
        codes = {code for code, _ in statuses}
        assert codes <= {200, 503} and 200 in codes and 503 in codes, statuses[:10]
        assert all("judge busy" in message for code, message in statuses if code == 503)
        # 4 judge clients, 1 judge at a time: searches stay within 2x, plus 50 ms of noise on a quiet
        # box, scaled by the load the other xdist worker adds (a clean-clone CI run saw 18 -> 108 ms
        # at -n 2; alone the same tree gives 25 -> 39-49 ms)
        noise = 0.05 * load_factor()
        assert loaded <= 2 * unloaded + noise, (loaded, unloaded, noise)
        print(f"search p95 unloaded {unloaded * 1000:.0f} ms, beside 4 judge clients {loaded * 1000:.0f} ms")
    finally:
        server.stop()
