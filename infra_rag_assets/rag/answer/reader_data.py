"""Span-labelled examples for the reader, made from the benchmark's TRAIN split and the chunks.

The reference answers are short extractive spans of their source chunk, but not always verbatim
("A StorageClass reclaim policy of Delete." for "... a reclaim policy of ``Delete`` ..."). So each
answer is located in a chunk of its page in two steps: verbatim (case-insensitive, final period
dropped), else the contiguous word window of a chunk with the best token F1 against the answer,
kept when that F1 reaches ``MIN_ALIGN_F1``. Rows whose answer cannot be placed are counted by
reason, never guessed. Negatives pair a question with the best BM25 chunk of another page:
"no answer here" must be learnt on passages that look relevant, not on random ones.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..index.bm25 import BM25
from .overlap import answer_tokens, token_f1_recall

DATA_VERSION = "1"  # bump when location or negative rules change: trained readers are keyed by it
MIN_ALIGN_F1 = 0.5  # a fuzzy window below this is not the answer's place
MAX_WINDOW_WORDS = 80
_WORD = re.compile(r"\S+")


def token_f1(answer: str, reference: str) -> float:
    """SQuAD token F1 (``overlap``), 0.0 when the reference has no tokens."""
    return (token_f1_recall(answer, reference) or (0.0, 0.0))[0]


@dataclass(frozen=True)
class SpanExample:
    question: str
    passage: str
    start: int  # character span of the answer in passage; -1, -1 for a negative
    end: int
    doc_id: str  # the question's page: dev splits are cut by it
    how: str  # "exact" | "fuzzy" | "negative"


@dataclass
class ReaderExamples:
    examples: list[SpanExample] = field(default_factory=list)
    unlocated: Counter = field(default_factory=Counter)  # reason -> rows

    @property
    def composition(self) -> dict[str, int]:
        made = Counter(e.how for e in self.examples)
        return {**dict(made), **{f"unlocated_{k}": v for k, v in self.unlocated.items()}}


def _norm(word: str) -> str:
    toks = answer_tokens(word)
    return toks[0] if len(toks) == 1 else " ".join(toks)


def locate_answer(answer: str, text: str) -> tuple[int, int, str, float] | None:
    """``(start, end, how, f1)`` of ``answer`` in ``text``; None when no window reaches the floor."""
    needle = answer.strip().rstrip(".").strip()
    if needle:
        at = text.lower().find(needle.lower())
        if at >= 0:
            return at, at + len(needle), "exact", 1.0
    ref = Counter(answer_tokens(answer))
    if not ref:
        return None
    words = [(m.start(), m.end(), _norm(m.group())) for m in _WORD.finditer(text)]
    hits = [i for i, w in enumerate(words) if w[2] and w[2] in ref]
    best: tuple[float, int, int] = (0.0, 0, 0)
    total = sum(ref.values())
    for a in hits:  # an F1-best window starts and ends on a word of the answer
        got: Counter = Counter()
        for j in range(a, min(len(words), a + MAX_WINDOW_WORDS)):
            if words[j][2]:
                got.update(words[j][2].split())
            if words[j][2] not in ref:
                continue
            shared = sum((got & ref).values())
            size = sum(got.values())
            f1 = 2 * shared / (size + total) if size else 0.0
            if f1 > best[0]:
                best = (f1, a, j)
    if best[0] < MIN_ALIGN_F1:
        return None
    start, end = words[best[1]][0], words[best[2]][1]
    while end > start and text[end - 1] in ".,;:)`*\"'":
        end -= 1
    while start < end and text[start] in "(`*\"'":
        start += 1
    return start, end, "fuzzy", round(best[0], 4)


def page_of_row(row: Mapping) -> str:
    return f"kubernetes:{row['source_page']}"


def build_examples(rows: Sequence[Mapping], chunks: Sequence[Mapping], *, negatives_per_positive: float = 0.5,
                   seed: int = 13) -> ReaderExamples:  # fmt: skip
    """Positives from every locatable train row, negatives from other pages' lexically closest chunks.

    ``chunks`` need ``doc_id`` and ``text``. A row's answer is placed in the chunk of its page
    where it aligns best (verbatim beats fuzzy; ties go to the earlier chunk).
    """
    by_doc: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        by_doc.setdefault(c["doc_id"], []).append(i)
    out = ReaderExamples()
    rng = random.Random(seed)
    located: list[tuple[Mapping, str]] = []
    for row in rows:
        doc = page_of_row(row)
        if doc not in by_doc:
            out.unlocated["page_not_in_corpus"] += 1
            continue
        if not answer_tokens(row.get("answer") or ""):
            out.unlocated["empty_answer"] += 1
            continue
        found = [(loc, i) for i in by_doc[doc] if (loc := locate_answer(row["answer"], chunks[i]["text"]))]
        if not found:
            out.unlocated["below_alignment_floor"] += 1
            continue
        (start, end, how, _), i = max(found, key=lambda x: (x[0][3], -x[1]))
        out.examples.append(SpanExample(row["question"], chunks[i]["text"], start, end, doc, how))
        located.append((row, doc))
    if negatives_per_positive > 0 and located:
        bm25 = BM25([c["text"] for c in chunks])
        for row, doc in rng.sample(located, min(len(located), int(len(located) * negatives_per_positive))):
            order = bm25.scores(row["question"]).argsort()[::-1]
            other = next((int(i) for i in order[:50] if chunks[int(i)]["doc_id"] != doc), None)
            if other is not None:
                out.examples.append(SpanExample(row["question"], chunks[other]["text"], -1, -1, doc, "negative"))
    return out


def split_by_page(examples: Sequence[SpanExample], share: float, seed: int) -> tuple[list, list]:
    """(train, dev): ``share`` of the pages, all their examples, held out for choices and calibration."""
    pages = sorted({e.doc_id for e in examples})
    count = min(max(1, int(len(pages) * share)), len(pages) - 1)  # never every page: something trains
    held = set(random.Random(seed).sample(pages, count)) if count > 0 else set()
    return [e for e in examples if e.doc_id not in held], [e for e in examples if e.doc_id in held]
