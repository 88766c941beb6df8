"""Learned ranker: a linear scorer over the candidate-page features of ``features``,
fitted with a listwise softmax loss (or the pairwise RankNet loss it replaced), saved as JSON
(pure, numpy only).

Why linear: the training signal is one relevant page per train question, and the ranker is
retrained per index version inside the build, so it must be deterministic (full-batch from zero
weights, no sampling), fast (seconds on ~2,700 questions) and explainable (one weight per named
feature). ``fit`` is a pure function of the feature matrices and labels; features are
standardized with the training means and scales stored beside the weights.

Losses (``FitSettings.loss``):

* ``listwise`` (default): per question, the softmax cross-entropy of its relevant pages among
  all its candidate pages (ListNet with one relevant page). It puts the weight where MRR is
  decided, on beating the best-scored wrong pages: 5-fold cross-validation on the k8s train
  split, three index versions, +0.003 MRR@10 and +0.007 hit@1 over pairwise (docs/tuning-log.md).
* ``pairwise``: every relevant candidate page against its ``negatives_per_question`` best-scored
  (by ``hybrid-page``) non-relevant pages, each pair weighted equally within its question.

A question whose relevant page is not among the candidates teaches nothing and is skipped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...operate.home import RANKER_FILE
from .features import FEATURE_NAMES, GROUPS, PageCandidates

FORMAT = "infra-rag-ranker/1"
LOSSES = ("listwise", "pairwise")


@dataclass(frozen=True)
class FitSettings:
    l2: float = 1e-3
    steps: int = 400
    learning_rate: float = 0.05
    negatives_per_question: int = 100  # pairwise only
    loss: str = "listwise"  # or "pairwise"

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"unknown ranker loss {self.loss!r} (one of {', '.join(LOSSES)})")


@dataclass(frozen=True)
class Ranker:
    """``score = ((x - mean) / scale) . weights`` over ``feature_names`` (a subset of FEATURE_NAMES)."""

    feature_names: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    meta: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        unknown = [n for n in self.feature_names if n not in FEATURE_NAMES]
        sizes = {len(self.feature_names), len(self.mean), len(self.scale), len(self.weights)}
        if unknown or len(sizes) != 1:
            raise ValueError(f"invalid ranker: unknown features {unknown}, sizes {sorted(sizes)}")

    @property
    def needs_page_vectors(self) -> bool:
        """Fitted with the centroid features: without the version's page vectors it cannot rank."""
        return any(name in GROUPS["centroid"] for name in self.feature_names)

    @property
    def columns(self) -> np.ndarray:
        return np.array([FEATURE_NAMES.index(n) for n in self.feature_names], dtype=int)

    def score(self, features: np.ndarray) -> np.ndarray:
        """Scores of full FEATURE_NAMES rows (the ranker picks its own columns)."""
        x = (features[:, self.columns] - np.asarray(self.mean)) / np.asarray(self.scale)
        return x @ np.asarray(self.weights)

    def order(self, features: np.ndarray) -> list[int]:
        """Row indices best first; ties keep the input (``hybrid-page``) order."""
        scores = self.score(features)
        return sorted(range(len(scores)), key=lambda i: (-scores[i], i))

    def to_dict(self) -> dict:
        body = {
            "format": FORMAT,
            "feature_names": list(self.feature_names),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weights": list(self.weights),
        }
        return {**body, "hash": _hash(body), "meta": self.meta}

    @classmethod
    def from_dict(cls, data: dict) -> Ranker:
        body = {k: data[k] for k in ("format", "feature_names", "mean", "scale", "weights")}
        if body["format"] != FORMAT:
            raise ValueError(f"ranker format {body['format']!r}, expected {FORMAT!r}")
        if data.get("hash") != _hash(body):
            raise ValueError("ranker weights do not match their hash")
        mean, scale, weights = (tuple(map(float, body[k])) for k in ("mean", "scale", "weights"))
        return cls(tuple(body["feature_names"]), mean, scale, weights, meta=dict(data.get("meta") or {}))

    @property
    def hash(self) -> str:
        return self.to_dict()["hash"]

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Ranker:
        return cls.from_dict(json.loads(Path(path).read_text()))


def _hash(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def _pairs(groups: Sequence[tuple[np.ndarray, np.ndarray]], per_question: int) -> tuple[np.ndarray, np.ndarray]:
    """Differences (relevant row - non-relevant row) and each pair's weight (1 / pairs of its question)."""
    diffs, weights = [], []
    for features, labels in groups:
        pos, neg = np.flatnonzero(labels > 0), np.flatnonzero(labels <= 0)[:per_question]
        if not len(pos) or not len(neg):
            continue
        d = (features[pos][:, None, :] - features[neg][None, :, :]).reshape(-1, features.shape[1])
        diffs.append(d)
        weights.append(np.full(len(d), 1.0 / len(d)))
    if not diffs:
        raise ValueError("no question has both a relevant and a non-relevant candidate")
    return np.concatenate(diffs), np.concatenate(weights)


def fit(
    groups: Sequence[tuple[np.ndarray, np.ndarray]],
    feature_names: Sequence[str] = FEATURE_NAMES,
    settings: FitSettings | None = None,
) -> Ranker:
    """Full-batch Adam from zero weights (deterministic) on ``settings.loss``.

    ``groups``: one (FEATURE_NAMES rows in ``hybrid-page`` order, 0/1 labels) per question."""
    settings = settings or FitSettings()
    columns = np.array([FEATURE_NAMES.index(n) for n in feature_names], dtype=int)
    stacked = np.concatenate([f[:, columns] for f, _ in groups])
    mean, scale = stacked.mean(axis=0), stacked.std(axis=0)
    scale[scale < 1e-9] = 1.0
    scaled = [((f[:, columns] - mean) / scale, y) for f, y in groups]
    objective = _Listwise(scaled) if settings.loss == "listwise" else _Pairwise(scaled, settings.negatives_per_question)
    w = np.zeros(len(columns))
    m, v = np.zeros_like(w), np.zeros_like(w)
    for step in range(1, settings.steps + 1):
        grad = objective.gradient(w) + settings.l2 * w
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w -= settings.learning_rate * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return Ranker(
        tuple(feature_names),
        tuple(map(float, mean)),
        tuple(map(float, scale)),
        tuple(map(float, w)),
        meta={
            **objective.meta,
            "questions": len(groups),
            "loss": round(objective.loss(w), 6),
            "settings": settings.__dict__,
        },
    )


class _Pairwise:
    """RankNet: mean over questions of the logistic loss of (relevant - non-relevant) pairs."""

    def __init__(self, groups: Sequence[tuple[np.ndarray, np.ndarray]], per_question: int) -> None:
        self.diffs, weights = _pairs(groups, per_question)
        self.weights = weights / weights.sum()
        self.meta = {"pairs": int(len(self.diffs))}

    def gradient(self, w: np.ndarray) -> np.ndarray:
        margin = self.diffs @ w
        return -(self.diffs * (self.weights / (1.0 + np.exp(np.clip(margin, -50, 50))))[:, None]).sum(axis=0)

    def loss(self, w: np.ndarray) -> float:
        return float((self.weights * np.logaddexp(0.0, -(self.diffs @ w))).sum())


class _Listwise:
    """Mean over questions of -log(softmax mass of the relevant candidates among all candidates)."""

    def __init__(self, groups: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
        usable = [(x, y) for x, y in groups if (y > 0).any() and (y <= 0).any()]
        if not usable:
            raise ValueError("no question has both a relevant and a non-relevant candidate")
        self.x = np.concatenate([x for x, _ in usable])
        self.relevant = np.concatenate([y for _, y in usable]) > 0
        sizes = np.array([len(y) for _, y in usable])
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self.question = np.repeat(np.arange(len(usable)), sizes)
        self.meta = {"candidates": int(len(self.x)), "questions_used": len(usable)}

    def _masses(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        s = self.x @ w
        top = np.maximum.reduceat(s, self.starts)
        e = np.exp(s - top[self.question])
        e_relevant = np.where(self.relevant, e, 0.0)
        return e, e_relevant, np.add.reduceat(e, self.starts), np.add.reduceat(e_relevant, self.starts)

    def gradient(self, w: np.ndarray) -> np.ndarray:
        e, e_relevant, total, relevant = self._masses(w)
        per_row = e / total[self.question] - e_relevant / relevant[self.question]
        return self.x.T @ per_row / len(self.starts)

    def loss(self, w: np.ndarray) -> float:
        _, _, total, relevant = self._masses(w)
        return float(np.mean(np.log(total) - np.log(relevant)))


def rank_chunks(candidates: PageCandidates, ranker: Ranker, max_per_page: int = 2) -> list[tuple[str, float]]:
    """Chunks in learned page order: each page's best ``max_per_page`` chunks (its own order,
    ``hybrid-page``'s), then every other chunk in the same page order. Each chunk carries its
    page's learned score. 0 = all of a page's chunks before the next page."""
    if not candidates.pages:
        return []
    scores = ranker.score(candidates.features)
    head, tail = [], []
    for i in ranker.order(candidates.features):
        page_chunks = candidates.chunks[candidates.pages[i]]
        cut = max_per_page or len(page_chunks)
        head += [(cid, float(scores[i])) for cid in page_chunks[:cut]]
        tail += [(cid, float(scores[i])) for cid in page_chunks[cut:]]
    return head + tail


RANKERS_DIR = Path(__file__).resolve().parent / "rankers"


def version_ranker(snapshot_dir: Path) -> Ranker | None:
    """The ranker fitted for this version (None for versions built before page_ranker existed)."""
    path = Path(snapshot_dir) / RANKER_FILE
    return Ranker.load(path) if path.is_file() else None


def fallback_reason(ranker: Ranker | None, page_vectors: object | None) -> str:
    """Why a learned config must serve hybrid-page's order instead of this ranker's ("" when
    the ranker can rank): there is none, or it was fitted with centroid features and the
    version has no page vectors. The one test the engine and the retriever both make; what
    the fallback serves is ``retrieval_settings.without_ranker``."""
    if ranker is None:
        return "no ranker for this version"
    if ranker.needs_page_vectors and page_vectors is None:
        return "the ranker needs page vectors this version lacks"
    return ""


def load_ranker(path: str | Path) -> Ranker:
    """A ranker JSON by path; a relative path names a file shipped in ``rankers/``."""
    path = Path(path)
    return Ranker.load(path if path.is_absolute() else RANKERS_DIR / path)
