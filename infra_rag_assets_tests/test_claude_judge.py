"""The Claude judge over a faked HTTP boundary (the only fake): a real ``anthropic.Anthropic``
client serialises our request and parses the canned reply, so these tests pin the request we
send (model, prompt version, tool schema, passages) and how every kind of reply maps to a
result. The installed SDK is built on ``httpx2`` (same API as ``httpx.MockTransport``)."""

from __future__ import annotations

import json

import anthropic
import httpx2
import pytest
from test_rag_answer import FakeAPI  # canned responses in order, every request recorded

from infra_rag_assets.rag.judge.batch import Item
from infra_rag_assets.rag.judge.claude.claude_judge import MAX_ANSWER_CHARS, ClaudeJudge
from infra_rag_assets.rag.judge.claude.judge_prompts import PROMPT_VERSION, TOOL_NAME, TOOL_SCHEMA, prompt_hash

pytestmark = pytest.mark.unit

PASSAGE = "The default value of maxSurge is 25%. maxSurge is an optional field of a Deployment's rolling update."
OTHER = "maxUnavailable is an optional field that specifies the maximum number of Pods that can be unavailable."
ANSWER = "The default value of maxSurge is 25% [1]. It was removed in release 1.12 [2]."
ITEM = Item("a1", "What is the default maxSurge?", (("p-surge", PASSAGE), ("p-unavail", OTHER)), ANSWER)
VERDICT = {
    "grounded": False,
    "fabricated": True,
    "gap_named": False,
    "correct": None,
    "citations": "wrong",
    "sentences": [{"n": 1, "support": 0.97, "passage": "p-surge"}, {"n": 2, "support": 0.04, "passage": None}],
    "unsupported_spans": ["removed in release 1.12"],
    "reason": "release 1.12 is in no passage",
}


def tool_reply(verdict: dict, usage: dict | None = None, model: str = "claude-sonnet-4-6") -> httpx2.Response:
    content = [{"type": "tool_use", "id": "toolu_1", "name": TOOL_NAME, "input": verdict}]
    return message(content, usage, model)


def message(content: list, usage: dict | None = None, model: str = "claude-sonnet-4-6") -> httpx2.Response:
    return httpx2.Response(200, json={
        "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": usage or {"input_tokens": 2000, "output_tokens": 120},
    })  # fmt: skip


def api_error(status: int, kind: str, text: str) -> httpx2.Response:
    return httpx2.Response(status, json={"type": "error", "error": {"type": kind, "message": text}})


def judged(*responses, item: Item = ITEM, reference: str = "", model: str | None = None) -> tuple[dict, FakeAPI]:
    api = FakeAPI(*responses)
    return ClaudeJudge(client=api.client(), model=model).judge(item, reference), api


def test_the_request_carries_model_prompt_schema_passages_and_numbered_sentences(monkeypatch):
    monkeypatch.setenv("INFRA_RAG_JUDGE_MODEL", "claude-haiku-4-5")
    _, api = judged(tool_reply(VERDICT), reference="25% of the desired Pods.")
    body = api.body()
    assert body["model"] == "claude-haiku-4-5"
    assert body["tools"][0]["name"] == TOOL_NAME and body["tools"][0]["input_schema"] == TOOL_SCHEMA
    assert body["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
    assert PROMPT_VERSION == "claude-judge@1" and body["metadata"]["user_id"].endswith(PROMPT_VERSION)
    assert "never against your own knowledge" in body["system"]
    user = body["messages"][0]["content"]
    assert f'<passage n="1" id="p-surge">\n{PASSAGE}\n</passage>' in user
    assert f'<passage n="2" id="p-unavail">\n{OTHER}\n</passage>' in user
    assert f"<answer>\n{ANSWER}\n</answer>" in user
    assert "1. The default value of maxSurge is 25% (cites: 1)" in user
    assert "2. It was removed in release 1.12 (cites: 2)" in user
    assert "<reference_answer>\n25% of the desired Pods.\n</reference_answer>" in user
    assert user.rstrip().endswith("an empty list when everything is supported.")
    assert "What is the default maxSurge?" in user


def test_a_well_formed_reply_maps_to_axes_sentences_spans_and_cost():
    result, _ = judged(tool_reply(VERDICT))
    assert result["error"] is None and result["backend"] == "claude"
    assert result["axes"] == {"grounded": False, "fabricated": True, "gap_named": False, "correct": None,
                              "citations": "wrong"}  # fmt: skip
    assert [s["supported"] for s in result["sentences"]] == [0.97, 0.04]
    assert [s["passage"] for s in result["sentences"]] == ["p-surge", None]
    assert result["sentences"][0]["text"] == "The default value of maxSurge is 25%"  # the trained judge's split
    assert result["adherence"] == pytest.approx(0.97 * 0.04, abs=1e-4) and result["adherent"] is False
    assert result["supported_at"] == 0.5 and "unsupported_spans" not in result["sentences"][0]
    second = result["sentences"][1]  # as the trained judge: an unsupported sentence points at its words
    assert second["unsupported_spans"] == [{"start": 7, "end": 30, "text": "removed in release 1.12"}]
    assert second["text"][7:30] == "removed in release 1.12"
    span = result["unsupported_spans"][0]
    assert span["text"] == "removed in release 1.12" and ANSWER[span["start"] : span["end"]] == span["text"]
    assert result["usage"] == {"input_tokens": 2000, "output_tokens": 120}
    assert result["cost_usd"] == pytest.approx((2000 * 3.0 + 120 * 15.0) / 1e6)  # sonnet list price per MTok
    assert result["judge"] == f"claude:claude-sonnet-4-6:{PROMPT_VERSION}:{prompt_hash()}"
    assert {"relevance", "utilization", "completeness"} <= set(result) and result["relevance"] is None


def test_cost_follows_the_model_and_an_unpriced_model_costs_none():
    usage = {"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 1000}
    opus, _ = judged(tool_reply(VERDICT, usage), model="claude-opus-4-1")
    assert opus["cost_usd"] == pytest.approx((1100 * 15.0 + 100 * 75.0) / 1e6)  # cache reads bill at a tenth
    unknown, _ = judged(tool_reply(VERDICT, usage), model="claude-unknown-9")
    assert unknown["cost_usd"] is None and unknown["usage"]["input_tokens"] == 1000


def test_repairs_keep_the_meaning_strings_positions_case_and_whitespace():
    verdict = {**VERDICT, "grounded": "false", "fabricated": "true", "citations": "Wrong",
               "sentences": [{"n": "1", "support": "1.4", "passage": 1}, {"n": 2, "support": -0.2, "passage": "[2]"}],
               "unsupported_spans": ["REMOVED in\n release 1.12", "not in the answer at all"]}  # fmt: skip
    result, _ = judged(tool_reply(verdict))
    assert result["error"] is None
    assert result["axes"]["grounded"] is False and result["axes"]["fabricated"] is True
    assert result["axes"]["citations"] == "wrong"
    assert [s["supported"] for s in result["sentences"]] == [1.0, 0.0]
    assert [s["passage"] for s in result["sentences"]] == ["p-surge", "p-unavail"]
    assert [s["text"] for s in result["unsupported_spans"]] == ["removed in release 1.12"]  # the answer's own text
    assert "1 unsupported span(s) dropped: not substrings of the answer" in result["note"]


def test_a_json_object_in_plain_text_is_read_and_correct_needs_a_reference():
    text = "Here is my grade:\n" + json.dumps({**VERDICT, "correct": True})
    result, _ = judged(message([{"type": "text", "text": text}]))
    assert result["error"] is None and result["axes"]["correct"] is None
    assert "correct ignored: no reference answer was given" in result["note"]
    with_reference, _ = judged(tool_reply({**VERDICT, "correct": False}), reference="25%.")
    assert with_reference["axes"]["correct"] is False


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (message([{"type": "text", "text": '{"grounded": tru, "sentences": ['}]),
         "no record_judgement call and no JSON"),
        (tool_reply({k: v for k, v in VERDICT.items() if k not in ("fabricated", "citations")}),
         "lacks the axes fabricated, citations"),
        (tool_reply({**VERDICT, "grounded": "maybe"}), "axis 'grounded' must be true or false, got 'maybe'"),
        (tool_reply({**VERDICT, "citations": "some"}), "citations must be one of valid, wrong, none"),
        (tool_reply({**VERDICT, "sentences": VERDICT["sentences"][:1]}), "no verdict for answer sentence(s) 2 of 2"),
        (tool_reply({**VERDICT, "sentences": [{"n": 1}]}), "lacks a number n or support"),
        (tool_reply({**VERDICT, "unsupported_spans": "removed"}), "'unsupported_spans' must be a list"),
    ],
)  # fmt: skip
def test_unreadable_replies_are_judged_with_an_error_not_a_crash(reply, error):
    result, _ = judged(reply)
    assert result["error"].startswith("unreadable judgement (stop_reason=tool_use): ") and error in result["error"]
    assert result["adherence"] is None and result["sentences"] == [] and result["axes"]["grounded"] is None
    assert result["usage"]["input_tokens"] == 2000 and result["cost_usd"] > 0  # the call was billed all the same


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (api_error(529, "overloaded_error", "Overloaded"), "OverloadedError: HTTP 529: Overloaded"),
        (api_error(401, "authentication_error", "invalid x-api-key"),
         "AuthenticationError: HTTP 401: invalid x-api-key"),
        (httpx2.ReadTimeout("timed out"), "APITimeoutError"),
    ],
)  # fmt: skip
def test_api_failures_are_judged_with_an_error(reply, error):
    result, api = judged(reply)
    assert result["error"].startswith(error) and "\n" not in result["error"]
    assert result["adherence"] is None and result["cost_usd"] == 0.0 and len(api.requests) == 1


def test_an_overloaded_api_is_retried_by_the_client():
    api = FakeAPI(api_error(529, "overloaded_error", "Overloaded"), tool_reply(VERDICT))
    result = ClaudeJudge(client=api.client(max_retries=1)).judge(ITEM)
    assert result["error"] is None and len(api.requests) == 2


def never_called(request: httpx2.Request) -> httpx2.Response:
    raise AssertionError(f"unexpected HTTP call to {request.url}")


@pytest.mark.parametrize(
    ("item", "note", "adherence"),
    [
        (Item("e", "q", ITEM.passages, ""), "the answer has no sentence to judge", None),
        (Item("g", "q", ITEM.passages, "The indexed documentation does not cover this question."),
         "the answer has no sentence to judge", None),
        (Item("n", "q", (), ANSWER), "no passages: nothing can support the answer", 0.0),
        (Item("b", "q", (("1", "  "),), ANSWER), "no passages: nothing can support the answer", 0.0),
        (Item("l", "q", ITEM.passages, "Pods scale. " * (MAX_ANSWER_CHARS // 12 + 1)),
         "not judged: the answer has", None),
    ],
)  # fmt: skip
def test_degenerate_answers_get_a_clear_result_without_a_call(item, note, adherence):
    client = anthropic.Anthropic(api_key="t", http_client=httpx2.Client(transport=httpx2.MockTransport(never_called)))
    result = ClaudeJudge(client=client).judge(item)
    assert result["note"].startswith(note) and result["adherence"] == adherence and result["error"] is None


def test_many_passages_send_the_cited_ones_and_keep_their_numbers():
    passages = tuple((f"f{i}", f"filler text number {i}.") for i in range(10_000)) + (("right", PASSAGE),)
    answer = "The default value of maxSurge is 25% [10001]."
    verdict = {**VERDICT, "sentences": [{"n": 1, "support": 0.9, "passage": "right"}], "unsupported_spans": []}
    result, api = judged(tool_reply(verdict), item=Item("m", "q", passages, answer))
    user = api.body()["messages"][0]["content"]
    assert f'<passage n="10001" id="right">\n{PASSAGE}\n</passage>' in user
    assert '<passage n="40" id="f39">' in user and '<passage n="41"' not in user
    assert len(user) < 5_000 and "judged on 41 of 10001 passages" in result["note"]
    assert result["sentences"][0]["passage"] == "right"
