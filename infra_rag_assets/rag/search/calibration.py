"""Abstention calibration of one index version: the dense floor derived from its own cosines.

A fixed floor on the best dense cosine breaks when the model changes: a better-trained encoder
moves every cosine (dense-mined negatives moved the base model's scale so far that a fixed 0.35
stopped abstaining). So each version records two distributions of the best dense cosine,
measured with its own model and chunks, and derives its floor from them:

* **off-topic** questions (``data/benchmarks/off_topic.jsonl``: cooking, sports, history, ...),
  which must be refused;
* **answerable** questions from the benchmark's **train** split (a fixed sample whose page is
  in the version), which must not be. The eval split stays clean for reporting.

Rule (``derive_floor``): the off-topic 99th percentile, capped at the answerable 1st
percentile: ``min(off_p99, answerable_p01)``. The floor's job is refusing what is plainly
off-topic, no more: refusing an answerable question is the costlier error, and in-domain near
misses are answerability's job (their cosines overlap answerable ones). The midpoint of the two
percentiles was tried first and refused an answerable identifier question of the own set
(``--web.enable-lifecycle``, best cosine 0.376 under a midpoint floor of 0.3765) while
catching no near miss the lower floor misses (docs/tuning-log.md).

The result is ``<home>/serving/<version>/calibration.json``, beside the serving snapshot the
query path reads (never the warehouse). A version without one uses ``DEFAULT_FLOOR``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..common import percentile
from ..operate.files import write_json_atomic
from ..operate.home import CALIBRATION_FILE
from .answerability import DEFAULT_RULE, AnswerabilityRule

QUANTILES = (0, 1, 5, 10, 25, 50, 75, 90, 95, 99, 100)
OFF_TOPIC_Q, ANSWERABLE_Q = 99, 1
FORMAT = 1


@dataclass(frozen=True)
class FloorDerivation:
    floor: float
    off_topic_q99: float
    answerable_q01: float
    separated: bool  # off-topic q99 < answerable q01 (else the floor gives way to the answerable)
    rule: str


def quantiles(values: Sequence[float], qs: Sequence[int] = QUANTILES) -> dict[str, float]:
    """``{"p50": ...}`` with linear interpolation (numpy's default), rounded to 4 places."""
    if not values:
        raise ValueError("no values to take quantiles of")
    return {f"p{q:02d}": round(_percentile(values, q), 4) for q in qs}


def derive_floor(off_topic: Sequence[float], answerable: Sequence[float]) -> FloorDerivation:
    """The floor between off-topic and answerable best cosines (see the module docstring)."""
    if not off_topic or not answerable:
        raise ValueError("derive_floor needs off-topic and answerable cosines")
    high_off, low_ans = _percentile(off_topic, OFF_TOPIC_Q), _percentile(answerable, ANSWERABLE_Q)
    separated = high_off < low_ans
    floor = min(high_off, low_ans)
    rule = "off-topic p99" if separated else "answerable p01 (off-topic p99 overlaps it)"
    return FloorDerivation(round(floor, 4), round(high_off, 4), round(low_ans, 4), separated, rule)


def _percentile(values: Sequence[float], q: float) -> float:
    """``percentile`` of a sample the caller has checked is not empty (None only means empty)."""
    value = percentile(values, q)
    if value is None:
        raise ValueError("no values to take a percentile of")
    return value


@dataclass(frozen=True)
class Calibration:
    version: str
    floor: float
    derivation: dict[str, Any]
    off_topic: dict[str, Any]  # n, benchmark hash, quantiles
    answerable: dict[str, Any]
    model_hash: str = ""
    answerability: dict[str, Any] = field(default_factory=DEFAULT_RULE.to_dict)
    created_at: str = ""
    format: int = FORMAT

    @property
    def rule(self) -> AnswerabilityRule:
        return AnswerabilityRule.from_dict(self.answerability)


def calibrate(
    version: str,
    off_topic: Sequence[float],
    answerable: Sequence[float],
    *,
    model_hash: str = "",
    sources: dict[str, dict] | None = None,
    rule: AnswerabilityRule = DEFAULT_RULE,
) -> Calibration:
    """A version's calibration from its two cosine samples; ``sources`` names where each came
    from (e.g. ``{"off_topic": {"benchmark": ..., "hash": ...}, "answerable": {...}}``)."""
    sources = sources or {}
    derived = derive_floor(off_topic, answerable)
    return Calibration(
        version=version,
        floor=derived.floor,
        derivation=asdict(derived),
        model_hash=model_hash,
        off_topic={**sources.get("off_topic", {}), "n": len(off_topic), "quantiles": quantiles(off_topic)},
        answerable={**sources.get("answerable", {}), "n": len(answerable), "quantiles": quantiles(answerable)},
        answerability=rule.to_dict(),
        created_at=datetime.now(UTC).isoformat(),
    )


def calibration_path(snapshot_dir: Path) -> Path:
    return Path(snapshot_dir) / CALIBRATION_FILE


def write_calibration(snapshot_dir: Path, calibration: Calibration) -> Path:
    """Atomically (re)place the version's calibration.json inside its serving snapshot."""
    path = calibration_path(snapshot_dir)
    if not Path(snapshot_dir).is_dir():
        raise FileNotFoundError(f"no serving snapshot at {snapshot_dir}: build lexical_index first")
    write_json_atomic(path, asdict(calibration))
    return path


def read_calibration(snapshot_dir: Path) -> Calibration | None:
    """The version's calibration, or None when it has none (versions built before it existed).
    A damaged file is refused (ValueError), like a catalog that does not match its manifest."""
    path = calibration_path(snapshot_dir)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"{path} is unreadable ({type(exc).__name__}): re-materialize abstention_calibration"
        ) from None
    known = {k: v for k, v in raw.items() if k in Calibration.__dataclass_fields__} if isinstance(raw, dict) else {}
    try:
        calibration = Calibration(**known)
    except TypeError:
        calibration = None
    if calibration is None or isinstance(calibration.floor, bool) or not isinstance(calibration.floor, (int, float)):
        raise ValueError(f"{path} has no numeric floor: re-materialize abstention_calibration")
    return calibration
