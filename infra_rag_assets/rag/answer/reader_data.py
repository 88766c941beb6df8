"""Answer-sentence examples for the reader, made from the benchmark's TRAIN split and the chunks.

The reference answers are short restatements of one sentence of their source page ("It
facilitates both declarative configuration and automation." for "... that facilitates both
declarative configuration and automation."). So each answer is placed at the sentence of its
page (``sentence_spans``: what the reader reads at answer time) with the best token F1 against
it, kept when that F1 reaches ``MIN_POSITIVE_F1``; rows that cannot be placed are counted by
reason, never guessed. The hard negative is a sentence of the same page that shares the
question's words but not the answer's: what a word-matching quoter would wrongly pick. Other
questions' answer sentences in the same batch are the "other page" negatives (in-batch).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .extractive import sentence_spans
from .overlap import answer_tokens, token_f1_recall

DATA_VERSION = "2"  # bump when placement or negative rules change: trained readers are keyed by it
MIN_POSITIVE_F1 = 0.4  # the best sentence of the page must share this much with the answer
MAX_NEGATIVE_F1 = 0.2  # a negative shares at most this much with the answer
MIN_SENTENCE_CHARS = 16  # shorter "sentences" are headings' leftovers, not answers
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as be by can do does for how in is it of on or that the this to what when which why with".split()
)


def token_f1(answer: str, reference: str) -> float:
    """SQuAD token F1 (``overlap``), 0.0 when the reference has no tokens."""
    return (token_f1_recall(answer, reference) or (0.0, 0.0))[0]


def page_sentences(texts: Sequence[str]) -> list[str]:
    """The distinct prose sentences of a page's chunks, one line each, in page order."""
    found = (" ".join(t[a:b].split()) for t in texts for a, b in sentence_spans(t))
    return list(dict.fromkeys(s for s in found if len(s) >= MIN_SENTENCE_CHARS))


@dataclass(frozen=True)
class ReaderQuestion:
    """A placed TRAIN question: its page's sentences, which one holds the answer, a hard negative."""

    question: str
    answer: str
    doc_id: str  # the question's page: dev splits are cut by it
    sentences: tuple[str, ...]
    positive: int  # index into sentences
    negative: int  # index into sentences; -1 when the page has no eligible one


@dataclass
class ReaderExamples:
    questions: list[ReaderQuestion] = field(default_factory=list)
    unplaced: Counter = field(default_factory=Counter)  # reason -> rows

    @property
    def composition(self) -> dict[str, int]:
        with_negative = sum(q.negative >= 0 for q in self.questions)
        return {"placed": len(self.questions), "with_hard_negative": with_negative,
                **{f"unplaced_{k}": v for k, v in self.unplaced.items()}}  # fmt: skip


def page_of_row(row: Mapping) -> str:
    return f"kubernetes:{row['source_page']}"


def content_words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - _STOP


def build_examples(rows: Sequence[Mapping], chunks: Sequence[Mapping], *, seed: int = 13) -> ReaderExamples:
    """Every placeable train row with its page's sentences. ``chunks`` need ``doc_id`` and ``text``."""
    texts: dict[str, list[str]] = {}
    for c in chunks:
        texts.setdefault(c["doc_id"], []).append(c["text"])
    pages: dict[str, list[str]] = {}
    out = ReaderExamples()
    rng = random.Random(seed)
    for row in rows:
        doc = page_of_row(row)
        if doc not in texts:
            out.unplaced["page_not_in_corpus"] += 1
            continue
        answer = row.get("answer") or ""
        if not answer_tokens(answer):
            out.unplaced["empty_answer"] += 1
            continue
        sentences = pages.setdefault(doc, page_sentences(texts[doc]))
        f1s = [token_f1(s, answer) for s in sentences]
        if not f1s or max(f1s) < MIN_POSITIVE_F1:
            out.unplaced["below_sentence_floor"] += 1
            continue
        positive = max(range(len(f1s)), key=lambda i: (f1s[i], -i))
        asked = content_words(row["question"])
        eligible = sorted((i for i, f in enumerate(f1s) if f <= MAX_NEGATIVE_F1),
                          key=lambda i: (-len(asked & content_words(sentences[i])), i))[:3]  # fmt: skip
        negative = rng.choice(eligible) if eligible else -1
        out.questions.append(ReaderQuestion(row["question"], answer, doc, tuple(sentences), positive, negative))
    return out


def split_by_page(questions: Sequence[ReaderQuestion], share: float, seed: int) -> tuple[list, list]:
    """(train, dev): ``share`` of the pages, all their questions, held out for choices and calibration."""
    pages = sorted({q.doc_id for q in questions})
    count = min(max(1, int(len(pages) * share)), len(pages) - 1)  # never every page: something trains
    held = set(random.Random(seed).sample(pages, count)) if count > 0 else set()
    return [q for q in questions if q.doc_id not in held], [q for q in questions if q.doc_id in held]
