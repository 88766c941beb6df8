"""The offline answerer (no API key, CI): it quotes the sentences that best match the question
verbatim, so its citations are exact by construction, and its text says it is extractive so
nobody mistakes it for a generated answer."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..index.analysis import identifier_terms, prose_terms, stem
from .prompts import ABSTENTION
from .records import Answer, AnswerBase, Citation, PassageLike, elapsed_ms

EXTRACTIVE_MODEL = "extractive-v1"  # bump when sentence selection changes, like a model id
EXTRACTIVE_PREFIX = "Extractive answer (no LLM): "
RELATIVE_FLOOR = 0.5  # extractive: drop sentences scoring under half the best one (padding)
POSITION_BOOST = 0.1  # extractive: first sentence of a passage scores up to 10% more
MIN_COVERAGE = 1 / 3  # extractive: a sentence must touch this share of the question's words


_FENCE = re.compile(r" {0,3}(?:`{3,}|~{3,})")
HEADING_MARKER = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
ITEM_MARKER = re.compile(r"[ \t]*(?:[-*+>]|\d{1,3}[.)])[ \t]+")  # list item or block quote marker
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
        if fence or fenced or not line.strip() or HEADING_MARKER.match(line):
            cur = None
            continue
        item = ITEM_MARKER.match(line)
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
    base = AnswerBase(question=question, method="extractive", model=EXTRACTIVE_MODEL,
                      prompt_name="", prompt_hash="")  # fmt: skip
    pool = _sentence_pool(passages)
    picked = _pick(pool, _question_groups(question), max_sentences)
    if not picked:
        return Answer(text=ABSTENTION, citations=[], outcome="abstained",
                      latency_ms=elapsed_ms(started), **base)  # fmt: skip
    citations = [_extractive_citation(s, passages[s.passage]) for s in picked]
    body = " ".join(f"{' '.join(c.cited_text.split())} [{c.passage_number}]" for c in citations)
    return Answer(text=EXTRACTIVE_PREFIX + body, citations=citations, outcome="answered",
                  latency_ms=elapsed_ms(started), **base)  # fmt: skip


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
