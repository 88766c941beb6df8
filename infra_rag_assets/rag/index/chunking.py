"""Section-aware chunking sized in the embedding model's own tokens.

Chunks are exact ``[start, end)`` slices of a document's cleaned text, so citations can point
at them and lexical and vector indexes agree on what a chunk is. The cutting rules, coarsest
first: a chunk never crosses a section boundary; a section body that fits ``max_tokens`` is
one chunk; a longer one is cut at blank lines, then single lines (code, lists, config), then
sentence ends, then spaces, packing pieces greedily up to ``target_tokens``.

A single whitespace-free "word" with more than ``max_tokens`` tokens (minified JSON, a base64
blob, a very long URL) is the one place a word is cut: it is hard-cut at token offsets so that
``token_count <= max_tokens`` holds for every chunk. A chunk made only of characters the
tokenizer drops (e.g. U+200B) is still emitted, with ``token_count == 0``, so that no
non-whitespace text goes missing; a heading with no body of its own is a chunk of its own.

Token budget. all-MiniLM-L6-v2 has ``max_seq_length == 256`` word pieces, and that window
also holds ``[CLS]``/``[SEP]`` and the context line prepended by ``corpus_chunks.embed_input``.
``max_tokens`` counts chunk text only. The provisional default 256 is the model window, the
largest chunk the model can see at all: the chunk's slice, lexical index and citations stay
whole, but for a full-size chunk the embedding input loses its last ``2 + len(context)``
tokens to truncation. About 224 would leave room for a 30-token context line; the final
value is to be picked by retrieval measurement, not here.
"""

from __future__ import annotations

import hashlib
import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ..ingest.models import PageSpan, Section
from .config import ChunkSettings
from .tokens import TokenCounter, hard_cut, trim

CHUNKER_VERSION = "2"  # bump when cutting rules change, so config_hash (and caches) move

# Strength of a whitespace run as a cut point; splitting at level L cuts at runs >= L.
_WORD, _SENTENCE, _LINE, _PARAGRAPH = 1, 2, 3, 4
_WS_RE = re.compile(r"\s+")
_SENTENCE_END = frozenset(".!?")
_CLOSERS = frozenset("\"')]»”’*_`")


@dataclass(frozen=True)
class ChunkSpan:
    """One chunk: ``document_text[start:end] == text``, governed by one section."""

    start: int
    end: int
    text: str
    section_path: tuple[str, ...]
    anchor: str
    pages: tuple[int, ...]
    token_count: int
    ordinal: int


@dataclass(frozen=True)
class ChunkerSettings:
    """Token budgets. ``min_tokens``: a smaller piece merges into the previous chunk of the
    same section when the merge fits ``max_tokens`` (so sections do not end in crumbs).

    ``max_chars`` and ``max_chunks`` bound the work a hostile page can cause: tokens alone do
    not bound characters (a whitespace run is no token; a 100+ character word is one
    ``[UNK]``), so a chunk longer than ``max_chars`` is cut again at whitespace (whitespace-only
    pieces vanish); a document stops after ``max_chunks`` chunks. Both sit far above what the
    real corpus reaches (README, "Data and parsing"), so normal pages never meet them.
    """

    # Defaults are the build defaults (config.ChunkSettings is their one home).
    target_tokens: int = ChunkSettings.target_tokens
    max_tokens: int = ChunkSettings.max_tokens
    min_tokens: int = ChunkSettings.min_tokens
    max_chars: int = ChunkSettings.max_chars
    max_chunks: int = ChunkSettings.max_chunks

    def __post_init__(self) -> None:
        if not 0 < self.target_tokens <= self.max_tokens or self.min_tokens < 0:
            raise ValueError(f"need 0 < target_tokens <= max_tokens and min_tokens >= 0: {self}")
        if self.max_chars < 1 or self.max_chunks < 1:
            raise ValueError(f"need max_chars >= 1 and max_chunks >= 1: {self}")

    def config_hash(self) -> str:
        """Short stable hash of the budgets and the chunker version (not the tokenizer)."""
        blob = json.dumps({"version": CHUNKER_VERSION, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def chunk_document(
    text: str,
    sections: Sequence[Section],
    page_spans: Sequence[PageSpan],
    counter: TokenCounter,
    config: ChunkerSettings,
) -> list[ChunkSpan]:
    """Cut ``text`` into chunks, in document order; see the module docstring for the rules."""
    pages = _PageIndex(page_spans)
    chunks: list[ChunkSpan] = []
    for start, end, section in _leaf_units(text, sections):
        start, end = trim(text, start, end)
        if start == end:
            continue
        for s, e, n in _bound_chars(text, _split_unit(text, start, end, counter, config), counter, config):
            if len(chunks) >= config.max_chunks:
                return chunks
            chunks.append(
                ChunkSpan(
                    start=s,
                    end=e,
                    text=text[s:e],
                    section_path=section.path if section else (),
                    anchor=section.anchor if section else "",
                    pages=pages.lookup(s, e),
                    token_count=n,
                    ordinal=len(chunks),
                )
            )
    return chunks


def is_truncated(text: str, chunks: Sequence[ChunkSpan], config: ChunkerSettings) -> bool:
    """True when ``chunk_document`` stopped at ``max_chunks`` before the end of ``text``."""
    return len(chunks) >= config.max_chunks and bool(text[chunks[-1].end :].strip())


def _bound_chars(
    text: str, pieces: list[tuple[int, int, int]], counter: TokenCounter, config: ChunkerSettings
) -> list[tuple[int, int, int]]:
    """Cut pieces over ``max_chars`` at their last whitespace within the bound (else hard at
    the bound); trimmed sub-slices stay exact, and whitespace-only ones are dropped."""
    out: list[tuple[int, int, int]] = []
    for s, e, n in pieces:
        if e - s <= config.max_chars:
            out.append((s, e, n))
            continue
        pos = s
        while pos < e:
            cut = min(e, pos + config.max_chars)
            if cut < e:
                k = cut
                while k > pos and not text[k].isspace():
                    k -= 1
                cut = k if k > pos else cut
            a, b = trim(text, pos, cut)
            if a < b:
                m = counter.count(text[a:b])
                out.extend([(a, b, m)] if m <= config.max_tokens else hard_cut(text, a, b, counter, config.max_tokens))
            pos = cut
    return out


def context_line(project: str, title: str, section_path: Sequence[str]) -> str:
    """``project › title › heading › subheading`` for embedding; the title is not repeated."""
    title_key = _one_line(title).casefold()
    parts = [project, title, *(p for p in section_path if _one_line(p).casefold() != title_key)]
    return " › ".join(p for p in map(_one_line, parts) if p)


def chunk_id(doc_id: str, start: int, end: int, text_hash: str) -> str:
    """Stable 16-hex id: same document, span and content give the same id in every build."""
    return hashlib.sha256(f"{doc_id}\x1f{start}\x1f{end}\x1f{text_hash}".encode()).hexdigest()[:16]


def _one_line(s: str) -> str:
    return " ".join(s.split())


def _leaf_units(text: str, sections: Sequence[Section]) -> list[tuple[int, int, Section | None]]:
    """Partition ``text`` into maximal ranges governed by one innermost section (or none).

    Works from the section spans alone, so it needs no heading levels to be consistent: every
    range between two span boundaries belongs to the deepest section covering it, which for
    well-formed Markdown is "a heading up to its first child heading", plus the preamble.
    """
    n = len(text)
    secs = sorted((s for s in sections if max(0, s.start) < min(n, s.end)), key=lambda s: (s.start, -s.end))
    cuts = sorted({0, n, *(min(n, max(0, s.start)) for s in secs), *(min(n, s.end) for s in secs)})
    units: list[tuple[int, int, Section | None]] = []
    open_: list[Section] = []
    k = 0
    for a, b in zip(cuts, cuts[1:]):
        while k < len(secs) and secs[k].start <= a:
            open_.append(secs[k])
            k += 1
        open_ = [s for s in open_ if s.end > a]
        gov = max(open_, key=lambda s: (s.start, -s.end, s.level), default=None)
        if units and units[-1][2] is gov:
            units[-1] = (units[-1][0], b, gov)
        else:
            units.append((a, b, gov))
    return units


def _split_unit(
    text: str, start: int, end: int, counter: TokenCounter, config: ChunkerSettings, depth: int = 0
) -> list[tuple[int, int, int]]:
    """Chunks ``(start, end, token_count)`` of one trimmed unit, counts verified by the counter.

    The plan uses one tokenization of the unit (counts of sub-ranges by bisecting token
    starts), which is exact when cuts fall on whitespace the tokenizer also splits on. Every
    chunk is then re-counted on its own text. The rare chunk whose true count disagrees and
    exceeds the limit is planned again from its own tokenization, so it is still cut between
    words where it can be (U+000B, U+001C..F, U+0085 are whitespace to Python but control
    characters BERT deletes, gluing the words on either side into one; a hard-cut piece of an
    over-long word re-counts differently once a short word is merged onto it). Each re-plan
    works on a strictly shorter range; past two re-plans the chunk is hard-cut, so hostile
    input cannot make the recursion deep (the default corpus needs no re-plan at all).
    """
    plan = _Planner(text, start, end, counter, config)
    ranges = plan.split(start, end, _PARAGRAPH)
    if ranges == [(start, end)]:
        return [(start, end, len(plan.starts))]  # the unit's own tokenization is its count
    out: list[tuple[int, int, int]] = []
    for s, e in plan.merge_tiny(ranges):
        n = counter.count(text[s:e])
        if n <= config.max_tokens:
            out.append((s, e, n))
        else:
            out.extend(
                _split_unit(text, s, e, counter, config, depth + 1)
                if depth < 2
                else hard_cut(text, s, e, counter, config.max_tokens)
            )
    return out


class _Planner:
    """Cut planning for one unit: token starts and classified whitespace runs, computed once."""

    def __init__(self, text: str, start: int, end: int, counter: TokenCounter, config: ChunkerSettings) -> None:
        self.text, self.counter, self.config = text, counter, config
        self.starts = [start + a for a, _ in counter.offsets(text[start:end])]
        self.runs = [(m.start(), m.end()) for m in _WS_RE.finditer(text, start, end)]
        self.run_starts = [a for a, _ in self.runs]
        self.strength = [self._strength(a, b) for a, b in self.runs]

    def tokens(self, start: int, end: int) -> int:
        return bisect_left(self.starts, end) - bisect_left(self.starts, start)

    def _strength(self, a: int, b: int) -> int:
        newlines = self.text.count("\n", a, b)
        if newlines:
            return _PARAGRAPH if newlines > 1 else _LINE
        k = a - 1
        while k > 0 and self.text[k] in _CLOSERS:
            k -= 1
        return _SENTENCE if self.text[k] in _SENTENCE_END else _WORD

    def pieces(self, start: int, end: int, level: int) -> list[tuple[int, int]]:
        """Non-blank ranges of ``[start, end)`` between whitespace runs of strength >= level."""
        out, pos = [], start
        i = bisect_left(self.run_starts, start)
        while i < len(self.runs) and self.runs[i][0] < end:
            if self.strength[i] >= level:
                out.append((pos, self.runs[i][0]))
                pos = self.runs[i][1]
            i += 1
        out.append((pos, end))
        return out

    def split(self, start: int, end: int, level: int) -> list[tuple[int, int]]:
        """Greedy packing of ``level`` pieces; oversized pieces recurse one level finer."""
        limit, target = self.config.max_tokens, self.config.target_tokens
        if self.tokens(start, end) <= limit:
            return [(start, end)]
        if level < _WORD:
            return [(s, e) for s, e, _ in hard_cut(self.text, start, end, self.counter, limit)]
        out: list[tuple[int, int]] = []
        cur: tuple[int, int] | None = None
        for s, e in self.pieces(start, end, level):
            if self.tokens(s, e) > limit:
                out += ([cur] if cur else []) + self.split(s, e, level - 1)
                cur = None
            elif cur and self.tokens(cur[0], e) <= target:
                cur = (cur[0], e)
            else:
                out += [cur] if cur else []
                cur = (s, e)
        return out + ([cur] if cur else [])

    def merge_tiny(self, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Fold pieces under ``min_tokens`` into their predecessor when the result fits."""
        out: list[tuple[int, int]] = []
        for s, e in ranges:
            tiny = self.tokens(s, e) < self.config.min_tokens
            if out and tiny and self.tokens(out[-1][0], e) <= self.config.max_tokens:
                out[-1] = (out[-1][0], e)
            else:
                out.append((s, e))
        return out


class _PageIndex:
    """Pages a span intersects, by bisection. Assumes page spans do not overlap (PDF order)."""

    def __init__(self, spans: Sequence[PageSpan]) -> None:
        ordered = sorted((p for p in spans if p.start < p.end), key=lambda p: p.start)
        self.starts = [p.start for p in ordered]
        self.ends = [p.end for p in ordered]
        self.pages = [p.page for p in ordered]

    def lookup(self, start: int, end: int) -> tuple[int, ...]:
        lo, hi = bisect_right(self.ends, start), bisect_left(self.starts, end)
        return tuple(sorted(set(self.pages[lo:hi])))
