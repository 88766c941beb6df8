"""POST /v1/answer as server-sent events over the built fixture index: the extractive answerer,
and the Claude path with the Messages API faked at its HTTP boundary (httpx MockTransport, the
only fake; the SDK's own stream parser and our citation mapping run for real)."""

from __future__ import annotations

import json

import anthropic
import httpx2
import pytest
from fastapi.testclient import TestClient

from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.operate.traces import read_traces
from infra_rag_assets.service import ServiceSettings, create_app

pytestmark = [pytest.mark.build, pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")]
QUESTION = {"question": "What does maxSurge control in a Deployment?", "k": 4}


@pytest.fixture
def http(fresh_home, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with TestClient(create_app(DataHome.at(fresh_home), ServiceSettings(poll_s=0.2))) as client:
        yield client


def events(text: str) -> list[tuple[str, dict]]:
    parsed = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        parsed.append((fields["event"], json.loads(fields["data"])))
    return parsed


def test_the_extractive_answer_streams_as_events_that_join_to_it(http):
    reply = http.post("/v1/answer", json={**QUESTION, "offline": True}, headers={"accept": "text/event-stream"})
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
    stream = events(reply.text)
    kinds = [kind for kind, _ in stream]
    assert kinds[0] == "meta" and kinds[-1] == "answer" and set(kinds[1:-1]) == {"delta"} and len(kinds) > 3
    final = stream[-1][1]
    assert final["method"] == "extractive" and final["citations"] and final["outcome"] == "answered"
    assert "".join(data["text"] for kind, data in stream if kind == "delta") == final["text"]
    assert reply.headers["x-trace-id"] == stream[0][1]["trace_id"] == final["trace_id"]
    plain = http.post("/v1/answer", json={**QUESTION, "offline": True}).json()
    assert plain["text"] == final["text"] and plain["citations"] == final["citations"]
    by_query = http.post("/v1/answer?stream=true", json={**QUESTION, "offline": True})
    assert by_query.headers["content-type"].startswith("text/event-stream") and events(by_query.text)[-1][1]["text"]
    http.app.state.serving.sink.flush()
    traced = read_traces(http.app.state.serving.home.traces_dir())
    assert final["trace_id"] in set(traced["trace_id"])


def test_a_stream_request_that_fails_validation_gets_the_json_envelope(http):
    reply = http.post("/v1/answer?stream=true", json={"question": " "})
    assert reply.status_code == 422 and reply.json()["error"]["field"] == "question"
    missing = http.post("/v1/answer?stream=true", json={"question": "ok", "version": "nope"})
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "version_not_found"


def _sse(*events_: dict) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events_)


def streaming_api(request: httpx2.Request) -> httpx2.Response:
    """The Messages API's stream: the first sentence of the first document in three text
    deltas, cited with exact offsets."""
    body = json.loads(request.content)
    assert body["stream"] is True
    text = body["messages"][0]["content"][0]["source"]["data"]
    cited = text[: (text.find(". ") + 1) or len(text)]
    third = max(1, len(cited) // 3)
    pieces = [cited[:third], cited[third : 2 * third], cited[2 * third :]]
    citation = {"type": "char_location", "cited_text": cited, "document_index": 0, "document_title": "",
                "start_char_index": 0, "end_char_index": len(cited)}  # fmt: skip
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 1500, "output_tokens": 1}}  # fmt: skip
    stream = _sse(
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "", "citations": []}},
        *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}} for p in pieces),
        {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": citation}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 80}},
        {"type": "message_stop"},
    )  # fmt: skip
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=stream)


def overloaded_api(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


def fake_client(handler) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test", http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
                               max_retries=0)  # fmt: skip


def test_the_claude_answer_streams_text_deltas_then_its_citations(http, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")  # the serving answerer is then Claude
    http.app.state.serving.claude_client = fake_client(streaming_api)
    reply = http.post("/v1/answer", json=QUESTION, headers={"accept": "text/event-stream"})
    assert reply.status_code == 200
    stream = events(reply.text)
    deltas = [data["text"] for kind, data in stream if kind == "delta"]
    final = stream[-1][1]
    assert stream[-1][0] == "answer" and len(deltas) == 3
    assert final["method"] == "claude" and final["outcome"] == "answered" and final["usage"]["output_tokens"] == 80
    [citation] = final["citations"]
    assert citation["match"] == "exact" and citation["passage_number"] == 1
    assert citation["cited_text"] == "".join(deltas)
    assert final["text"] == "".join(deltas).rstrip() + " [1]"  # the final text carries the citation marker


def test_a_failing_model_call_ends_the_stream_with_an_error_outcome_not_a_5xx(http, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    http.app.state.serving.claude_client = fake_client(overloaded_api)
    reply = http.post("/v1/answer", json=QUESTION, headers={"accept": "text/event-stream"})
    assert reply.status_code == 200
    kind, final = events(reply.text)[-1]
    assert kind == "answer" and final["outcome"] == "error" and "529" in final["error"]
    assert http.post("/v1/search", json=QUESTION).status_code == 200
