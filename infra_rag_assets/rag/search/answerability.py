"""Answerability beyond the dense floor: refuse in-domain questions the corpus cannot answer.

The dense floor (``calibration.py``) separates off-topic questions from on-topic ones, but an
in-domain near miss ("How do I build images in a pod with Kaniko?") embeds close to real
Kubernetes pages: its best cosine overlaps answerable questions completely. What such a
question usually has is a **subject the corpus never names**: a word (a product, a field, a
flag) that occurs in no chunk of the version. Measured on the base-model release
(docs/tuning-log.md, "Answerability"): 24 of our 30 near-miss questions have one, 9 of 557
answerable eval questions (mostly about API fields newer than the 2023-11 snapshot) and none of
our 109 answerable ones.

The signal, ``unknown_terms``: the question's *atomic* words (identifier analysis, no
connector punctuation: ``setWeight`` -> ``setweight``; the whole ``write-back`` is skipped, its
parts are words of their own) that occur in no indexed field, neither as written nor stemmed,
ignoring words shorter than ``min_chars`` (acronyms and fragments match by accident) and words
one edit away from a corpus word (a typo of a known word is not an unknown subject).

Optional second signal, ``top_pages_agree``: dense and lexical retrieval putting the same page
first is evidence the question is understood; ``require_disagreement`` refuses only when they
disagree. Other signals measured and not kept (coverage of the question's terms in the top
passages, BM25 top score, top-1/top-2 margins) are in the tuning log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ..index.analysis import identifier_terms, prose_terms

_CONNECTOR = re.compile(r"[-_./:=]")
PROSE_FIELDS = ("body", "title", "section")


class Vocabulary(Protocol):
    """What answerability asks of a version's lexical index (``LexicalSearcher`` implements it)."""

    def doc_freq(self, field: str, term: str) -> int: ...

    def has_near_term(self, field: str, term: str, distance: int = 1) -> bool: ...


@dataclass(frozen=True)
class AnswerabilityRule:
    """The measured rule; recorded with each version's calibration."""

    min_chars: int = 4
    typo_distance: int = 1  # 0 turns the typo allowance off
    require_disagreement: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnswerabilityRule:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


DEFAULT_RULE = AnswerabilityRule()


def candidate_words(question: str, min_chars: int = DEFAULT_RULE.min_chars) -> list[str]:
    """Atomic identifier terms of the question worth looking up (no digits-only, no compounds)."""
    words = (t for t in identifier_terms(question) if not _CONNECTOR.search(t))
    return [t for t in dict.fromkeys(words) if len(t) >= min_chars and not t.isdigit()]


def is_known(word: str, vocab: Vocabulary) -> bool:
    """The word occurs in the corpus as an identifier term or, stemmed, as a prose term."""
    if vocab.doc_freq("ident", word):
        return True
    stems = prose_terms(word)
    return bool(stems) and any(vocab.doc_freq(field, stems[0]) for field in PROSE_FIELDS)


def unknown_terms(question: str, vocab: Vocabulary, rule: AnswerabilityRule = DEFAULT_RULE) -> list[str]:
    """Words of the question that no chunk of the version contains (typos of known words excepted)."""
    unknown = []
    for word in candidate_words(question, rule.min_chars):
        if is_known(word, vocab):
            continue
        if rule.typo_distance and vocab.has_near_term("ident", word, rule.typo_distance):
            continue
        unknown.append(word)
    return unknown


def top_pages_agree(dense_pages: Iterable[str | None], lexical_pages: Iterable[str | None]) -> bool:
    """Dense and lexical retrieval rank the same page first."""
    dense, lexical = next(iter(dense_pages), None), next(iter(lexical_pages), None)
    return dense is not None and dense == lexical


def unanswerable_reason(
    question: str,
    vocab: Vocabulary,
    *,
    dense_pages: Iterable[str | None] = (),
    lexical_pages: Iterable[str | None] = (),
    rule: AnswerabilityRule = DEFAULT_RULE,
) -> str:
    """Why the question looks unanswerable from this corpus, or "" to answer it."""
    unknown = unknown_terms(question, vocab, rule)
    if not unknown:
        return ""
    if rule.require_disagreement and top_pages_agree(dense_pages, lexical_pages):
        return ""
    words = ", ".join(repr(w) for w in unknown[:3])
    return f"question term(s) {words} occur nowhere in this index version"
