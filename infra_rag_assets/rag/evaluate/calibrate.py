"""Measure one index version's abstention calibration through its QueryEngine (no Dagster).

The best dense cosine of each off-topic question and of a fixed sample of answerable **train**
questions (whose page the version has), with the version's own model and chunks; the floor
rule itself is ``search.calibration.derive_floor``. ``calibrate_or_reuse`` copies the calibration
kept for identical inputs instead of asking the questions again (the key is the caller's).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..search.calibration import Calibration, calibrate, read_calibration, write_calibration
from ..search.retrieval_settings import RetrievalSettings
from .benchmarks import Benchmark, answerable_sample

DENSE_PROBE = RetrievalSettings(name="calibration-probe", mode="dense", floor=None, depth=1)
MIN_QUESTIONS = 20  # fewer than this and a 1st/99th percentile means nothing


def best_cosine(engine, question: str) -> float | None:
    """The version's best dense cosine for the question (None when the table is empty)."""
    ranking = engine.search(question, config=DENSE_PROBE, k=1).dense_ranking
    return float(ranking[0][1]) if ranking else None


def measure_calibration(
    engine,
    off_topic: Benchmark,
    answerable: Benchmark,
    *,
    sample: int = 500,
    seed: int = 0,
    min_questions: int = MIN_QUESTIONS,
) -> tuple[Calibration | None, str]:
    """(calibration, "") or (None, why not): too few questions leave the version uncalibrated."""
    known = {row["doc_id"] for row in engine.catalog.values()}
    chosen = answerable_sample(answerable.records, known, sample, seed)
    refused = [r for r in off_topic.records if r.should_abstain]
    if len(chosen) < min_questions or len(refused) < min_questions:
        return None, (
            f"too few questions to calibrate ({len(chosen)} answerable with a page in the version, "
            f"{len(refused)} off-topic; {min_questions} each needed): the fixed floor applies"
        )
    cosines = {
        name: [c for c in (best_cosine(engine, r.question) for r in records) if c is not None]
        for name, records in (("off_topic", refused), ("answerable", chosen))
    }
    sources: dict[str, dict[str, Any]] = {
        "off_topic": {"benchmark": off_topic.name, "benchmark_hash": off_topic.version_hash},
        "answerable": {
            "benchmark": answerable.name,
            "benchmark_hash": answerable.version_hash,
            "sample": sample,
            "seed": seed,
        },
    }
    # The weights that made the cosines: an adapted version's model, not the base its config names.
    return calibrate(
        engine.version,
        cosines["off_topic"],
        cosines["answerable"],
        model_hash=engine.embedder.weights_hash,
        sources=sources,
    ), ""


def calibrate_or_reuse(
    engine,
    off_topic: Benchmark,
    answerable: Benchmark,
    kept: Path | None,
    *,
    sample: int,
    seed: int,
    min_questions: int = MIN_QUESTIONS,
) -> tuple[Calibration | None, str, Calibration | None]:
    """(calibration of ``engine.version`` or None, why not, the kept calibration it copies or None).

    ``kept`` is the content-addressed folder of this calibration's inputs (None: no reuse): its
    calibration is copied when it was measured with this version's model weights; else the
    questions are asked (one torch thread, as served) and the result is kept there."""
    from ..search.engine import one_torch_thread

    reused = _reusable(kept, engine.embedder.weights_hash) if kept else None
    if reused is not None:
        return replace(reused, version=engine.version), "", reused
    with one_torch_thread():  # as served: two threads per query were far slower on shared cores
        calibration, why_not = measure_calibration(
            engine, off_topic, answerable, sample=sample, seed=seed, min_questions=min_questions
        )
    if calibration is not None and kept:
        kept.mkdir(parents=True, exist_ok=True)
        write_calibration(kept, calibration)
    return calibration, why_not, None


def _reusable(kept: Path, weights_hash: str) -> Calibration | None:
    """The kept calibration when it was measured with these model weights."""
    try:
        calibration = read_calibration(kept)
    except ValueError:
        return None  # damaged: measure again (and overwrite it)
    if calibration is None or calibration.model_hash != weights_hash:
        return None
    return calibration
