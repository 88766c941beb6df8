"""The reader network: MiniLM as a bi-encoder tuned to put a question next to the sentence answering it.

Why sentences and not start/end spans: the benchmark's reference answers restate one sentence of
their page (median 8 words), and a start/end head on MiniLM (not QA-trained) found poor spans
(dev span F1 0.35, and a margin that ranked right answers at AUROC 0.62, so it abstained on
every eval question). Picking the sentence is the task MiniLM was pre-trained for (question to
passage similarity): tuned, it states the right sentence far more often (docs/answers.md).
Scoring is one forward pass per candidate sentence, batched; the device is a parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..index.embedding import offline_models
from .extractive import sentence_spans
from .reader_data import MIN_SENTENCE_CHARS

MODEL_DIR = "model"  # the tuned sentence-transformers directory inside a reader folder
_CLOSERS = set(".!?:;)]`'\"*")  # a sentence whose last character is one of these is closed


@dataclass(frozen=True)
class Span:
    passage: int  # index into the passages scored
    start: int  # character offsets into that passage's text: one prose sentence
    end: int
    score: float  # cosine of the question and the sentence under the tuned encoder


def candidate_spans(texts: Sequence[str]) -> list[Span]:
    """Every prose sentence of every passage (``sentence_spans``, as in training), unscored, but
    for one the chunk boundary cut short: stated alone it would read as a broken answer."""
    return [
        Span(p, a, b, 0.0)
        for p, text in enumerate(texts)
        for a, b in sentence_spans(text)
        if len(" ".join(text[a:b].split())) >= MIN_SENTENCE_CHARS and not _cut_by_chunk(text, a, b)
    ]


def _cut_by_chunk(text: str, start: int, end: int) -> bool:
    """The sentence runs into the chunk's end without closing, or starts mid-sentence at its head."""
    tail = not text[end:].strip() and text[end - 1] not in _CLOSERS
    head = not text[:start].strip() and text[start].islower()
    return tail or head


def load_selector(path: str | Path, device: Any = "cpu") -> Any:
    """The tuned encoder of a reader folder (or a base model directory), offline only."""
    offline_models()
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(path), device=str(device), local_files_only=True)


def lead_over_rest(scores: np.ndarray) -> np.ndarray:
    """Each score minus the best *other* score: the top sentence's lead over the runner-up, which
    says more about being right than the score itself (dev pages: AUROC 0.64 against 0.57)."""
    if len(scores) < 2:
        return np.ones(len(scores))
    first, second = np.sort(scores)[-2:][::-1]
    return scores - np.where(scores >= first, second, first)


def unit_vectors(model: Any, texts: Sequence[str], batch_size: int = 8) -> np.ndarray:
    """Normalised embeddings of ``texts`` (whitespace folded, as in training). Small batches: the
    encoder sorts texts by length, so each batch pads little (8: 257 ms against 497 ms at 64 for
    36 sentences on one core)."""
    folded = [" ".join(t.split()) for t in texts]
    return model.encode(folded, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                        show_progress_bar=False)  # fmt: skip


def sentence_scores(
    model: Any, questions: str | Sequence[str], sentences: Sequence[str], batch_size: int = 8
) -> np.ndarray:
    """Cosine of the question with each sentence, in one batch; given several wordings of one
    question (``asked.asked_part``), each sentence keeps its best."""
    if not sentences:
        return np.zeros(0)
    asks = [questions] if isinstance(questions, str) else list(questions)
    vectors = unit_vectors(model, [*asks, *sentences], batch_size)
    return (vectors[len(asks) :] @ vectors[: len(asks)].T).max(axis=1).astype(np.float64)
