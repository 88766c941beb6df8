"""Answering with citations: Claude over a faked HTTP boundary, the extractive fallback, routing.

The only fake is the HTTP transport: a real ``anthropic.Anthropic`` client serialises the
request and parses the response, so these tests pin the wire format we send and the citation
JSON we map. Note the installed SDK is built on ``httpx2`` and rejects ``httpx`` objects, so
the transport is ``httpx2.MockTransport`` (same API as ``httpx.MockTransport``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import anthropic
import httpx2
import pytest

from infra_rag_assets.rag.answer.extractive import EXTRACTIVE_PREFIX, answer_extractive, sentence_spans
from infra_rag_assets.rag.answer.generate import DEFAULT_MODEL, answer, answer_with_claude
from infra_rag_assets.rag.answer.prompts import ABSTENTION, PROMPTS, get_prompt

DEPLOYMENT_URL = "https://kubernetes.io/docs/concepts/workloads/controllers/deployment/"

UNAVAILABLE = """##### Max Unavailable

`.spec.strategy.rollingUpdate.maxUnavailable` is an optional field that specifies the maximum number
of Pods that can be unavailable during the update process. The value can be an absolute number (for example, 5)
or a percentage of desired Pods (for example, 10%). The absolute number is calculated from percentage by
rounding down. The value cannot be 0 if `.spec.strategy.rollingUpdate.maxSurge` is 0. The default value is 25%."""

SURGE = """##### Max Surge

`.spec.strategy.rollingUpdate.maxSurge` is an optional field that specifies the maximum number of Pods
that can be created over the desired number of Pods. The value can be an absolute number (for example, 5) or a
percentage of desired Pods (for example, 10%). The value cannot be 0 if `MaxUnavailable` is 0. The absolute number
is calculated from the percentage by rounding up. The default value is 25%.

For example, when this value is set to 30%, the new ReplicaSet can be scaled up immediately when the
rolling update starts, such that the total number of old and new Pods does not exceed 130% of desired
Pods."""

EXAMPLE = """Here are some Rolling Update Deployment examples that use the `maxUnavailable` and `maxSurge`:

```yaml
apiVersion: apps/v1
kind: Deployment
spec:
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
```"""

# The cleaned document the chunks were cut from: doc offsets must slice it exactly.
DOC = f"""# Deployments

A Deployment provides declarative updates for Pods and ReplicaSets.

#### Rolling Update Deployment

{UNAVAILABLE}

{SURGE}

{EXAMPLE}
"""


@dataclass(frozen=True)
class Passage:
    chunk_id: str
    doc_id: str
    project: str
    title: str
    section: str
    url: str
    text: str
    start_char: int
    end_char: int


def passage(chunk_id: str, text: str, section: str) -> Passage:
    start = DOC.index(text)
    return Passage(chunk_id, "k8s-deployment", "kubernetes", "Deployments", section,
                   f"{DEPLOYMENT_URL}#{section.lower().replace(' ', '-')}", text, start,
                   start + len(text))  # fmt: skip


P_UNAVAILABLE = passage("c-unavail", UNAVAILABLE, "Max Unavailable")
P_SURGE = passage("c-surge", SURGE, "Max Surge")
P_EXAMPLE = passage("c-example", EXAMPLE, "Rolling Update Deployment")
PASSAGES = [P_UNAVAILABLE, P_SURGE, P_EXAMPLE]
QUESTION = "What does maxSurge control in a Deployment rolling update?"

# Older model ids (e.g. claude-sonnet-4-5) are on the SDK deprecation list and warn per call.
pytestmark = [pytest.mark.unit, pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")]


# --- fake Messages API ----------------------------------------------------------------------


def char_citation(doc_index: int, text: str, cited: str, title: str = "") -> dict:
    start = text.index(cited)
    return {"type": "char_location", "cited_text": cited, "document_index": doc_index,
            "document_title": title, "start_char_index": start,
            "end_char_index": start + len(cited)}  # fmt: skip


def message(content: list[dict], stop_reason: str = "end_turn") -> dict:
    return {"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929", "content": content,
            "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 1873, "output_tokens": 96,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}  # fmt: skip


class FakeAPI:
    """Serves canned responses in order and records every request the SDK sent."""

    def __init__(self, *responses: httpx2.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        item = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(item, Exception):
            raise item
        return item

    def client(self, max_retries: int = 0) -> anthropic.Anthropic:
        http = httpx2.Client(transport=httpx2.MockTransport(self))
        return anthropic.Anthropic(api_key="test", http_client=http, max_retries=max_retries)

    def body(self, i: int = 0) -> dict:
        return json.loads(self.requests[i].content)


def never_called(request: httpx2.Request) -> httpx2.Response:
    raise AssertionError(f"unexpected HTTP call to {request.url}")


def offline_client() -> anthropic.Anthropic:
    http = httpx2.Client(transport=httpx2.MockTransport(never_called))
    return anthropic.Anthropic(api_key="test", http_client=http, max_retries=0)


SURGE_DEF = ("`.spec.strategy.rollingUpdate.maxSurge` is an optional field that specifies the "
             "maximum number of Pods\nthat can be created over the desired number of Pods.")  # fmt: skip
ANSWERED = message([
    {"type": "text", "text": "According to the documentation:\n\n"},
    {"type": "text", "text": "maxSurge is the maximum number of Pods that can be created over "
     "the desired number of Pods during a rolling update.",
     "citations": [char_citation(1, SURGE, SURGE_DEF, "kubernetes › Deployments › Max Surge")]},
    {"type": "text", "text": " "},
    {"type": "text", "text": "It defaults to 25% and may not be 0 when maxUnavailable is 0.",
     "citations": [char_citation(1, SURGE, "The default value is 25%."),
                   char_citation(0, UNAVAILABLE, "The value cannot be 0 if "
                                 "`.spec.strategy.rollingUpdate.maxSurge` is 0.")]},
])  # fmt: skip


@pytest.fixture(autouse=True)
def _no_ambient_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("INFRA_RAG_CLAUDE_MODEL", raising=False)


# --- prompts ----------------------------------------------------------------------------------


def test_prompt_registry_is_versioned_and_hashed() -> None:
    prompt = get_prompt("answer-with-citations")
    assert prompt is get_prompt("answer-with-citations@1") is PROMPTS["answer-with-citations@1"]
    assert len(prompt.hash) == 12 and prompt.hash == get_prompt(prompt.id).hash
    assert ABSTENTION in prompt.instructions
    rendered = prompt.render("What does {{ .Values.replicas }} set?")
    assert rendered.endswith("Question: What does {{ .Values.replicas }} set?")
    with pytest.raises(KeyError, match="unknown prompt"):
        get_prompt("no-such-prompt")


# --- Claude -----------------------------------------------------------------------------------


def test_request_sends_passages_as_citable_documents_in_order(monkeypatch) -> None:
    monkeypatch.setenv("INFRA_RAG_CLAUDE_MODEL", "claude-haiku-4-5")
    api = FakeAPI(httpx2.Response(200, json=ANSWERED))
    answer_with_claude(QUESTION, PASSAGES, client=api.client(), max_tokens=512)

    assert len(api.requests) == 1 and api.requests[0].url.path == "/v1/messages"
    body = api.body()
    assert body["model"] == "claude-haiku-4-5" and body["max_tokens"] == 512
    assert body["system"] == get_prompt("answer-with-citations").system
    [turn] = body["messages"]
    docs, question = turn["content"][:-1], turn["content"][-1]
    assert [d["source"]["data"] for d in docs] == [UNAVAILABLE, SURGE, EXAMPLE]
    for doc, p in zip(docs, PASSAGES, strict=True):
        assert doc["type"] == "document" and doc["citations"] == {"enabled": True}
        assert doc["source"] == {"type": "text", "media_type": "text/plain", "data": p.text}
        assert doc["context"] == p.url
    assert docs[1]["title"] == "kubernetes › Deployments › Max Surge"
    assert question["type"] == "text" and question["text"].endswith(f"Question: {QUESTION}")
    assert ABSTENTION in question["text"]


def test_citations_map_to_passages_and_document_offsets() -> None:
    api = FakeAPI(httpx2.Response(200, json=ANSWERED))
    result = answer_with_claude(QUESTION, PASSAGES, client=api.client(), model="claude-x")

    assert result.outcome == "answered" and result.method == "claude" and result.error == ""
    assert result.model == "claude-x" and result.prompt_name == "answer-with-citations@1"
    assert result.prompt_hash == get_prompt("answer-with-citations").hash
    assert result.usage["input_tokens"] == 1873 and result.stop_reason == "end_turn"
    assert result.text.startswith("According to the documentation:")
    assert "desired number of Pods during a rolling update. [2] It defaults" in result.text
    assert result.text.endswith("maxUnavailable is 0. [2] [1]")

    assert [(c.passage_number, c.chunk_id) for c in result.citations] == [
        (2, "c-surge"), (2, "c-surge"), (1, "c-unavail")]  # fmt: skip
    first = result.citations[0]
    assert first.cited_text == SURGE_DEF and first.match == "exact"
    assert first.url == P_SURGE.url and first.doc_id == "k8s-deployment"
    for c, p in zip(result.citations, [P_SURGE, P_SURGE, P_UNAVAILABLE], strict=True):
        assert p.text[c.chunk_start : c.chunk_end] == c.cited_text
        assert (c.doc_start, c.doc_end) == (p.start_char + c.chunk_start, p.start_char + c.chunk_end)
        assert DOC[c.doc_start : c.doc_end] == c.cited_text


def test_bad_citation_offsets_are_relocated_flagged_or_dropped() -> None:
    good = char_citation(1, SURGE, "The default value is 25%.")
    shifted = {**good, "start_char_index": 3, "end_char_index": 28}  # text found, offsets wrong
    invented = {**good, "cited_text": "The default value is 50%."}  # not in the passage
    unknown_doc = {**good, "document_index": 7}  # no such document
    content = [{"type": "text", "text": "It defaults to 25%.",
                "citations": [shifted, invented, unknown_doc]}]  # fmt: skip
    api = FakeAPI(httpx2.Response(200, json=message(content)))
    result = answer_with_claude(QUESTION, PASSAGES, client=api.client())

    assert result.outcome == "answered"
    relocated, mismatch = result.citations
    assert relocated.match == "relocated"
    assert SURGE[relocated.chunk_start : relocated.chunk_end] == "The default value is 25%."
    assert DOC[relocated.doc_start : relocated.doc_end] == "The default value is 25%."
    assert mismatch.match == "mismatch" and mismatch.cited_text.endswith("50%.")
    assert (mismatch.chunk_start, mismatch.chunk_end) == (good["start_char_index"], good["end_char_index"])


@pytest.mark.parametrize("reply", [ABSTENTION, f"  {ABSTENTION}\n", "Sorry. " + ABSTENTION.lower()])
def test_abstention_sentence_means_abstained_without_citations(reply: str) -> None:
    cited = char_citation(0, UNAVAILABLE, "The default value is 25%.")
    content = [{"type": "text", "text": reply, "citations": [cited]}]
    api = FakeAPI(httpx2.Response(200, json=message(content)))
    result = answer_with_claude("How do I rotate etcd peer certificates?", PASSAGES, client=api.client())
    assert (result.outcome, result.text, result.citations) == ("abstained", ABSTENTION, [])
    assert result.usage["output_tokens"] == 96


@pytest.mark.parametrize(("status", "kind", "message_text", "error_class"), [
    (529, "overloaded_error", "Overloaded", "OverloadedError"),
    (500, "api_error", "Internal server error", "InternalServerError"),
])  # fmt: skip
def test_http_errors_become_error_answers(status, kind, message_text, error_class) -> None:
    body = {"type": "error", "error": {"type": kind, "message": message_text}}
    # retry-after-ms keeps the SDK's one retry instant; both attempts fail.
    api = FakeAPI(httpx2.Response(status, json=body, headers={"retry-after-ms": "1"}))
    result = answer_with_claude(QUESTION, PASSAGES, client=api.client(max_retries=1))
    assert len(api.requests) == 2
    assert result.outcome == "error" and result.method == "claude"
    assert result.text == "" and result.citations == []
    assert str(status) in result.error and message_text in result.error
    assert result.error.startswith(error_class) and "\n" not in result.error


@pytest.mark.parametrize(("exc", "expected"), [
    (httpx2.ConnectError("[Errno -3] Temporary failure in name resolution"), "APIConnectionError"),
    (httpx2.ReadTimeout("timed out"), "APITimeoutError"),
])  # fmt: skip
def test_connection_failures_become_error_answers(exc, expected) -> None:
    api = FakeAPI(exc)
    result = answer_with_claude(QUESTION, PASSAGES, client=api.client())
    assert result.outcome == "error" and result.error.startswith(expected)
    assert "\n" not in result.error and result.latency_ms >= 0


def test_empty_or_refused_responses_are_errors() -> None:
    api = FakeAPI(httpx2.Response(200, json=message([], stop_reason="refusal")))
    result = answer_with_claude(QUESTION, PASSAGES, client=api.client())
    assert result.outcome == "error" and "refusal" in result.error


def test_default_model_and_no_request_without_passages() -> None:
    api = FakeAPI(httpx2.Response(200, json=ANSWERED))
    assert answer_with_claude(QUESTION, PASSAGES, client=api.client()).model == DEFAULT_MODEL
    assert api.body()["model"] == DEFAULT_MODEL
    blank = [Passage("c0", "d0", "kubernetes", "T", "S", "", "  \n", 0, 3)]
    result = answer_with_claude(QUESTION, blank, client=offline_client())
    assert result.outcome == "abstained" and result.text == ABSTENTION


# --- extractive -------------------------------------------------------------------------------


def test_extractive_quotes_the_answering_sentence_with_exact_spans() -> None:
    result = answer_extractive(QUESTION, PASSAGES)

    assert result.outcome == "answered" and result.method == "extractive"
    assert result.text.startswith(EXTRACTIVE_PREFIX) and result.prompt_name == ""
    assert SURGE_DEF in [c.cited_text for c in result.citations]
    assert "created over the desired number of Pods. [2]" in result.text
    for c in result.citations:
        p = PASSAGES[c.passage_number - 1]
        assert p.chunk_id == c.chunk_id and c.match == "exact"
        assert p.text[c.chunk_start : c.chunk_end] == c.cited_text
        assert DOC[c.doc_start : c.doc_end] == c.cited_text
        assert "#####" not in c.cited_text and "maxSurge: 1" not in c.cited_text
    order = [(c.passage_number, c.chunk_start) for c in result.citations]
    assert order == sorted(order) and 1 <= len(order) <= 3  # passage order, not score order

    [best] = answer_extractive(QUESTION, PASSAGES, max_sentences=1).citations
    assert (best.passage_number, best.cited_text) == (2, SURGE_DEF)


def test_extractive_uses_the_section_to_pick_the_right_default() -> None:
    # "The default value is 25%." occurs under both headings; only the section tells them apart.
    for question, passage_number in (("What is the default value of maxSurge?", 2),
                                     ("What is the default for max unavailable?", 1)):  # fmt: skip
        [c] = answer_extractive(question, PASSAGES, max_sentences=1).citations
        assert (c.cited_text, c.passage_number) == ("The default value is 25%.", passage_number)


def test_extractive_prefers_earlier_passage_on_ties() -> None:
    a = Passage("a", "d", "kubernetes", "T", "S", "", "The default value is 10%.", 0, 25)
    b = Passage("b", "d", "kubernetes", "T", "S", "", "The default value is 20%.", 0, 25)
    for first, second in ((a, b), (b, a)):
        result = answer_extractive("What is the default value?", [first, second], max_sentences=1)
        assert [c.chunk_id for c in result.citations] == [first.chunk_id]


@pytest.mark.parametrize("question", [
    "How do I rotate etcd peer TLS certificates?",  # no word in common
    "How do I rotate etcd peer TLS certificates for a Deployment?",  # 1 of 6 words in common
])  # fmt: skip
def test_extractive_abstains_on_unrelated_question(question: str) -> None:
    result = answer_extractive(question, PASSAGES)
    assert (result.outcome, result.text, result.citations) == ("abstained", ABSTENTION, [])


def test_sentence_spans_are_exact_and_skip_code_and_headings() -> None:
    text = ("## Strategy\n\n- Use a rolling update, e.g. when Pods must stay available. Set "
            "`maxSurge` too.\n\n```yaml\nmaxSurge: 1\n```\n\n$ kubectl rollout status deploy/web\n"
            "| Field | Default |\n|---|---|\n")  # fmt: skip
    got = [text[s:e] for s, e in sentence_spans(text)]
    assert got == ["Use a rolling update, e.g. when Pods must stay available.", "Set `maxSurge` too.",
                   "| Field | Default |"]  # fmt: skip


# --- routing ----------------------------------------------------------------------------------


def test_answer_routes_on_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert answer(QUESTION, PASSAGES, client=offline_client()).method == "extractive"

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    api = FakeAPI(httpx2.Response(200, json=ANSWERED))
    routed = answer(QUESTION, PASSAGES, client=api.client(), model="claude-x", max_sentences=2)
    assert routed.method == "claude" and routed.outcome == "answered" and len(api.requests) == 1

    forced = answer(QUESTION, PASSAGES, client=offline_client(), use_claude=False)
    assert forced.method == "extractive"


def test_answer_abstains_without_a_model_call(monkeypatch: pytest.MonkeyPatch) -> None:
    offline = answer(QUESTION, PASSAGES, abstained=True)
    assert (offline.outcome, offline.method, offline.text) == ("abstained", "extractive", ABSTENTION)

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    for kwargs in ({"abstained": True, "passages": PASSAGES}, {"passages": []}):
        result = answer(QUESTION, client=offline_client(), model="claude-x", **kwargs)
        assert (result.outcome, result.method, result.model) == ("abstained", "claude", "claude-x")
        assert result.prompt_name == "answer-with-citations@1" and result.citations == []
    with pytest.raises(TypeError, match="temperature"):
        answer(QUESTION, PASSAGES, temperature=0.2)
