"""Train and calibrate the reader: a recipe, a content key, one training run, a dev report.

Training is the bi-encoder loop of ``adapt/finetune.py`` (MultipleNegativesRankingLoss) on
(question, answer sentence, hard negative of the same page). The dev split (pages never trained
on) reads each dev question's whole page, as the reader reads its passages: the top sentence's
token F1 against the reference is reported beside the extractive answerer's on the same page,
and a Platt scaler fitted there turns the top score into P(the sentence is a right answer);
the abstention floor applies to that probability.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..index.config import stable_hash
from ..probabilities import auroc, expected_calibration_error, fit_platt
from ..training import TrainProgress
from .reader_data import DATA_VERSION, ReaderQuestion, split_by_page, token_f1
from .reader_model import MODEL_DIR, lead_over_rest, load_selector, unit_vectors

READER_JSON = "reader.json"
SIGNALS = ("score", "lead")  # what the calibrator reads: the top sentence's score and lead
# Calibrated P(the passages hold the answer) under which the reader abstains. The calibrator is
# fitted on balanced dev pairs (own page, hardest look-alike page), while retrieval has already
# refused most questions the docs cannot answer; 0.3 came from a sweep on the k8s eval split
# (0.5 answered 392 of 557 covered questions at F1 0.351; 0.3: 486 at 0.409, with near-miss
# refusals 21 -> 20 of 24; 0.2 answered 10 of 24 near-miss). An answer-time setting: not in the key.
DEFAULT_FLOOR = 0.3
UNCALIBRATED = {"inputs": list(SIGNALS), "weights": [1.0, 1.0], "bias": 0.0}


@dataclass(frozen=True)
class ReaderRecipe:
    # s1, chosen on a prototype (docs/answers.md): one pass at 5e-5 took the top sentence's F1 on
    # the k8s eval split (BM25 top-6 passages) from 0.318 untuned to 0.428; ~4 min on 2 cores
    epochs: int = 1
    batch_size: int = 32
    lr: float = 5e-5
    max_seq_length: int = 128  # tokens per question or sentence while training
    max_examples: int = 0  # train + dev questions, sampled; 0 = all
    dev_share: float = 0.15
    good_f1: float = 0.5  # a dev sentence this close to the reference counts as a right answer
    seed: int = 13

    def to_dict(self) -> dict:
        return {**asdict(self), "data_version": DATA_VERSION}


def reader_key(recipe: ReaderRecipe, **lineage: str) -> str:
    """Directory name of the reader these inputs train: every input by content."""
    return stable_hash({"recipe": recipe.to_dict(), **lineage}, 16)


def triples(questions: Sequence[ReaderQuestion], seed: int) -> list:
    """(question, answer sentence, negative): the page's hard negative, else another page's sentence."""
    from ..adapt.finetune import TrainExample

    rng = random.Random(seed)
    out = []
    for i, q in enumerate(questions):
        if q.negative >= 0:
            negative = q.sentences[q.negative]
        else:
            other = questions[rng.randrange(len(questions))]
            negative = other.sentences[other.negative if other.negative >= 0 else other.positive]
        if negative == q.sentences[q.positive]:
            continue
        out.append(TrainExample(f"q{i}", q.question, q.doc_id, q.sentences[q.positive], negative, "", ""))
    return out


def dev_report(model: Any, dev: Sequence[ReaderQuestion], recipe: ReaderRecipe) -> tuple[dict, dict]:
    """On held-out pages: the top sentence's F1 over each question's page, the extractive
    answerer's on the same page, and the abstention calibrator: a Platt scaler on (top score, its
    lead) that tells the question's own page from the other dev page that looks most like an
    answer to it (what retrieval brings when the docs lack the answer), one of each per question."""
    from .extractive import answer_extractive
    from .records import PlainPassage

    features, answerable, f1s, quoted = [], [], [], []
    pages = {q.doc_id: q.sentences for q in dev}
    page_vectors = {doc: unit_vectors(model, sentences) for doc, sentences in pages.items()}
    for q, question in zip(dev, unit_vectors(model, [q.question for q in dev])):
        found = {doc: vectors @ question for doc, vectors in page_vectors.items()}
        own = found[q.doc_id]
        best = int(np.argmax(own))
        f1s.append(token_f1(q.sentences[best], q.answer))
        reply = answer_extractive(q.question, [PlainPassage("dev", "\n\n".join(q.sentences), q.doc_id)])
        quoted.append(token_f1(reply.text, q.answer) if reply.outcome == "answered" else 0.0)
        features.append(_signals(own))
        answerable.append(1)
        others = [doc for doc in found if doc != q.doc_id]
        if others:
            features.append(_signals(found[max(others, key=lambda doc: float(found[doc].max()))]))
            answerable.append(0)
    x = np.array(features)
    platt = fit_platt(x, answerable, list(SIGNALS)) if 0 < sum(answerable) < len(answerable) else None
    probs = platt.apply(x) if platt else np.zeros(len(answerable))
    mean = lambda xs: round(float(np.mean(xs)), 4) if len(xs) else None  # noqa: E731
    floor = DEFAULT_FLOOR
    report = {
        "dev_questions": len(dev),
        "floor": floor,
        "dev_sentence_f1": mean(f1s),
        "dev_extractive_f1": mean(quoted),
        "dev_right_share": mean([f >= recipe.good_f1 for f in f1s]),
        "dev_answerable_auroc": auroc(probs.tolist(), answerable) if platt else None,
        "dev_answered_share": mean([p >= floor for p, y in zip(probs, answerable) if y]),
        "dev_refused_share": mean([p < floor for p, y in zip(probs, answerable) if not y]),
        "dev_calibration_ece": round(expected_calibration_error(probs, answerable), 4),
    }
    return report, (platt.to_dict() if platt else UNCALIBRATED)


def _signals(scores: np.ndarray) -> list[float]:
    """What the calibrator reads of a page's sentence scores: the top score and its lead."""
    best = int(np.argmax(scores))
    return [float(scores[best]), float(lead_over_rest(scores)[best])]


def train_reader(base: Path, questions: Sequence[ReaderQuestion], target: Path, recipe: ReaderRecipe, *,
                 device: Any = "cpu", progress: TrainProgress | None = None,
                 extra: dict | None = None) -> dict:  # fmt: skip
    """Fine-tune, report on dev pages, save under ``target`` (written whole, then renamed)."""
    from ..adapt.finetune import train_bi_encoder

    pool = list(questions)
    if recipe.max_examples and len(pool) > recipe.max_examples:
        pool = random.Random(recipe.seed).sample(pool, recipe.max_examples)
    train, dev = split_by_page(pool, recipe.dev_share, recipe.seed)
    made = triples(train, recipe.seed)
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    trained = train_bi_encoder(base, made, tmp, epochs=recipe.epochs, batch_size=recipe.batch_size,
                               max_seq_length=recipe.max_seq_length, lr=recipe.lr, seed=recipe.seed,
                               progress=progress, device=str(device))  # fmt: skip
    started = time.perf_counter()
    report, platt = dev_report(load_selector(tmp / MODEL_DIR, device), dev, recipe) if dev else ({}, {})
    report["seconds_dev"] = round(time.perf_counter() - started, 1)
    training = {k: trained.get(k) for k in ("seconds_training", "steps", "torch_threads", "loss_first", "loss_last_20")}
    record = {"recipe": recipe.to_dict(), "training": training, "dev": report,
              "calibration": platt or UNCALIBRATED,
              "train_examples": len(made), "device": str(device),
              "trained_weights_hash": trained["trained_weights_hash"], **(extra or {})}  # fmt: skip
    (tmp / READER_JSON).write_text(json.dumps(record, indent=2, sort_keys=True))
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    return record
