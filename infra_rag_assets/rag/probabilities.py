"""Raw model scores to calibrated probabilities, and how to tell that they are calibrated
(ground level: the support judge and the answer reader both fit and report them).

A cross-encoder logit ranks well but its sigmoid is not a probability: fine-tuning on a
balanced, hard-negative-heavy mix shifts and stretches it. Gates and TRACe multiply and
threshold these numbers, so each task gets a Platt scaler (a logistic regression on the logit,
optionally with a few lexical features) fitted on pairs from pages the model never trained on.
numpy only (Newton's method): the parameters live in ``judge.json`` and apply without sklearn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Platt:
    """p = sigmoid(x · weights + bias), for inputs x with one column per name in ``inputs``."""

    inputs: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float

    def apply(self, x: np.ndarray | Sequence) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64).reshape(-1, len(self.weights))
        return _sigmoid(x @ np.asarray(self.weights) + self.bias)

    def to_dict(self) -> dict:
        return {"inputs": list(self.inputs), "weights": list(self.weights), "bias": self.bias}

    @classmethod
    def from_dict(cls, raw: dict) -> Platt:
        return cls(tuple(raw["inputs"]), tuple(float(w) for w in raw["weights"]), float(raw["bias"]))


def fit_platt(x: np.ndarray | Sequence, labels: Sequence[int], inputs: Sequence[str], l2: float = 1e-2) -> Platt:
    """Logistic regression by Newton's method, with Platt's smoothed targets ((n+1)/(n+2) and
    1/(n+2)) so a separable calibration set does not yield infinite confidence; ``l2`` keeps the
    weights of rarely active features finite."""
    x = np.asarray(x, dtype=np.float64).reshape(len(labels), -1)
    y = np.asarray(labels, dtype=np.float64)
    pos, neg = y.sum(), len(y) - y.sum()
    if not pos or not neg:
        raise ValueError("calibration needs both labels")
    target = np.where(y > 0, (pos + 1) / (pos + 2), 1 / (neg + 2))
    design = np.hstack([x, np.ones((len(y), 1))])
    beta = np.zeros(design.shape[1])
    penalty = np.diag([l2] * x.shape[1] + [0.0])
    for _ in range(100):
        p = _sigmoid(design @ beta)
        grad = design.T @ (p - target) + penalty @ beta
        hess = (design * (p * (1 - p))[:, None]).T @ design + penalty + 1e-9 * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return Platt(tuple(inputs), tuple(float(b) for b in beta[:-1]), float(beta[-1]))


def auroc(scores: Sequence[float] | np.ndarray, labels: Sequence[int]) -> float | None:
    """Probability that a random positive outscores a random negative (ties count half)."""
    from scipy.stats import rankdata

    y = np.asarray(labels) > 0
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if not n_pos or not n_neg:
        return None
    ranks = rankdata(np.asarray(scores, dtype=np.float64))
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def auroc_interval(
    scores: Sequence[float] | np.ndarray,
    labels: Sequence[int],
    groups: Sequence[str] = (),
    draws: int = 1000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """A 95 % bootstrap interval of ``auroc``, resampling whole ``groups`` (sources: the
    sentences and answers of one source are not independent) or single rows without them.
    The split figures this is for rest on a few dozen negatives; the interval says how far."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels)
    g = np.asarray(list(groups) if len(groups) else range(len(s)))
    names, index = np.unique(g, return_inverse=True)
    members = [np.flatnonzero(index == k) for k in range(len(names))]
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(draws):
        rows = np.concatenate([members[k] for k in rng.integers(0, len(names), len(names))])
        if (value := auroc(s[rows], y[rows])) is not None:
            values.append(value)
    if len(values) < draws // 2:
        return None
    low, high = np.percentile(values, [2.5, 97.5])
    return round(float(low), 4), round(float(high), 4)


def _bins(probs: Sequence[float] | np.ndarray, labels: Sequence[int], bins: int) -> list[tuple[str, int, float, float]]:
    p, y = np.asarray(probs, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    which = np.minimum((p * bins).astype(int), bins - 1)
    return [
        (f"{b / bins:.1f}-{(b + 1) / bins:.1f}", int(m.sum()), float(p[m].mean()), float(y[m].mean()))
        for b in range(bins)
        if (m := which == b).any()
    ]


def reliability(probs: Sequence[float] | np.ndarray, labels: Sequence[int], bins: int = 10) -> list[dict]:
    """Equal-width bins of predicted probability: count, mean predicted, observed positive rate."""
    return [
        {"bin": name, "count": n, "mean_predicted": round(mean, 4), "observed_rate": round(rate, 4)}
        for name, n, mean, rate in _bins(probs, labels, bins)
    ]


def expected_calibration_error(probs: Sequence[float] | np.ndarray, labels: Sequence[int], bins: int = 10) -> float:
    """Count-weighted mean gap |mean predicted - observed rate| over the reliability bins."""
    table = _bins(probs, labels, bins)
    total = sum(n for _, n, _, _ in table)
    return sum(n * abs(mean - rate) for _, n, mean, rate in table) / total if total else 0.0


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))
