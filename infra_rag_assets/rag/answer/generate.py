"""Answer a question from retrieved passages, with citations pointing at exact text spans.

Two answerers fill the same :class:`Answer` record so evaluation can compare them:

* :func:`answer_with_claude` sends each passage as a plain-text ``document`` block with
  citations enabled. The Messages API then returns ``char_location`` citations whose offsets
  index the document text we sent. We send the chunk text verbatim, so those offsets *are*
  chunk offsets, and adding ``passage.start_char`` turns them into offsets into the source
  document's cleaned text.
* :func:`answer_extractive` is the offline answerer (no API key, CI). It quotes the sentences
  that best match the question verbatim, so its citations are exact by construction, and its
  text says it is extractive so nobody mistakes it for a generated answer.

Neither raises on a failed model call: failures become ``outcome="error"`` answers, because an
evaluation run over hundreds of questions must record a 529, not die on it.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

import anthropic
from anthropic.types import Message

from ..index.analysis import identifier_terms, prose_terms, stem
from .prompts import ABSTENTION, Prompt, get_prompt

DEFAULT_MODEL = "claude-sonnet-4-6"  # override with INFRA_RAG_CLAUDE_MODEL
MODEL_ENV = "INFRA_RAG_CLAUDE_MODEL"
DEFAULT_PROMPT = "answer-with-citations"
EXTRACTIVE_MODEL = "extractive-v1"  # bump when sentence selection changes, like a model id
EXTRACTIVE_PREFIX = "Extractive answer (no LLM): "
RELATIVE_FLOOR = 0.5  # extractive: drop sentences scoring under half the best one (padding)
POSITION_BOOST = 0.1  # extractive: first sentence of a passage scores up to 10% more
MIN_COVERAGE = 1 / 3  # extractive: a sentence must touch this share of the question's words

Outcome = Literal["answered", "abstained", "error"]
Method = Literal["claude", "extractive"]
Match = Literal["exact", "relocated", "mismatch"]


class PassageLike(Protocol):
    """What answering needs from a retrieved chunk (retrieval's passage type satisfies it)."""

    chunk_id: str
    doc_id: str
    project: str
    title: str
    section: str
    url: str
    text: str  # the chunk text, == document text[start_char:end_char]
    start_char: int
    end_char: int


@dataclass
class Citation:
    """A cited span: ``[chunk_start, chunk_end)`` in the chunk, ``[doc_start, doc_end)`` in its doc.

    ``match`` says how far the offsets can be trusted: ``exact`` when the chunk slice equals
    ``cited_text``; ``relocated`` when the model's offsets were off but ``cited_text`` was found
    verbatim in the chunk (offsets then point at the nearest occurrence); ``mismatch`` when
    neither holds and the model's offsets are kept as given, clamped to the chunk.
    """

    passage_number: int  # 1-based position in the passages passed in
    chunk_id: str
    doc_id: str
    url: str
    cited_text: str
    chunk_start: int
    chunk_end: int
    doc_start: int
    doc_end: int
    match: Match = "exact"


@dataclass
class Answer:
    """One answer attempt, success or not, with everything needed to reproduce and audit it."""

    question: str
    text: str
    citations: list[Citation]
    outcome: Outcome
    method: Method
    model: str
    prompt_name: str  # "name@version"; empty for extractive answers
    prompt_hash: str
    error: str = ""  # one line, set only when outcome == "error"
    usage: dict[str, Any] = field(default_factory=dict)
    latency_ms: float = 0.0
    stop_reason: str = ""  # Claude's stop_reason, e.g. "max_tokens" flags a truncated answer

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- Claude -------------------------------------------------------------------------------


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
    spec = get_prompt(prompt)
    base = _claude_base(question, spec, model)
    sent = [i for i, p in enumerate(passages) if p.text.strip()]  # the API rejects empty docs
    if not sent:
        return Answer(text=ABSTENTION, citations=[], outcome="abstained", **base)
    content = [_document_block(passages[i]) for i in sent]
    content.append({"type": "text", "text": spec.render(question)})
    started = time.perf_counter()
    try:
        client = client or anthropic.Anthropic(timeout=60.0, max_retries=2)
        response = client.messages.create(
            model=base["model"],
            max_tokens=max_tokens,
            system=spec.system,
            messages=[{"role": "user", "content": content}],
        )
    except anthropic.AnthropicError as exc:
        return _error_answer(base, _one_line_error(exc), started)
    except TypeError as exc:  # the SDK signals "no credentials" with a bare TypeError
        if "authentication" not in str(exc):
            raise
        return _error_answer(base, f"no Anthropic credentials: {exc}", started)
    return _from_response(response, passages, sent, base, _elapsed_ms(started))


def _claude_base(question: str, spec: Prompt, model: str | None) -> dict[str, Any]:
    model = model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL
    return dict(question=question, method="claude", model=model,
                prompt_name=spec.id, prompt_hash=spec.hash)  # fmt: skip


def _document_block(p: PassageLike) -> dict[str, Any]:
    """The chunk text verbatim as ``data``: citation offsets are then chunk offsets."""
    block: dict[str, Any] = {
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
                   base: dict[str, Any], latency_ms: float) -> Answer:  # fmt: skip
    usage = response.usage.model_dump(exclude_none=True) if response.usage else {}
    common = dict(usage=usage, latency_ms=latency_ms, stop_reason=response.stop_reason or "")
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
        parts.append(body + markers + block.text[len(body):])
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


def _one_line_error(exc: anthropic.AnthropicError) -> str:
    if isinstance(exc, anthropic.APIStatusError):
        detail = getattr(exc, "api_message", None) or exc.message
        msg = f"{type(exc).__name__}: HTTP {exc.status_code}: {detail}"
    else:
        msg = f"{type(exc).__name__}: {exc}"
    return " ".join(msg.split())[:300]


def _error_answer(base: dict[str, Any], error: str, started: float) -> Answer:
    return Answer(text="", citations=[], outcome="error", error=error,
                  latency_ms=_elapsed_ms(started), **base)  # fmt: skip


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


# --- Extractive ---------------------------------------------------------------------------


_FENCE = re.compile(r" {0,3}(?:`{3,}|~{3,})")
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_ITEM = re.compile(r"[ \t]*(?:[-*+>]|\d{1,3}[.)])[ \t]+")  # list item or block quote marker
_SENT_END = re.compile(r"[.!?][\"')\]*_`”’]*(?=\s+[\"'(\[*_`“‘]?[A-Z0-9`])")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.")
_PROSE_WORD = re.compile(r"[A-Za-z]{2,}")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_YAML_LINE = re.compile(r"-?\s*[\w.\-/\"']+:(?:\s+\S+)?")
MAX_SENTENCE_CHARS = 600  # longer "sentences" are tables or run-ons: useless as a quote


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Exact ``[start, end)`` spans of prose sentences; code, headings and tables skipped."""
    spans = []
    for start, end in _prose_blocks(text):
        for s, e in _split_sentences(text, start, end):
            while s < e and text[s].isspace():
                s += 1
            while e > s and text[e - 1].isspace():
                e -= 1
            if 0 < e - s <= MAX_SENTENCE_CHARS and not _is_code_only(text[s:e]):
                spans.append((s, e))
    return spans


def _prose_blocks(text: str) -> list[list[int]]:
    """Paragraphs, list items and table rows outside fenced code, as ``[start, end]`` pairs.

    A list marker is left out of its item's span so quotes read as sentences.
    """
    blocks: list[list[int]] = []
    cur: list[int] | None = None
    fenced, pos = False, 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        fence = _FENCE.match(line)
        fenced ^= bool(fence)
        if fence or fenced or not line.strip() or _HEADING.match(line):
            cur = None
            continue
        item = _ITEM.match(line)
        row = line.lstrip().startswith("|")
        if cur is None or item or row:
            cur = [start + (item.end() if item else 0), pos]
            blocks.append(cur)
        else:
            cur[1] = pos
        cur = None if row else cur
    return blocks


def _split_sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Cut after ``.!?`` (plus closing quotes/brackets) when a capital, digit or code follows."""
    out, s = [], start
    for m in _SENT_END.finditer(text, start, end):
        if text[max(start, m.start() - 7) : m.start() + 1].lower().endswith(_ABBREVIATIONS):
            continue
        out.append((s, m.end()))
        s = m.end()
    out.append((s, end))
    return out


def _is_code_only(sentence: str) -> bool:
    """Commands, YAML lines, bare identifiers: fewer than two words outside inline code."""
    if sentence.startswith(("$ ", ">>> ", "{{")) or _YAML_LINE.fullmatch(sentence):
        return True
    return len(_PROSE_WORD.findall(_INLINE_CODE.sub(" ", sentence))) < 2


@dataclass(frozen=True)
class _Sentence:
    passage: int  # 0-based index into passages
    rank: int  # 0-based position among its passage's sentences
    start: int
    end: int
    own: frozenset[str]  # the sentence's terms
    terms: frozenset[str]  # plus page title and section terms: context the sentence omits


def answer_extractive(question: str, passages: Sequence[PassageLike], *,
                      max_sentences: int = 3) -> Answer:  # fmt: skip
    """Quote the best-matching sentences verbatim, in passage order, each with its ``[n]``."""
    started = time.perf_counter()
    base = dict(question=question, method="extractive", model=EXTRACTIVE_MODEL,
                prompt_name="", prompt_hash="")  # fmt: skip
    pool = _sentence_pool(passages)
    picked = _pick(pool, _question_groups(question), max_sentences)
    if not picked:
        return Answer(text=ABSTENTION, citations=[], outcome="abstained",
                      latency_ms=_elapsed_ms(started), **base)  # fmt: skip
    citations = [_extractive_citation(s, passages[s.passage]) for s in picked]
    body = " ".join(f"{' '.join(c.cited_text.split())} [{c.passage_number}]" for c in citations)
    return Answer(text=EXTRACTIVE_PREFIX + body, citations=citations, outcome="answered",
                  latency_ms=_elapsed_ms(started), **base)  # fmt: skip


def _terms(text: str) -> frozenset[str]:
    """Stemmed prose words plus stemmed identifier parts, so ``max surge`` meets ``maxSurge``."""
    return frozenset(prose_terms(text)) | frozenset(stem(t) for t in identifier_terms(text))


def _question_groups(question: str) -> set[frozenset[str]]:
    """One term group per question word: an identifier's many parts count as one word."""
    return {g for g in (_terms(w) for w in question.split()) if g}


def _sentence_pool(passages: Sequence[PassageLike]) -> list[_Sentence]:
    """Every prose sentence of every passage; a span passed twice (same doc offsets) once.

    Equal text in different passages is kept: "The default value is 25%." means different
    things under "Max Surge" and "Max Unavailable", which is why title and section terms are
    attached. Attaching the title also stops the page's topic ("Deployment") from looking
    like a rare, decisive word in the few sentences that happen to repeat it.
    """
    pool, seen = [], set()
    for i, p in enumerate(passages):
        context = _terms(f"{p.title} {p.section}")
        for rank, (start, end) in enumerate(sentence_spans(p.text)):
            if (p.doc_id, p.start_char + start) not in seen:
                seen.add((p.doc_id, p.start_char + start))
                own = _terms(p.text[start:end])
                pool.append(_Sentence(i, rank, start, end, own, own | context))
    return pool


def _pick(pool: list[_Sentence], groups: set[frozenset[str]], k: int) -> list[_Sentence]:
    """Top ``k`` by IDF-weighted coverage of the question's words, returned in passage order.

    A sentence qualifies only if its own words overlap the question (title and section
    terms alone do not) and, with context, it touches ``MIN_COVERAGE`` of the question's
    words: one shared generic word ("configure") out of five is not an answer, and quoting
    it would hide that the docs do not cover the question. Earlier sentences of a passage get
    a small boost, because docs state the definition first; remaining ties go to earlier
    passages (retrieval rank).
    """
    df: dict[str, int] = {}
    for s in pool:
        for t in s.terms:
            df[t] = df.get(t, 0) + 1
    idf = {t: math.log(1 + len(pool) / n) for t, n in df.items()}
    wanted = frozenset().union(*groups)

    def score(s: _Sentence) -> float:
        matched = sum(1 for g in groups if g & s.terms)
        if not s.own & wanted or matched < MIN_COVERAGE * len(groups) - 1e-9:
            return 0.0
        coverage = sum(sum(idf[t] for t in g & s.terms) / len(g) for g in groups)
        return coverage * (1 + POSITION_BOOST / (1 + s.rank))

    scored = [(score(s), order, s) for order, s in enumerate(pool)]
    best = max((sc for sc, _, _ in scored), default=0.0)
    if best <= 0:
        return []
    kept = [x for x in scored if x[0] >= RELATIVE_FLOOR * best]
    top = sorted(kept, key=lambda x: (-x[0], x[1]))[:k]
    return [s for _, _, s in sorted(top, key=lambda x: x[1])]


def _extractive_citation(s: _Sentence, p: PassageLike) -> Citation:
    return Citation(passage_number=s.passage + 1, chunk_id=p.chunk_id, doc_id=p.doc_id,
                    url=p.url, cited_text=p.text[s.start:s.end], chunk_start=s.start,
                    chunk_end=s.end, doc_start=p.start_char + s.start,
                    doc_end=p.start_char + s.end)  # fmt: skip


# --- Routing ------------------------------------------------------------------------------

_CLAUDE_KW = frozenset({"model", "prompt", "max_tokens"})
_EXTRACTIVE_KW = frozenset({"max_sentences"})


def answer(question: str, passages: Sequence[PassageLike], *, abstained: bool = False,
           client: anthropic.Anthropic | None = None, use_claude: bool | None = None,
           **kw: Any) -> Answer:  # fmt: skip
    """Claude when ``use_claude``, or by default when ``ANTHROPIC_API_KEY`` is set; else extractive.

    Only the key decides the default, not a passed ``client``, so one call site works with and
    without a key. ``abstained`` lets retrieval veto answering without a model call. Keyword
    arguments meant for the other answerer are ignored, so callers can pass one set.
    """
    unknown = set(kw) - _CLAUDE_KW - _EXTRACTIVE_KW
    if unknown:
        raise TypeError(f"answer() got unexpected keyword arguments: {sorted(unknown)}")
    if use_claude is None:
        use_claude = bool(os.environ.get("ANTHROPIC_API_KEY"))
    if use_claude:
        ckw = {k: v for k, v in kw.items() if k in _CLAUDE_KW}
        if abstained or not passages:
            spec = get_prompt(ckw.get("prompt", DEFAULT_PROMPT))
            base = _claude_base(question, spec, ckw.get("model"))
            return Answer(text=ABSTENTION, citations=[], outcome="abstained", **base)
        return answer_with_claude(question, passages, client=client, **ckw)
    ekw = {k: v for k, v in kw.items() if k in _EXTRACTIVE_KW}
    return answer_extractive(question, [] if abstained else passages, **ekw)
