"""Learned ranker: a linear scorer over the candidate-page features of ``ranker_features``,
fitted with a pairwise logistic (RankNet) loss, saved as JSON (pure, numpy only).

Why linear and pairwise: the training signal is one relevant page per train question, and the
ranker is retrained per index version inside the build, so it must be deterministic (full-batch
from zero weights, no sampling), fast (seconds on ~2,700 questions) and explainable (one weight per named
feature). ``fit`` is a pure function of the feature matrices and labels; features are
standardized with the training means and scales stored beside the weights.

Pairs: for each question, every relevant candidate page against its ``negatives_per_question``
best-scored (by ``hybrid-page``) non-relevant pages, which are the near twins a user would get
instead; a question whose relevant page is not among the candidates teaches nothing and is
skipped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .ranker_features import FEATURE_NAMES, GROUPS, PageCandidates

FORMAT = "infra-rag-ranker/1"


@dataclass(frozen=True)
class FitSettings:
    l2: float = 1e-3
    steps: int = 400
    learning_rate: float = 0.05
    negatives_per_question: int = 100


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
        body = {"format": FORMAT, "feature_names": list(self.feature_names), "mean": list(self.mean),
                "scale": list(self.scale), "weights": list(self.weights)}
        return {**body, "hash": _hash(body), "meta": self.meta}

    @classmethod
    def from_dict(cls, data: dict) -> Ranker:
        body = {k: data[k] for k in ("format", "feature_names", "mean", "scale", "weights")}
        if body["format"] != FORMAT:
            raise ValueError(f"ranker format {body['format']!r}, expected {FORMAT!r}")
        if data.get("hash") != _hash(body):
            raise ValueError("ranker weights do not match their hash")
        return cls(tuple(body["feature_names"]), *(tuple(map(float, body[k])) for k in ("mean", "scale", "weights")),
                   meta=dict(data.get("meta") or {}))

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


def fit(groups: Sequence[tuple[np.ndarray, np.ndarray]], feature_names: Sequence[str] = FEATURE_NAMES,
        settings: FitSettings | None = None) -> Ranker:
    """Pairwise logistic regression, full-batch Adam from zero weights (deterministic).

    ``groups``: one (FEATURE_NAMES rows in ``hybrid-page`` order, 0/1 labels) per question."""
    settings = settings or FitSettings()
    columns = np.array([FEATURE_NAMES.index(n) for n in feature_names], dtype=int)
    stacked = np.concatenate([f[:, columns] for f, _ in groups])
    mean, scale = stacked.mean(axis=0), stacked.std(axis=0)
    scale[scale < 1e-9] = 1.0
    diffs, pair_weights = _pairs([(f[:, columns] / scale, y) for f, y in groups], settings.negatives_per_question)
    pair_weights /= pair_weights.sum()
    w = np.zeros(len(columns))
    m, v = np.zeros_like(w), np.zeros_like(w)
    for step in range(1, settings.steps + 1):
        margin = diffs @ w
        grad = -(diffs * (pair_weights / (1.0 + np.exp(np.clip(margin, -50, 50))))[:, None]).sum(axis=0)
        grad += settings.l2 * w
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w -= settings.learning_rate * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    loss = float((pair_weights * np.logaddexp(0.0, -(diffs @ w))).sum())
    return Ranker(tuple(feature_names), tuple(map(float, mean)), tuple(map(float, scale)), tuple(map(float, w)),
                  meta={"pairs": int(len(diffs)), "questions": len(groups), "loss": round(loss, 6),
                        "settings": settings.__dict__})


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
RANKER_FILE = "ranker.json"  # in the version's serving snapshot directory


def version_ranker(snapshot_dir: Path) -> Ranker | None:
    """The ranker fitted for this version (None for versions built before page_ranker existed)."""
    path = Path(snapshot_dir) / RANKER_FILE
    return Ranker.load(path) if path.is_file() else None


def load_ranker(path: str | Path) -> Ranker:
    """A ranker JSON by path; a relative path names a file shipped in ``rankers/``."""
    path = Path(path)
    return Ranker.load(path if path.is_absolute() else RANKERS_DIR / path)
