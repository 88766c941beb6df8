"""The answer eval on the Claude path: the Messages API faked at its HTTP boundary (the only
fake here), everything else real (fixture index, trained judge, caches)."""

from __future__ import annotations

import json

import anthropic
import httpx2
import pytest

from infra_rag_assets.rag.evaluate.answers.answer_eval import answer_benchmark
from infra_rag_assets.rag.evaluate.answers.answer_plan import citation_lookup
from infra_rag_assets.rag.evaluate.benchmarks import BenchRecord
from infra_rag_assets.rag.judge.version_judge import load_version_judge
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.engine import QueryEngine

pytestmark = [pytest.mark.build, pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")]

RECORDS = [
    BenchRecord("c1", "What does maxSurge control in a Deployment?",
                ("kubernetes:concepts_workloads_controllers_deployment",), "the maximum number of extra Pods", "k"),
    BenchRecord("c2", "What is an EndpointSlice?", ("kubernetes:concepts_services-networking_endpoint-slices",),
                "EndpointSlices track network endpoints", "k"),
]  # fmt: skip


def quoting_api(request: httpx2.Request) -> httpx2.Response:
    """Answers with the first sentence of the first document, cited with exact offsets."""
    body = json.loads(request.content)
    text = body["messages"][0]["content"][0]["source"]["data"]
    cited = text[: (text.find(". ") + 1) or len(text)]
    citation = {"type": "char_location", "cited_text": cited, "document_index": 0, "document_title": "",
                "start_char_index": 0, "end_char_index": len(cited)}  # fmt: skip
    return httpx2.Response(200, json={
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": cited, "citations": [citation]}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 1500, "output_tokens": 80},
    })  # fmt: skip


def never_called(request: httpx2.Request) -> httpx2.Response:
    raise AssertionError(f"unexpected model call to {request.url}: the generation cache must answer")


def client(handler) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test", http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
                               max_retries=0)  # fmt: skip


def test_claude_answers_are_judged_costed_and_cached(judged_index, fresh_judged_home, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")  # the serving answerer is then Claude
    home = DataHome.at(fresh_judged_home)  # its caches are written: a private copy
    version = judged_index["version"]
    engine = QueryEngine(home, version)
    judge, note = load_version_judge(home, version)
    assert judge is not None, note
    chunks, docs = citation_lookup(home.warehouse(), version)

    def run(handler):
        return answer_benchmark(
            engine, "claude-smoke", "h", RECORDS, judge=judge, chunks=chunks, docs=docs,
            serving_config="hybrid-page", generations=home.cache("generation"), judgings=home.cache("judging"),
            client=client(handler),
        )  # fmt: skip

    first = run(quoting_api)
    assert first.generation_hits == 0
    for row in first.rows:
        assert row["method"] == "claude" and row["model"] == "claude-sonnet-4-6" and row["prompt_hash"]
        assert row["tokens_in"] == 1500 and row["cost_usd"] == pytest.approx((1500 * 3 + 80 * 15) / 1e6)
        assert row["citation_valid"] is True and row["adherence"] is not None
    again = run(never_called)
    assert again.generation_hits == len(RECORDS) and again.judging_hits == len(RECORDS)
    assert [r["answer"] for r in again.rows] == [r["answer"] for r in first.rows]
