"""Answer and context as sentences: the units TRACe labels and the judge scores.

Answer sentences carry the passage numbers their ``[n]`` markers cite. Both answerers put the
markers after the text they support (extractive: after each quoted sentence; Claude: after
each cited text block), so every sentence of a segment that ends in markers cites those
passages, and a sentence after the last marker cites nothing. Context sentences are the prose
sentences of each packed passage (the extractive answerer's own splitter, so a quoted
sentence is exactly one context sentence); a passage with no prose sentence (a code block, a
table) counts as one unit, so it still weighs in relevance and utilization.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..answer.extractive import EXTRACTIVE_PREFIX, HEADING_MARKER, ITEM_MARKER, sentence_spans
from ..answer.records import PassageLike
from ..index.analysis import prose_terms

_MARKERS = re.compile(r"(?:\s*\[\d+\])+")
_NUMBER = re.compile(r"\[(\d+)\]")
_SENT_END = re.compile(r"(?<=[.!?])[\"')\]`”’]*\s+(?=[\"'(\[`“‘]?[A-Z0-9`])")
MAX_UNIT_CHARS = 1200  # a code-only passage judged as one unit is cut here


@dataclass(frozen=True)
class ContextSentence:
    passage: int  # 1-based passage number, as cited
    chunk_id: str
    start: int  # [start, end) in the chunk text
    end: int
    text: str


@dataclass(frozen=True)
class AnswerSentence:
    text: str
    passages: tuple[int, ...]  # the passage numbers its markers cite (empty: uncited)
    introduces_list: bool = False  # ends in ":" right before list items ("The defaults are:")

    @property
    def has_content(self) -> bool:
        """Connective text ("Here is how:", a lead-in to a list: its items say what it
        announces) states nothing to support."""
        return len(prose_terms(self.text)) >= 2 and not self.introduces_list

    @property
    def is_claim(self) -> bool:
        """States something about the subject that a passage must support: content, and not a
        statement about what the sources leave out (that is judged as a named gap, not support)."""
        return self.has_content and not names_gap(self.text)


# What the retrieved context is called; not bare "context", "sources" or "page": Kubernetes has
# securityContext and Argo CD a sources field, and claims about those must still be judged.
_SOURCES = (
    r"(?:(?:(?:retrieved|indexed|provided|given|cited)\s+)?(?:documentation|docs|passages?|excerpts?)"
    r"|(?:retrieved|indexed|provided|given|cited)\s+(?:\w+\s+)?(?:context|text|sources?|pages?))"
)
_NOT_COVERED = re.compile(
    rf"\b{_SOURCES}\b[^.;]*?\b(?:do(?:es)?\s+not|do(?:es)?n[’']t|never|not)\s+"
    r"(?:\w+\s+)?(?:cover|say|mention|describe|specify|state|explain|include|contain|address|document|discuss)"
    rf"|\b(?:none|neither)\s+of\s+the\s+{_SOURCES}\b"
    rf"|\b(?:no|nothing)\s+(?:information|details?|mention)\b[^.;]*?\b{_SOURCES}\b"
    rf"|\b{_SOURCES}\b[^.;]*?\b(?:no|nothing)\s+(?:information|details?|mention|about)\b",
    re.IGNORECASE,
)


def names_gap(text: str) -> bool:
    """Whether ``text`` says the sources do not cover something ("The indexed documentation
    does not cover this question.", "The passages do not say how ..."): a statement about the
    retrieved context, not a claim about the subject."""
    return bool(_NOT_COVERED.search(" ".join(text.split())))


def context_sentences(passages: Sequence[PassageLike]) -> list[ContextSentence]:
    """Every prose sentence of every passage, in passage order."""
    out = []
    for number, p in enumerate(passages, 1):
        spans = sentence_spans(p.text) or _whole(p.text)
        out += [ContextSentence(number, p.chunk_id, s, e, p.text[s:e]) for s, e in spans]
    return out


def _whole(text: str) -> list[tuple[int, int]]:
    start = len(text) - len(text.lstrip())
    end = min(len(text.rstrip()), start + MAX_UNIT_CHARS)
    return [(start, end)] if end > start else []


def answer_sentences(text: str) -> list[AnswerSentence]:
    """Sentences of an answer with the passages each cites (markers removed from the text)."""
    body = text[len(EXTRACTIVE_PREFIX) :] if text.startswith(EXTRACTIVE_PREFIX) else text
    out: list[AnswerSentence] = []
    pos = 0
    for m in _MARKERS.finditer(body):
        cited = tuple(dict.fromkeys(int(n) for n in _NUMBER.findall(m.group())))
        out += _split(body[pos : m.start()], cited)
        pos = m.end()
    out += _split(body[pos:], ())
    return out


def _split(segment: str, cited: tuple[int, ...]) -> list[AnswerSentence]:
    out = []
    blocks = _blocks(segment)
    for k, (block, _) in enumerate(blocks):
        parts = [" ".join(p.split()) for p in _SENT_END.split(block)]
        parts = [p for p in parts if p and any(c.isalnum() for c in p)]
        before_items = k + 1 < len(blocks) and blocks[k + 1][1]
        out += [
            AnswerSentence(p, cited, bool(before_items and i == len(parts) - 1 and p.endswith(":")))
            for i, p in enumerate(parts)
        ]
    return out


def _blocks(segment: str) -> list[tuple[str, bool]]:
    """(text, is a list item) of paragraphs, list items and headings, list markers and ``#``
    removed: an LLM answer's bullets often end without a full stop, and one "sentence" running
    from a lead-in through five bullets would be judged as a whole. A wrapped line continues
    its block."""
    blocks: list[tuple[str, bool]] = []
    current: list[str] = []
    is_item = False
    for line in segment.splitlines():
        item = ITEM_MARKER.match(line)
        heading = HEADING_MARKER.match(line)
        if not line.strip() or item or heading:
            if current:
                blocks.append((" ".join(current), is_item))
            current, is_item = [], bool(item)
            line = line[item.end() :] if item else line.lstrip().lstrip("#") if heading else line
        if line.strip():
            current.append(line)
    if current:
        blocks.append((" ".join(current), is_item))
    return blocks


def overlaps(sentence: ContextSentence, start: int, end: int) -> bool:
    """Whether a cited span ``[start, end)`` of the same chunk uses this sentence: it covers
    at least half of the sentence, or the sentence covers at least half of the span."""
    shared = min(end, sentence.end) - max(start, sentence.start)
    return shared > 0 and shared * 2 >= min(sentence.end - sentence.start, end - start)
