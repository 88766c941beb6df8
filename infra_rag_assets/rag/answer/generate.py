"""Answer a question from retrieved passages, with citations pointing at exact text spans.

Two answerers fill the same :class:`Answer` record so evaluation can compare them:

* :func:`answer_with_claude` sends each passage as a plain-text ``document`` block with
  citations enabled. The Messages API then returns ``char_location`` citations whose offsets
  index the document text we sent. We send the chunk text verbatim, so those offsets *are*
  chunk offsets, and adding ``passage.start_char`` turns them into offsets into the source
  document's cleaned text.
* :func:`answer_extractive` (extractive.py) is the offline answerer (no API key, CI). It quotes the sentences
  that best match the question verbatim, so its citations are exact by construction, and its
  text says it is extractive so nobody mistakes it for a generated answer.

Neither raises on a failed model call: failures become ``outcome="error"`` answers, because an
evaluation run over hundreds of questions must record a 529, not die on it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ... import settings
from .answerers import resolve_answerer
from .extractive import EXTRACTIVE_MODEL, answer_extractive
from .prompts import ABSTENTION, Prompt, get_prompt
from .reader import CHOICE_RULE, Reader, answer_reader
from .records import Answer, AnswerBase, Citation, Match, PassageLike, elapsed_ms

if TYPE_CHECKING:  # the SDK costs ~1.5 s to import: only a Claude call loads it (anthropic_sdk)
    import anthropic
    from anthropic.types import DocumentBlockParam, Message, TextBlockParam

DEFAULT_MODEL = "claude-sonnet-4-6"  # override with INFRA_RAG_CLAUDE_MODEL
DEFAULT_PROMPT = "answer-with-citations"


def answer_with_claude(
    question: str,
    passages: Sequence[PassageLike],
    *,
    client: anthropic.Anthropic | None = None,
    model: str | None = None,
    prompt: str = DEFAULT_PROMPT,
    max_tokens: int = 1024,
) -> Answer:
    """One Messages API call with citations enabled; API failures become error answers."""
    base, sent, request = _claude_request(question, passages, prompt, model, max_tokens)
    if request is None:
        return Answer(text=ABSTENTION, citations=[], outcome="abstained", **base)
    started = time.perf_counter()
    try:
        response = (client or _default_client()).messages.create(**request)
    except anthropic_sdk().AnthropicError as exc:
        return _error_answer(base, one_line_error(exc), started)
    except TypeError as exc:  # the SDK signals "no credentials" with a bare TypeError
        return _no_credentials(base, exc, started)
    return _from_response(response, passages, sent, base, elapsed_ms(started))


def stream_with_claude(
    question: str,
    passages: Sequence[PassageLike],
    *,
    client: anthropic.Anthropic | None = None,
    model: str | None = None,
    prompt: str = DEFAULT_PROMPT,
    max_tokens: int = 1024,
) -> Iterator[str | Answer]:
    """:func:`answer_with_claude` streamed: the model's text deltas as they arrive, then the
    final Answer (its text carries the ``[n]`` markers the deltas do not have)."""
    base, sent, request = _claude_request(question, passages, prompt, model, max_tokens)
    if request is None:
        yield Answer(text=ABSTENTION, citations=[], outcome="abstained", **base)
        return
    started = time.perf_counter()
    try:
        with (client or _default_client()).messages.stream(**request) as stream:
            yield from stream.text_stream
            response = stream.get_final_message()
    except anthropic_sdk().AnthropicError as exc:
        yield _error_answer(base, one_line_error(exc), started)
        return
    except TypeError as exc:
        yield _no_credentials(base, exc, started)
        return
    yield _from_response(response, passages, sent, base, elapsed_ms(started))


def _claude_request(
    question: str, passages: Sequence[PassageLike], prompt: str, model: str | None, max_tokens: int
) -> tuple[AnswerBase, list[int], dict[str, Any] | None]:
    """The Messages API request for these passages (None when none has text: abstain)."""
    spec = get_prompt(prompt)
    base = _claude_base(question, spec, model)
    sent = [i for i, p in enumerate(passages) if p.text.strip()]  # the API rejects empty docs
    if not sent:
        return base, sent, None
    content: list[DocumentBlockParam | TextBlockParam] = [_document_block(passages[i]) for i in sent]
    content.append({"type": "text", "text": spec.render(question)})
    request = dict(
        model=base["model"], max_tokens=max_tokens, system=spec.system, messages=[{"role": "user", "content": content}]
    )
    return base, sent, request


def anthropic_sdk():
    """The anthropic module, imported on first use: every CLI start, code server and run step
    imports this module, and most never call Claude."""
    import anthropic

    return anthropic


def _default_client() -> anthropic.Anthropic:
    return anthropic_sdk().Anthropic(timeout=60.0, max_retries=2)


def _no_credentials(base: AnswerBase, exc: TypeError, started: float) -> Answer:
    if "authentication" not in str(exc):
        raise exc
    return _error_answer(base, f"no Anthropic credentials: {exc}", started)


def _claude_base(question: str, spec: Prompt, model: str | None) -> AnswerBase:
    model = model or settings.claude_model() or DEFAULT_MODEL
    return AnswerBase(question=question, method="claude", model=model,
                      prompt_name=spec.id, prompt_hash=spec.hash)  # fmt: skip


def _document_block(p: PassageLike) -> DocumentBlockParam:
    """The chunk text verbatim as ``data``: citation offsets are then chunk offsets."""
    block: DocumentBlockParam = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": p.text},
        "title": _title(p),
        "citations": {"enabled": True},
    }
    if p.url:
        block["context"] = p.url
    return block


def _title(p: PassageLike) -> str:
    parts = [x for x in (p.project, p.title, p.section) if x]
    return " › ".join(x for i, x in enumerate(parts) if i == 0 or x != parts[i - 1])


def _from_response(response: Message, passages: Sequence[PassageLike], sent: list[int],
                   base: AnswerBase, latency_ms: float) -> Answer:  # fmt: skip
    usage = response.usage.model_dump(exclude_none=True) if response.usage else {}
    common: dict[str, Any] = dict(usage=usage, latency_ms=latency_ms, stop_reason=response.stop_reason or "")
    blocks = [b for b in response.content if b.type == "text"]
    raw = "".join(b.text for b in blocks).strip()
    if response.stop_reason == "refusal" or not raw:
        why = f"model returned no answer (stop_reason={response.stop_reason})"
        return Answer(text=raw, citations=[], outcome="error", error=why, **common, **base)
    if _is_abstention(raw):
        return Answer(text=ABSTENTION, citations=[], outcome="abstained", **common, **base)
    text, citations = _render_blocks(blocks, passages, sent)
    return Answer(text=text, citations=citations, outcome="answered", **common, **base)


def _is_abstention(text: str) -> bool:
    """Contains the sentence, tolerating case, spacing and a missing final period."""
    return ABSTENTION.rstrip(".").lower() in " ".join(text.split()).lower()


def _render_blocks(blocks: list[Any], passages: Sequence[PassageLike],
                   sent: list[int]) -> tuple[str, list[Citation]]:  # fmt: skip
    """Join text blocks, appending ``[n]`` markers after each cited block (as extractive does)."""
    parts: list[str] = []
    citations: dict[tuple[int, int, int, str], Citation] = {}
    for block in blocks:
        numbers: list[int] = []
        for c in block.citations or []:
            cit = _map_citation(c, passages, sent) if c.type == "char_location" else None
            if cit is None:
                continue
            key = (cit.passage_number, cit.chunk_start, cit.chunk_end, cit.cited_text)
            citations.setdefault(key, cit)
            if cit.passage_number not in numbers:
                numbers.append(cit.passage_number)
        body = block.text.rstrip()
        markers = "".join(f" [{n}]" for n in numbers)
        parts.append(body + markers + block.text[len(body) :])
    return "".join(parts).strip(), list(citations.values())


def _map_citation(c: Any, passages: Sequence[PassageLike], sent: list[int]) -> Citation | None:
    """``document_index`` counts the documents we sent, in order; unknown indexes are dropped."""
    if not 0 <= c.document_index < len(sent):
        return None
    n = sent[c.document_index]
    p = passages[n]
    start, end, match = _locate(p.text, c.start_char_index, c.end_char_index, c.cited_text)
    return Citation(passage_number=n + 1, chunk_id=p.chunk_id, doc_id=p.doc_id, url=p.url,
                    cited_text=c.cited_text, chunk_start=start, chunk_end=end,
                    doc_start=p.start_char + start, doc_end=p.start_char + end,
                    match=match)  # fmt: skip


def _locate(text: str, start: int, end: int, cited: str) -> tuple[int, int, Match]:
    """Trust the model's offsets only when they slice ``cited``; else find ``cited`` nearby."""
    if 0 <= start <= end and text[start:end] == cited:
        return start, end, "exact"
    hits = [m.start() for m in re.finditer(re.escape(cited), text)] if cited else []
    if hits:
        best = min(hits, key=lambda h: abs(h - start))
        return best, best + len(cited), "relocated"
    start = max(0, min(start, len(text)))
    return start, max(start, min(end, len(text))), "mismatch"


def one_line_error(exc: anthropic.AnthropicError) -> str:
    if isinstance(exc, anthropic_sdk().APIStatusError):
        detail = getattr(exc, "api_message", None) or exc.message
        msg = f"{type(exc).__name__}: HTTP {exc.status_code}: {detail}"
    else:
        msg = f"{type(exc).__name__}: {exc}"
    return " ".join(msg.split())[:300]


def _error_answer(base: AnswerBase, error: str, started: float) -> Answer:
    return Answer(text="", citations=[], outcome="error", error=error,
                  latency_ms=elapsed_ms(started), **base)  # fmt: skip


# --- Routing ------------------------------------------------------------------------------


def uses_claude(use_claude: bool | None = None, answerer: str | None = None) -> bool:
    """The routing rule of :func:`answer`: Claude when asked, or by default when a key is set."""
    return resolve_answerer(answerer, use_claude) == "claude"


def generator_identity(use_claude: bool | None = None, model: str | None = None, prompt: str = DEFAULT_PROMPT,
                       answerer: str | None = None, reader: Reader | None = None) -> dict[str, str]:  # fmt: skip
    """What decides an answer besides question and passages: a generation cache key's part."""
    name = resolve_answerer(answerer, use_claude)
    if name == "reader" and reader is not None:
        # the floor decides abstentions and the choice rule the sentence stated: an answer cached
        # under others is not this answerer's
        return {"method": "reader", "model": reader.model_id, "prompt_hash": "", "floor": f"{reader.floor:g}",
                "choice": CHOICE_RULE}  # fmt: skip
    if name != "claude":
        return {"method": "extractive", "model": EXTRACTIVE_MODEL, "prompt_hash": ""}
    spec = get_prompt(prompt)
    return {"method": "claude", "model": _claude_base("", spec, model)["model"], "prompt_hash": spec.hash}


_CLAUDE_KW = frozenset({"model", "prompt", "max_tokens"})
_EXTRACTIVE_KW = frozenset({"max_sentences"})


def answer(question: str, passages: Sequence[PassageLike], *, abstained: bool = False,
           client: anthropic.Anthropic | None = None, use_claude: bool | None = None,
           answerer: str | None = None, reader: Reader | None = None, **kw: Any) -> Answer:  # fmt: skip
    """The answerer ``answerer`` names (``answerers.resolve_answerer``: Claude by default when
    ``ANTHROPIC_API_KEY`` is set, else the reader); the reader needs ``reader``, and without one
    the offline answer is extractive (its ``method`` says so).

    Only the key decides the default, not a passed ``client``, so one call site works with and
    without a key. ``abstained`` lets retrieval veto answering without a model call. Keyword
    arguments meant for another answerer are ignored, so callers can pass one set.
    """
    unknown = set(kw) - _CLAUDE_KW - _EXTRACTIVE_KW
    if unknown:
        raise TypeError(f"answer() got unexpected keyword arguments: {sorted(unknown)}")
    name = resolve_answerer(answerer, use_claude)
    if name == "claude":
        ckw = {k: v for k, v in kw.items() if k in _CLAUDE_KW}
        if abstained or not passages:
            spec = get_prompt(ckw.get("prompt", DEFAULT_PROMPT))
            base = _claude_base(question, spec, ckw.get("model"))
            return Answer(text=ABSTENTION, citations=[], outcome="abstained", **base)
        return answer_with_claude(question, passages, client=client, **ckw)
    if name == "reader" and reader is not None:
        return answer_reader(question, [] if abstained else passages, reader)
    ekw = {k: v for k, v in kw.items() if k in _EXTRACTIVE_KW}
    return answer_extractive(question, [] if abstained else passages, **ekw)


def stream_answer(
    question: str,
    passages: Sequence[PassageLike],
    *,
    abstained: bool = False,
    client: anthropic.Anthropic | None = None,
    use_claude: bool | None = None,
    answerer: str | None = None,
    reader: Reader | None = None,
) -> Iterator[str | Answer]:
    """:func:`answer` as text deltas, then the final Answer. Claude streams its tokens; an
    offline answer (and any abstention) is sent sentence by sentence, joining to its text."""
    if uses_claude(use_claude, answerer) and not abstained and passages:
        yield from stream_with_claude(question, passages, client=client)
        return
    final = answer(question, passages, abstained=abstained, client=client, use_claude=use_claude,
                   answerer=answerer, reader=reader)  # fmt: skip
    yield from (piece for piece in _SENTENCE_END.split(final.text) if piece)
    yield final


# after an end mark and a space, or a newline, before the next word
_SENTENCE_END = re.compile(r"(?:(?<=[.!?\]]\s)|(?<=\n))(?=\S)")
