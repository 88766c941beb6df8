"""The reader answerer: it states the sentence that answers the question, with its citation.

A tuned sentence encoder (``reader_model.py``, trained by ``reader_training.py``) scores every
prose sentence of the packed passages against the question. Of the top sentences, the one stated
is the first in ``choice`` order (the score, the share of the asked words it holds, its passage's
retrieval rank) whose calibrated probability clears the floor; when none does, the answer is the
abstention sentence, as the extractive answerer's. The sentence is an exact slice of its chunk,
so the citation is exact by construction and never names a passage that lacks it. Questions
asking for several things get up to ``MAX_LIST`` sentences.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .asked import asked_part, asked_parts
from .extractive import sentence_spans
from .prompts import ABSTENTION
from .records import Answer, AnswerBase, Citation, PassageLike, elapsed_ms

if TYPE_CHECKING:
    from .reader_model import Span

READER_METHOD: Literal["reader"] = "reader"
MAX_PASSAGES = 8  # retrieval order: the packed context, never 10,000 forward passes
MAX_LIST = 3
# sentences scored per question, those sharing most words with it: the encoder costs ~8 ms a
# sentence on one core, and on 200 eval questions a cut to 16 of ~36 moved top-sentence F1 by -0.002
MAX_CANDIDATES = 16
# a reader is the default offline answerer only when it learnt: on its dev pages its sentence
# beats the extractive answerer's quotes and its score ranks right answers over wrong ones
MIN_DEV_AUROC = 0.65
# the stated sentence is the best of the top ``TOP_SPANS`` by encoder score + these times the share
# of the asked words it holds − these times log(1 + its passage's retrieval rank): the encoder
# alone often prefers a neighbouring sentence or page; chosen on the k8s eval split (the bench's
# tuning split), docs/answers.md "Choosing the stated sentence"
ASKED_WORDS_WEIGHT = 0.1
PASSAGE_RANK_WEIGHT = 0.02
TOP_SPANS = 5
# what else, besides model and floor, decides a reader's answer (an eval run's cache identity)
CHOICE_RULE = (
    f"asked-part; compound parts; asked words {ASKED_WORDS_WEIGHT:g}; "
    f"passage rank {PASSAGE_RANK_WEIGHT:g}; top {TOP_SPANS}"
)
_SEVERAL = re.compile(
    r"\b(which|what)\s+(are|were|two|three|four|kinds|types|ways|fields|options|steps)\b|\blist\b|\bname\s+(the|two|three)\b",
    re.I,
)


@dataclass(frozen=True)
class ScoredSpan:
    span: Span
    probability: float  # calibrated P(the passages hold the answer), from the encoder's score
    text: str
    asked_share: float = 0.0  # of the asked part's content words, the share this sentence holds

    @property
    def choice(self) -> float:
        """What orders the sentences for stating: score, asked words, retrieval rank."""
        rank = np.log1p(self.span.passage)
        return self.span.score + ASKED_WORDS_WEIGHT * self.asked_share - PASSAGE_RANK_WEIGHT * rank


class Reader:
    """A loaded reader: model, tokenizer, recipe and calibration, on one ``torch.device``."""

    def __init__(self, folder: Path, *, device: str = "cpu", quantize: bool = True) -> None:
        import torch

        from ..probabilities import Platt
        from .reader_model import MODEL_DIR, load_selector
        from .reader_training import DEFAULT_FLOOR, READER_JSON

        record = json.loads((folder / READER_JSON).read_text())
        self.device = torch.device(device)
        model = load_selector(folder / MODEL_DIR, self.device)
        if quantize and self.device.type == "cpu":
            from ..training import quantized

            model = quantized(model) or model
        self.model = model
        self.platt = Platt.from_dict(record["calibration"])
        self.floor = float(record.get("floor", DEFAULT_FLOOR))
        self.model_id = f"reader-{record.get('key', folder.name)}"
        dev = record.get("dev") or {}
        self.usable = (dev.get("dev_sentence_f1") or 0) > (dev.get("dev_extractive_f1") or 0) and (
            dev.get("dev_answerable_auroc") or 0
        ) >= MIN_DEV_AUROC

    def spans(self, question: str, passages: Sequence[str], top: int = TOP_SPANS) -> list[ScoredSpan]:
        """The ``top`` sentences by encoder score over ``passages``, each with its calibrated
        probability, in ``choice`` order (the first is the one to state)."""
        from .reader_data import content_words
        from .reader_model import Span, candidate_spans, lead_over_rest, sentence_scores

        texts = list(passages[:MAX_PASSAGES])
        if not question.strip() or not any(t.strip() for t in texts):
            return []
        found, seen = [], set()
        for s in candidate_spans(texts):  # overlapping chunks repeat sentences: score each once
            key = " ".join(texts[s.passage][s.start : s.end].split())
            if key not in seen:
                seen.add(key)
                found.append(s)
        focus = asked_part(question)  # a question carrying instructions is also scored without them
        wordings = [question] if focus == " ".join(question.split()) else [question, focus]
        words = [content_words(q) for q in reversed(wordings)]  # the asked words order candidates first
        asks = [*wordings, *asked_parts(focus)]  # and each part of a compound question on its own
        sentences = [(s, texts[s.passage][s.start : s.end]) for s in found]
        held = [content_words(text) for _, text in sentences]
        order = sorted(range(len(sentences)), key=lambda k: tuple(-len(w & held[k]) for w in words))
        order = order[:MAX_CANDIDATES]
        scores = sentence_scores(self.model, asks, [sentences[k][1] for k in order])
        lead = lead_over_rest(scores)
        best = np.argsort(-scores, kind="stable")[:top]
        probs = self.platt.apply(np.array([[scores[i], lead[i]] for i in best])) if len(best) else np.zeros(0)
        asked = words[0]
        out = []
        for i, p in zip(best, probs):
            span, text = sentences[order[i]]
            share = len(asked & held[order[i]]) / len(asked) if asked else 0.0
            out.append(ScoredSpan(Span(span.passage, span.start, span.end, float(scores[i])), float(p), text, share))
        return sorted(out, key=lambda s: -s.choice)


@lru_cache(maxsize=2)
def load_reader_folder(folder: str, device: str = "cpu") -> Reader:
    """One loaded reader per folder and process (a content-keyed folder never changes)."""
    return Reader(Path(folder), device=device)


def answer_reader(question: str, passages: Sequence[PassageLike], reader: Reader) -> Answer:
    """The answering sentence(s), each with its ``[n]``; abstain under the floor."""
    started = time.perf_counter()
    base = AnswerBase(question=question, method=READER_METHOD, model=reader.model_id, prompt_name="",
                      prompt_hash="")  # fmt: skip
    scored = reader.spans(question, [p.text for p in passages])
    picked = pick_spans(question, scored, passages, reader.floor)
    if not picked:
        return Answer(text=ABSTENTION, citations=[], outcome="abstained", latency_ms=elapsed_ms(started),
                      candidates=[_candidate(s) for s in scored[:5]], **base)  # fmt: skip
    citations = [evidence_citation(s.span, passages[s.span.passage]) for s in picked]
    short = " ".join(_one_line(s.text) for s in picked)
    text = " ".join(f"{_one_line(c.cited_text)} [{c.passage_number}]" for c in citations)
    return Answer(text=text, citations=citations, outcome="answered",
                  short_answer=short, latency_ms=elapsed_ms(started), candidates=[_candidate(s) for s in scored[:5]],
                  **base)  # fmt: skip


def pick_spans(question: str, scored: Sequence[ScoredSpan], passages: Sequence[PassageLike],
               floor: float) -> list[ScoredSpan]:  # fmt: skip
    """The best sentence over the floor; for list questions, more from other sentences over it."""
    good = [s for s in scored if s.probability >= floor and s.text.strip()]
    if not good:
        return []
    want = MAX_LIST if _SEVERAL.search(question) else 1
    picked: list[ScoredSpan] = []
    seen: set[tuple[int, int]] = set()
    for s in good:
        sentence = _sentence_of(s.span, passages[s.span.passage].text)
        key = (s.span.passage, sentence[0])
        if key in seen or any(_overlaps(s, p) for p in picked):
            continue
        seen.add(key)
        picked.append(s)
        if len(picked) == want:
            break
    return picked


def _overlaps(a: ScoredSpan, b: ScoredSpan) -> bool:
    return a.span.passage == b.span.passage and a.span.start < b.span.end and b.span.start < a.span.end


def _sentence_of(span: Span, text: str) -> tuple[int, int]:
    """The prose sentence(s) covering the span; else the line(s) holding it (a table row, a list)."""
    covering = [(a, b) for a, b in sentence_spans(text) if a < span.end and span.start < b]
    if covering:
        return covering[0][0], max(b for _, b in covering)
    a = text.rfind("\n", 0, span.start) + 1
    b = text.find("\n", span.end)
    return a, len(text) if b < 0 else b


def evidence_citation(span: Span, p: PassageLike) -> Citation:
    """The sentence holding ``span`` as an exact slice of its chunk (it contains the span)."""
    a, b = _sentence_of(span, p.text)
    a, b = min(a, span.start), max(b, span.end)
    return Citation(passage_number=span.passage + 1, chunk_id=p.chunk_id, doc_id=p.doc_id, url=p.url,
                    cited_text=p.text[a:b], chunk_start=a, chunk_end=b, doc_start=p.start_char + a,
                    doc_end=p.start_char + b)  # fmt: skip


def _candidate(s: ScoredSpan) -> dict[str, Any]:
    return {"text": _one_line(s.text), "passage_number": s.span.passage + 1, "probability": round(s.probability, 4),
            "score": round(s.span.score, 3), "asked_share": round(s.asked_share, 3),
            "choice": round(s.choice, 3)}  # fmt: skip


def _one_line(text: str) -> str:
    return " ".join(text.split())
