"""TRACe per answer (RAGBench: context Relevance, Utilization, Adherence, Completeness).

Computed from sentence labels of the packed context, as the paper defines them:

* relevance    = relevant context sentences / all context sentences
* utilization  = context sentences the answer uses (its citation spans) / all
* completeness = relevant ∩ utilized / relevant (None when nothing is relevant)
* adherence    = every answer sentence supported by the passages it cites: per sentence a
  support probability (0 for a sentence that cites nothing); per answer their product, the
  probability that every sentence is supported if the sentences are judged independently.

Relevance labels come from two places, reported side by side: the judge (question, sentence)
for any question, and a silver label from the reference answer for benchmark questions (a
sentence is relevant when most of its content terms are reference-answer terms). Which
labeller made a number is part of its name (``relevance`` vs ``relevance_silver``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..answer.records import Citation
from ..index.analysis import prose_terms
from .sentences import AnswerSentence, ContextSentence, overlaps

# Defaults only: a trained judge carries its own thresholds, fitted on DEV sources
# (``SupportJudge.thresholds``), and callers pass them (``thresholds_of``).
RELEVANT_AT = 0.5  # a calibrated relevance probability at or above this labels a sentence relevant
SUPPORTED_AT = 0.5  # likewise for support; an answer is adherent when every sentence is
SILVER_MIN_SHARED = 2  # silver label: at least this many reference terms in the sentence ...
SILVER_MIN_SHARE = 0.4  # ... making up at least this share of the sentence's own terms


@dataclass
class SentenceVerdict:
    text: str
    passages: tuple[int, ...]
    supported: float  # calibrated probability; 0.0 when the sentence cites nothing

    def to_dict(self) -> dict:
        return {"text": self.text, "supported": round(self.supported, 4), "passage": list(self.passages)}


@dataclass
class Trace:
    relevance: float | None
    utilization: float | None
    completeness: float | None
    adherence: float | None  # probability that every answer sentence is supported
    adherent: bool | None  # every sentence at or above supported_at
    sentences: list[SentenceVerdict] = field(default_factory=list)
    relevant: list[int] = field(default_factory=list)  # indexes into the context sentences
    utilized: list[int] = field(default_factory=list)
    supported_at: float = SUPPORTED_AT

    def unsupported(self) -> list[str]:
        return [s.text for s in self.sentences if s.supported < self.supported_at]


def thresholds_of(judge) -> tuple[float, float]:
    """(supported_at, relevant_at) of a judge: its DEV-fitted thresholds, else the defaults."""
    own = getattr(judge, "thresholds", None) or {}
    return float(own.get("support", SUPPORTED_AT)), float(own.get("relevance", RELEVANT_AT))


def utilized_sentences(context: Sequence[ContextSentence], citations: Sequence[Citation]) -> list[int]:
    """Context sentences that a citation span of the same passage covers."""
    return [
        i
        for i, s in enumerate(context)
        if any(c.passage_number == s.passage and overlaps(s, c.chunk_start, c.chunk_end) for c in citations)
    ]


def judged_relevant(relevance: Sequence[float], at: float = RELEVANT_AT) -> list[int]:
    """Context sentences the judge labels relevant."""
    return [i for i, p in enumerate(relevance) if p >= at]


def silver_relevant(context: Sequence[ContextSentence], reference_answer: str) -> list[int]:
    """Sentences whose content is mostly reference-answer terms (no model; benchmark questions)."""
    wanted = set(prose_terms(reference_answer))
    out = []
    for i, s in enumerate(context):
        own = set(prose_terms(s.text))
        shared = len(own & wanted)
        if own and shared >= SILVER_MIN_SHARED and shared >= SILVER_MIN_SHARE * len(own):
            out.append(i)
    return out


def trace_scores(
    context: Sequence[ContextSentence],
    relevant: Sequence[int],
    utilized: Sequence[int],
    answer: Sequence[AnswerSentence],
    support: Sequence[float] | None,
    supported_at: float = SUPPORTED_AT,
) -> Trace:
    """TRACe of one answer; ``support`` holds one probability per content-bearing sentence
    that cites something (None: no judge, adherence unmeasured)."""
    n = len(context)
    rel, used = set(relevant), set(utilized)
    verdicts = _verdicts(answer, support)
    probs = [v.supported for v in verdicts or []]
    return Trace(
        relevance=len(rel) / n if n else None,
        utilization=len(used) / n if n else None,
        completeness=len(rel & used) / len(rel) if rel else None,
        adherence=None if verdicts is None or not probs else math.prod(probs),
        adherent=None if verdicts is None or not probs else all(p >= supported_at for p in probs),
        sentences=verdicts or [],
        relevant=sorted(rel),
        utilized=sorted(used),
        supported_at=supported_at,
    )


def judged_sentences(answer: Sequence[AnswerSentence]) -> list[AnswerSentence]:
    """The sentences the judge is asked about: they state something and cite a passage."""
    return [s for s in answer if s.is_claim and s.passages]


def _verdicts(answer: Sequence[AnswerSentence], support: Sequence[float] | None) -> list[SentenceVerdict] | None:
    if support is None:
        return None
    judged = judged_sentences(answer)
    if len(support) != len(judged):
        raise ValueError(f"{len(support)} support scores for {len(judged)} judged sentences")
    scores = dict(zip(map(id, judged), support, strict=True))
    return [
        SentenceVerdict(s.text, s.passages, float(scores.get(id(s), 0.0)))
        for s in answer
        if s.is_claim  # an uncited claim is unsupported by definition
    ]


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Agreement of two binary labellings beyond chance (None when undefined)."""
    n = len(a)
    if n == 0 or n != len(b):
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    return None if expected >= 1 else (observed - expected) / (1 - expected)
