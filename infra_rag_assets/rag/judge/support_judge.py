"""The support judge: a MiniLM cross-encoder fine-tuned here, with calibrated probabilities.

Two questions, one set of weights: is a claim supported by a passage (``support``), and is a
context sentence relevant to a question (``relevance``). Pairs come from ``judge_pairs``; a
seeded share of their pages is kept out of training to fit one Platt scaler per task
(``calibration``), so what the judge returns can be read, multiplied and thresholded as
probabilities. Support's scaler also sees cheap lexical checks of the claim against the passage
(numbers, identifiers, negation: ``judge_pairs.lexical_features``) when the recipe says so.

Layout of a judge directory (staged beside it, then renamed into place, like
``adapt/finetune.train_bi_encoder``)::

    <dir>/model/       transformers model + tokenizer (weights_hash pins it)
    <dir>/judge.json   recipe, pair composition, calibrators, calibration-split metrics, hashes
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..index.config import stable_hash
from ..index.embedding import resolve_model_path, text_hash, weights_hash
from ..probabilities import Platt, auroc, expected_calibration_error, fit_platt, reliability
from ..training import quantized
from .judge_training import (
    PREFIX,
    TrainProgress,
    fit,
    load_cross_encoder,
    logits,
    model_inputs,
    save_cross_encoder,
    token_probabilities,
)
from .pairs.claim_edits import LEXICAL_RULES
from .pairs.judge_data import best_threshold, evidence, public_pairs, source_split
from .pairs.judge_pairs import (
    PAIRS_VERSION,
    RELEVANCE,
    SUPPORT,
    JudgePair,
    JudgePairs,
    build_judge_pairs,
    lexical_features,
)
from .pairs.product_pairs import POSITIVE_KINDS, product_pairs

JUDGE_JSON = "judge.json"
MODEL_SUBDIR = "model"
# The lexical checks support's calibrator reads beside the logit. "terms_absent" (claim terms the
# passages lack, source-pointing words left out) is the strongest single signal on real LLM
# answers (out of fold 0.770 -> 0.838); it costs reworded right answers some support, which the
# per-shape threshold below gives back (docs/answers.md, "Absent terms and a per-shape
# threshold"). Not "polarity_mismatch" (12-07): it catches negation edits, but clean real
# answers judged adherent fell with it.
FEATURES = ("numbers_absent", "identifiers_absent", "negation_mismatch", "terms_absent")
REAL_ANSWER_KINDS = ("ragtruth_",)  # pair kinds that are sentences of real LLM answers, human-labelled
# The support threshold passes at least this share of each DEV faithful answer shape (reference
# answers, lead-ins, quotes, two-passage answers, each on its own): the answer gates ask for 0.80
# adherent, so a judge that refused more of a right answerer's sentences, quoting or rewording,
# would fail releases that are right.
FAITHFUL_KEPT = 0.85


@dataclass(frozen=True)
class JudgeRecipe:
    """How a judge is trained. Defaults: the recipe eval/judge_dev_report.py measured
    (eval/results/answer_judge_real_answers.json): 191 s of training on 2 idle cores."""

    max_pairs: int = 600  # corpus sentence pairs (``judge_pairs``), relevance included
    product_rows: int = 400  # k8s train questions made into answer-shaped pairs (``product_pairs``)
    public_data: bool = True  # the labelled answers of ../shared/judge-data (``judge_data``)
    epochs: int = 1
    batch_size: int = 16
    train_pairs: int = 640  # a seeded sample of the TRAIN-source pairs is trained on (0: all)
    real_answers_in_full: bool = True  # and every TRAIN sentence of a real LLM answer (RAGTruth) on top
    train_seq_length: int = 160  # training pairs: claim + the evidence, cut to this many tokens
    max_seq_length: int = 512  # scoring: the claim + its cited passages' union (``evidence_chars``)
    evidence_chars: int = 1400  # a longer union keeps its sentences most like the claim
    train_evidence_chars: int = 560  # the same, for training pairs (train_seq_length tokens)
    layers: int = 3  # of MiniLM's 6 encoder layers (half the time; see eval/results/support_judge.json)
    quantize: bool = True  # score with int8 Linear layers; calibrated on exactly that model
    lr: float = 2e-4  # encoder
    head_lr: float = 5e-2  # the 6-weight alignment head
    seed: int = 0
    calibration_share: float = 0.2  # fallback only (a corpus too small for the source split)
    window_chars: int = 600  # support passages: the chunk around the sentence, at most this long
    relevance_share: float = 0.3
    contradict_share: float = 0.3  # changed claims shown with the original sentence kept
    token_loss: float = 0.5  # weight of the per-token unsupported loss (span labels) beside the pair loss
    lexical_features: bool = True  # support's calibrator sees FEATURES beside the logit
    freeze_embeddings: bool = True
    pairs_version: str = PAIRS_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge_key(
    recipe: JudgeRecipe, train_data_hash: str, chunks_hash: str, base_weights_hash: str, judge_data_hash: str = ""
) -> str:
    """Directory name of the judge these inputs train: a hash of every input, by content (the
    checks its support calibrator reads included: a judge calibrated on other ones is not reused)."""
    return stable_hash(
        {
            "chunks_hash": chunks_hash,
            "base_weights_hash": base_weights_hash,
            "train_data_hash": train_data_hash,
            "judge_data_hash": judge_data_hash,
            "recipe": recipe.to_dict(),
            "calibrator_features": [*FEATURES, f"rules {LEXICAL_RULES}"] if recipe.lexical_features else [],
        },
        12,
    )


def chunks_hash(chunks: Sequence[dict]) -> str:
    """The chunk texts pairs are made from, by id and content (order-free)."""
    return stable_hash(sorted((c["chunk_id"], c["doc_id"], text_hash(c["text"])) for c in chunks), 16)


def recipe_pairs(
    recipe: JudgeRecipe, chunks: Sequence[dict], train_rows: Sequence[dict], judge_data: str | Path | None = None
) -> JudgePairs:
    """Every pair a recipe asks for, all splits: corpus sentences (``judge_pairs``), answer-shaped
    product pairs (``product_pairs``) and the public labelled answers in ``judge_data``."""
    pairs = build_judge_pairs(
        chunks,
        train_rows,
        max_pairs=recipe.max_pairs,
        seed=recipe.seed,
        window_chars=recipe.window_chars,
        relevance_share=recipe.relevance_share,
        contradict_share=recipe.contradict_share,
    )
    made = (
        product_pairs(chunks, train_rows, max_rows=recipe.product_rows, seed=recipe.seed) if recipe.product_rows else []
    )
    public = public_pairs(judge_data) if recipe.public_data else []
    out = JudgePairs([*pairs, *made, *public])
    out.composition = {
        **pairs.composition,
        **{f"product_{k}": n for k, n in getattr(made, "composition", {}).items()},
        **{f"public_{k}": n for k, n in sorted(Counter(p.kind for p in public).items())},
        "all_pairs": len(out),
    }
    return out


def pairs_hash(pairs: Sequence[JudgePair]) -> str:
    """Identifies the exact pairs (order included) a judge was trained and calibrated on."""
    digest = hashlib.sha256()
    for p in pairs:
        digest.update(json.dumps(asdict(p), sort_keys=True).encode() + b"\n")
    return digest.hexdigest()


def train_support_judge(
    base_model_path: str | Path,
    pairs: Sequence[JudgePair],
    target_dir: str | Path,
    recipe: JudgeRecipe = JudgeRecipe(),
    progress: TrainProgress | None = None,
    extra: dict[str, Any] | None = None,
    device: str = "cpu",
) -> dict:
    """Train on the pairs of most pages, calibrate on the rest, write ``target_dir`` atomically.

    Trains on ``device`` (a GPU when given); calibrates on CPU (the int8 model when the recipe
    quantizes), so a judge scores the same wherever it was trained.
    ``extra`` is recorded in ``judge.json`` as is: pass ``{"key": judge_key(...)}`` (and the
    hashes it was made of); ``SupportJudge.identity`` starts with that key (else the folder name).
    """
    started = time.perf_counter()
    target = Path(target_dir)
    if target.exists():
        raise FileExistsError(f"{target} exists: judges are content-addressed and never overwritten")
    base_path = resolve_model_path(str(base_model_path))
    train, calibration, report = source_split(pairs, recipe.calibration_share, recipe.seed)
    train = [fitted(p, recipe.train_evidence_chars) for p in training_sample(train, recipe)]
    staging = target.parent / f".staging-{target.name}-{os.getpid()}-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)
    try:
        tokenizer, model = load_cross_encoder(base_path, layers=recipe.layers)
        stats = fit(model, tokenizer, train, recipe.to_dict(), progress, device)
        calibrating = time.perf_counter()
        model.to(torch.device("cpu"))
        scorer = scoring_model(model, recipe.quantize)
        calibrators, metrics, thresholds = calibrate(scorer, tokenizer, calibration, recipe)
        save_cross_encoder(model, tokenizer, staging / MODEL_SUBDIR)
        record = {
            **(extra or {}),
            "recipe": recipe.to_dict(),
            "composition": dict(getattr(pairs, "composition", {})),
            "pairs": len(pairs),
            "pairs_hash": pairs_hash(pairs),
            "train_pairs": len(train),
            "calibration_pairs": len(calibration),
            "report_pairs": len(report),  # 0: a small corpus, calibrated on held-out pairs
            "calibrators": {task: c.to_dict() for task, c in calibrators.items()},
            "thresholds": thresholds,
            "calibration_metrics": metrics,
            "base_model_path": str(base_path),
            "base_weights_hash": weights_hash(base_path),
            "quantized": scorer is not model,
            "trained_weights_hash": weights_hash(staging / MODEL_SUBDIR),
            **stats,
            "seconds_calibration": round(time.perf_counter() - calibrating, 1),
            "seconds_total": round(time.perf_counter() - started, 1),
        }
        (staging / JUDGE_JSON).write_text(json.dumps(record, indent=2, sort_keys=True))
        record = _publish(staging, target, record)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {**record, "path": str(target)}


def training_sample(train: Sequence[JudgePair], recipe: JudgeRecipe) -> list[JudgePair]:
    """The TRAIN pairs trained on: a seeded sample of ``train_pairs`` (0: all), and beside it
    every sentence of a real LLM answer when ``real_answers_in_full`` (they are few, and the
    sample would keep a few dozen of their unsupported sentences: RAGTruth QA DEV AUROC 0.73
    with the sample alone, 0.82 with all of them; docs/answers.md)."""
    if not recipe.train_pairs or len(train) <= recipe.train_pairs:
        return list(train)
    real: list[JudgePair] = []
    rest: list[JudgePair] = []
    for p in train:
        (real if recipe.real_answers_in_full and p.kind.startswith(REAL_ANSWER_KINDS) else rest).append(p)
    return real + random.Random(recipe.seed).sample(rest, min(len(rest), recipe.train_pairs))


def _publish(staging: Path, target: Path, record: dict) -> dict:
    """Rename into place; when a concurrent trainer of the same key won, keep its judge.
    (``finetune._publish`` is the same move but looks for its own ``training.json``.)"""
    try:
        os.rename(staging, target)
        return record
    except OSError:
        if not (target / JUDGE_JSON).is_file():
            raise
        return json.loads((target / JUDGE_JSON).read_text())


def scoring_model(model: Any, quantize: bool) -> Any:
    """The model that scores: the int8 copy when asked for and available, else ``model``."""
    return (quantized(model) if quantize else None) or model


def calibrator_inputs(
    task: str, raw: np.ndarray, firsts: Sequence[str], seconds: Sequence[str], lexical: bool | Sequence[str]
):
    """(matrix, column names): the logit, plus for support the lexical features named by
    ``lexical`` (True: ``FEATURES``; a calibrator's own ``inputs[1:]`` when loaded)."""
    names = ("logit", *(FEATURES if lexical is True else lexical or ()))
    if task != SUPPORT or len(names) == 1:
        return np.asarray(raw, dtype=np.float64)[:, None], ("logit",)
    feats = np.array([lexical_features(f, s, names[1:]) for f, s in zip(firsts, seconds)], dtype=np.float64)
    return np.hstack([np.asarray(raw, dtype=np.float64)[:, None], feats.reshape(len(raw), -1)]), names


def fitted(pair: JudgePair, chars: int) -> JudgePair:
    """A support pair with its passages' union cut to ``chars`` (``judge_data.evidence``)."""
    if pair.task != SUPPORT or len(pair.second) <= chars:
        return pair
    return dataclasses.replace(pair, second=evidence(pair.first, pair.second.split("\n\n"), chars))


def calibrate(model: Any, tokenizer: Any, pairs: Sequence[JudgePair], recipe: JudgeRecipe):
    """One Platt scaler per task on the DEV sources, its metrics there (AUROC of the raw logit and
    of the probability, ECE, reliability: in-sample for the few scaler weights) and the threshold
    a probability must reach to count as supported / relevant (``best_threshold`` on DEV; for
    support, one that passes ``FAITHFUL_KEPT`` of each faithful answer shape)."""
    calibrators, metrics, thresholds = {}, {}, {}
    for task in (SUPPORT, RELEVANCE):
        chosen = [fitted(p, recipe.evidence_chars) for p in pairs if p.task == task]
        if len({p.label for p in chosen}) < 2:
            raise ValueError(f"calibration pages hold no {task} pairs of both labels")
        firsts, seconds = model_inputs(chosen)
        raw = logits(model, tokenizer, firsts, seconds, recipe.max_seq_length)
        calibrators[task], probs, thresholds[task] = fit_calibrator(task, raw, chosen, recipe.lexical_features)
        metrics[task] = {**score_report(raw, probs, [p.label for p in chosen]), "threshold": thresholds[task]}
    return calibrators, metrics, thresholds


def fit_calibrator(
    task: str, raw: np.ndarray | Sequence[float], chosen: Sequence[JudgePair], lexical: bool | Sequence[str]
) -> tuple[Platt, np.ndarray, float]:
    """(scaler, its probabilities, threshold) for one task's calibration pairs ``chosen`` (their
    passages already ``fitted``) and their raw logits ``raw``; ``lexical`` as in
    ``calibrator_inputs``."""
    labels = [p.label for p in chosen]
    _, seconds = model_inputs(chosen)
    x, names = calibrator_inputs(task, np.asarray(raw), [p.first for p in chosen], seconds, lexical)
    platt = fit_platt(x, labels, names)
    probs = platt.apply(x)
    keep = (POSITIVE_KINDS, FAITHFUL_KEPT) if task == SUPPORT else None
    return platt, probs, best_threshold(probs, labels, [p.kind for p in chosen], keep)


def score_report(raw: Sequence[float] | np.ndarray, probs: Sequence[float] | np.ndarray, labels: Sequence[int]) -> dict:
    """AUROC of the logit and of the calibrated probability, ECE, and the reliability table."""
    return {
        "pairs": len(labels),
        "positives": int(sum(labels)),
        "auroc_logit": _round(auroc(raw, labels)),
        "auroc": _round(auroc(probs, labels)),
        "ece": round(expected_calibration_error(probs, labels), 4),
        "reliability": reliability(probs, labels),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


class SupportJudge:
    """A trained judge, loaded for scoring: calibrated probabilities, batched, CPU, thread-safe."""

    def __init__(self, directory: Path, record: dict, tokenizer: Any, model: Any, device: str = "cpu") -> None:
        self.directory = directory
        self.record = record
        self.tokenizer = tokenizer
        where = torch.device(device)
        # int8 Linear layers run on CPU only: on a GPU the judge scores in fp32 (and says so)
        self.model = scoring_model(model, bool(record.get("quantized")) and where.type == "cpu").to(where)
        self.max_seq_length = int(record["recipe"]["max_seq_length"])
        self.evidence_chars = int(record["recipe"].get("evidence_chars", 0))
        # what a probability must reach to count: fitted on DEV sources (0.5 for older judges)
        self.thresholds = {SUPPORT: 0.5, RELEVANCE: 0.5, **record.get("thresholds", {})}
        self.threshold = float(self.thresholds[SUPPORT])
        self.calibrators = {task: Platt.from_dict(raw) for task, raw in record["calibrators"].items()}
        key = record.get("key") or directory.name
        # Cache keys of judgements; an fp32 fallback for an int8-calibrated judge scores a little
        # differently, so it says so.
        fallback = "+fp32" if record.get("quantized") and self.model is model else ""
        self.identity = f"{key}:{record['trained_weights_hash'][:12]}{fallback}"
        self._lock = threading.Lock()  # one fast tokenizer must not be used by two threads at once

    @classmethod
    def load(cls, target_dir: str | Path, device: str = "cpu") -> SupportJudge:
        directory = Path(target_dir)
        record = json.loads((directory / JUDGE_JSON).read_text())
        tokenizer, model = load_cross_encoder(directory / MODEL_SUBDIR)
        return cls(directory, record, tokenizer, model, device)

    def support(self, claims: Sequence[str], passages: Sequence[str]) -> list[float]:
        """P(claim is supported by passage) for each aligned pair."""
        return self._probabilities(SUPPORT, claims, passages)

    def unsupported_spans(self, claim: str, passage: str, at: float = 0.5) -> list[dict]:
        """Where ``claim`` is not supported by ``passage``: its words whose tokens the token head
        gives P(unsupported) >= ``at``, merged into spans ``{"start", "end", "text", "p"}``."""
        claim = " ".join(claim.split())
        if not claim:
            return []
        if self.evidence_chars:
            passage = evidence(claim, passage.split("\n\n"), self.evidence_chars)
        with self._lock:
            tokens = token_probabilities(self.model, self.tokenizer, claim, passage, self.max_seq_length)
        spans: list[dict] = []
        for s, e, p in tokens:
            if p < at:
                continue
            s, e = _word(claim, s, e)
            if spans and s <= spans[-1]["end"] + 1:
                spans[-1]["end"], spans[-1]["p"] = max(e, spans[-1]["end"]), max(p, spans[-1]["p"])
            else:
                spans.append({"start": s, "end": e, "p": p})
        return [{**sp, "text": claim[sp["start"] : sp["end"]], "p": round(sp["p"], 4)} for sp in spans]

    def relevance(self, questions: Sequence[str], sentences: Sequence[str]) -> list[float]:
        """P(context sentence is relevant to the question) for each aligned pair."""
        return self._probabilities(RELEVANCE, questions, sentences)

    def _probabilities(self, task: str, firsts: Sequence[str], seconds: Sequence[str]) -> list[float]:
        if len(firsts) != len(seconds):
            raise ValueError(f"{len(firsts)} first segments but {len(seconds)} second segments")
        if not firsts:
            return []
        firsts = [" ".join(f.split()) for f in firsts]
        if task == SUPPORT and self.evidence_chars:
            seconds = [evidence(f, s.split("\n\n"), self.evidence_chars) for f, s in zip(firsts, seconds)]
        # An eval run asks the same pair many times (one quoted sentence for several questions,
        # one context sentence under several answers): each distinct pair is scored once.
        pairs = list(zip(firsts, seconds))
        distinct = list(dict.fromkeys(pairs))
        scored = self._scored(task, [f for f, _ in distinct], [s for _, s in distinct])
        at = {pair: i for i, pair in enumerate(distinct)}
        return [scored[at[pair]] for pair in pairs]

    def _scored(self, task: str, firsts: list[str], seconds: list[str]) -> list[float]:
        with self._lock:
            raw = logits(self.model, self.tokenizer, [PREFIX[task] + f for f in firsts], seconds, self.max_seq_length)
        x, _ = calibrator_inputs(task, raw, firsts, seconds, self.calibrators[task].inputs[1:])
        return [float(p) for p in self.calibrators[task].apply(x)]


def _word(text: str, start: int, end: int) -> tuple[int, int]:
    """A token's span widened to the whole word around it."""
    while start > 0 and text[start - 1].isalnum():
        start -= 1
    while end < len(text) and text[end].isalnum():
        end += 1
    return start, end
