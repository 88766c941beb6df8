"""The ``claude`` judge backend: Claude grades an answer as the hand labels do, when
``ANTHROPIC_API_KEY`` is set (a reference system next to the trained support judge).

One Messages API call per answer, forced onto the ``record_judgement`` tool (judge_prompts.py),
returns the five label axes (grounded, fabricated, gap named, correct, citations), a support
probability per answer sentence and the unsupported spans. The result has the shape of the
trained judge's batch result (``batch.py``: ``adherence`` = product of the sentences' support,
``sentences`` = ``[{"text", "supported", "passage"}]``), so the CLI, the eval run and the
calibration read either; relevance, utilization and completeness are the trained judge's
(context-sentence labels) and stay None here.

Never raises on a failed call: a 529, a 401, a timeout, an unreadable reply become a result with
``error`` set and ``adherence`` None (unmeasured), as the answerer records failed answers.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .... import settings
from ...answer.generate import DEFAULT_MODEL, anthropic_sdk, one_line_error
from ...answer.pricing import cost_usd
from ...answer.records import elapsed_ms
from ..batch import Item
from ..sentences import answer_sentences
from ..trace import SUPPORTED_AT
from .claude_reply import AXES, ReplyError, find_span, parse_reply, reply_object
from .judge_prompts import JUDGE_PROMPT, PROMPT_VERSION, TOOL_NAME, TOOL_SCHEMA, prompt_hash, render_user

if TYPE_CHECKING:  # imported on first use (generate.anthropic_sdk)
    import anthropic

BACKEND = "claude"
TIMEOUT_S = 60.0  # per attempt; the SDK retries 408/429/5xx/529 and timeouts MAX_RETRIES times
MAX_RETRIES = 2
MAX_TOKENS = 4096  # room for a verdict on each of MAX_SENTENCES sentences
MAX_ANSWER_CHARS = 20_000  # longer answers are not sent: a clear "not judged" result instead
MAX_SENTENCES = 80
MAX_PASSAGES = 40  # passages sent besides the cited ones (10,000 passages cost what 40 do)
MAX_PASSAGE_CHARS = 6_000


class ClaudeJudgeUnavailable(RuntimeError):
    """The claude backend was asked for without ANTHROPIC_API_KEY (one line naming the setting)."""


def require_key(backend: str) -> None:
    """Fail before any work when ``backend`` is claude and no key is set."""
    if backend == BACKEND and not os.environ.get("ANTHROPIC_API_KEY"):
        raise ClaudeJudgeUnavailable(
            "judge backend 'claude' (--backend / INFRA_RAG_JUDGE_BACKEND) needs ANTHROPIC_API_KEY, which is not set"
        )


def new_client() -> anthropic.Anthropic:
    """The client a judge made without one uses (key from ANTHROPIC_API_KEY)."""
    return anthropic_sdk().Anthropic(timeout=TIMEOUT_S, max_retries=MAX_RETRIES)


class ClaudeJudge:
    """Judges whole answers with Claude; ``client`` is injectable (tests fake its HTTP transport)."""

    backend = BACKEND
    judges_answers = True  # the eval run sends it whole answers, not (claim, passage) pairs

    def __init__(self, client: anthropic.Anthropic | None = None, model: str | None = None,
                 max_tokens: int = MAX_TOKENS, relevance_judge: Any = None) -> None:  # fmt: skip
        self._client = client
        self.relevance_judge = relevance_judge  # the trained judge labels context sentences (eval run)
        self.model = model or settings.judge_model() or DEFAULT_MODEL
        self.max_tokens = max_tokens

    @property
    def identity(self) -> str:
        """What decides a verdict besides the answer: cache keys and judged rows record it."""
        return f"claude:{self.model}:{PROMPT_VERSION}:{prompt_hash()}"

    @property
    def client(self) -> anthropic.Anthropic:
        if self._client is None:
            self._client = new_client()
        return self._client

    def judge_items(self, items: Sequence[Item], references: dict[str, str] | None = None) -> list[dict]:
        """One result per item, in order; ``references`` maps ids to reference answers (correct)."""
        return [self.judge(item, (references or {}).get(item.id, "")) for item in items]

    def judge(self, item: Item, reference: str = "") -> dict:
        """One answer judged: the batch result shape plus axes, spans, usage, cost and error."""
        claims = [s for s in answer_sentences(item.answer) if s.is_claim]
        result = self._base(item)
        why_not = _not_sent(item, claims)
        if why_not:
            result["note"] = why_not
            if claims and not why_not.startswith("not judged"):  # no passages: nothing supports them
                _fill(result, claims, [0.0] * len(claims), [None] * len(claims))
            return result
        sent, note = _passages_to_send(item, claims)
        if note:
            result["note"] = note
        request = self._request(item, claims, sent, reference)
        started = time.perf_counter()
        try:
            response = self.client.messages.create(**request)
        except anthropic_sdk().AnthropicError as exc:
            return _failed(result, one_line_error(exc), started)
        except TypeError as exc:  # the SDK's "no credentials" is a bare TypeError
            if "authentication" not in str(exc):
                raise
            return _failed(result, f"no Anthropic credentials: {exc}", started)
        result["latency_ms"] = elapsed_ms(started)
        usage = response.usage.model_dump(exclude_none=True) if response.usage else {}
        result["usage"] = {k: int(usage.get(k) or 0) for k in ("input_tokens", "output_tokens")}
        result["cost_usd"] = cost_usd(self.model, usage)
        try:
            reply = parse_reply(
                reply_object(response.content),
                answer=item.answer,
                sentences=len(claims),
                passage_ids=[pid for pid, _ in item.passages],
                has_reference=bool(reference),
            )
        except ReplyError as exc:
            result["error"] = f"unreadable judgement (stop_reason={response.stop_reason}): {exc}"
            return result
        _fill(result, claims, reply.support, reply.passages, [span["text"] for span in reply.spans])
        result.update(axes=reply.axes, unsupported_spans=reply.spans, reason=reply.reason)
        if reply.notes:
            result["note"] = "; ".join(filter(None, [result.get("note"), *reply.notes]))
        return result

    def _base(self, item: Item) -> dict:
        return {
            "id": item.id,
            "backend": BACKEND,
            "judge": self.identity,
            "model": self.model,
            "prompt": PROMPT_VERSION,
            "prompt_hash": prompt_hash(),
            "adherence": None,
            "adherent": None,
            "supported_at": SUPPORTED_AT,  # by fiat until a calibration run with a key fits one
            "relevance": None,
            "utilization": None,
            "completeness": None,
            "sentences": [],
            "axes": dict.fromkeys(AXES),
            "unsupported_spans": [],
            "usage": {"input_tokens": 0, "output_tokens": 0},
            "cost_usd": 0.0,
            "latency_ms": 0.0,
            "error": None,
        }

    def _request(self, item: Item, claims: Sequence, sent: list[int], reference: str) -> dict[str, Any]:
        # Passages keep their positions: [n] markers are 1-based positions in item.passages.
        shown = [(i + 1, item.passages[i][0], item.passages[i][1][:MAX_PASSAGE_CHARS]) for i in sent]
        user = render_user(item.question, shown, [(s.text, s.passages) for s in claims], item.answer, reference)
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": JUDGE_PROMPT.system,
            "tools": [
                {"name": TOOL_NAME, "description": "Record the grade of the answer.", "input_schema": TOOL_SCHEMA}
            ],  # fmt: skip
            "tool_choice": {"type": "tool", "name": TOOL_NAME},
            "messages": [{"role": "user", "content": user}],
            "metadata": {"user_id": f"infra-rag-judge:{PROMPT_VERSION}"},
        }


def _not_sent(item: Item, claims: Sequence) -> str:
    """Why this answer is not sent (a clear result instead of a call), '' to send it."""
    if len(item.answer) > MAX_ANSWER_CHARS:
        return (
            f"not judged: the answer has {len(item.answer):,} characters, the Claude judge takes {MAX_ANSWER_CHARS:,}"
        )
    if len(claims) > MAX_SENTENCES:
        return f"not judged: the answer has {len(claims)} sentences, the Claude judge takes {MAX_SENTENCES}"
    if not claims:
        return "the answer has no sentence to judge"
    if not any(text.strip() for _, text in item.passages):
        return "no passages: nothing can support the answer"
    return ""


def _passages_to_send(item: Item, claims: Sequence) -> tuple[list[int], str]:
    """0-based indexes sent: every cited passage plus the first MAX_PASSAGES others."""
    cited = {n - 1 for s in claims for n in s.passages if 0 < n <= len(item.passages)}
    texts = [i for i, (_, text) in enumerate(item.passages) if text.strip()]
    sent = sorted(cited | set(texts[:MAX_PASSAGES]))
    if len(texts) > MAX_PASSAGES:
        return (
            sent,
            f"judged on {len(sent)} of {len(item.passages)} passages (the cited ones and the first {MAX_PASSAGES})",
        )
    return sent, ""


def _fill(result: dict, claims: Sequence, support: Sequence[float], passages: Sequence[str | None],
          spans: Sequence[str] = ()) -> None:  # fmt: skip
    """Per-sentence verdicts as the trained judge gives them: an unsupported sentence carries
    the spans that fall inside it (offsets into the sentence's text)."""
    result["sentences"] = [{"text": s.text, "supported": round(p, 4), "passage": pid}
                           for s, p, pid in zip(claims, support, passages, strict=True)]  # fmt: skip
    for verdict in result["sentences"]:
        if verdict["supported"] < SUPPORTED_AT:
            found = [(span, find_span(span, verdict["text"])) for span in spans]
            verdict["unsupported_spans"] = [{"start": at[0], "end": at[1], "text": verdict["text"][at[0] : at[1]]}
                                            for _, at in found if at is not None]  # fmt: skip
    result["adherence"] = round(math.prod(support), 4) if support else None
    result["adherent"] = all(p >= SUPPORTED_AT for p in support) if support else None


def _failed(result: dict, error: str, started: float) -> dict:
    result.update(error=error, latency_ms=elapsed_ms(started))
    return result
