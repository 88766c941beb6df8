"""One eval run of an index version, start to finish (what the ``eval_run`` asset calls): every
benchmark scored under every regime and answered, judged and scored, each or read back from an
identical earlier run; the rows and metrics written to the warehouse's partition of the version."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from ..judge.judge_backends import load_judge
from ..operate.home import DataHome
from .answers.answer_plan import AnswerOutcome, answer_or_reuse
from .eval_plan import EvalOutcome, EvalPlan, missing_indexes, score_or_reuse, shared_inputs
from .eval_tables import answer_frames, eval_frames

# Stages whose models answer and judge: retrieval scores do not depend on them (answers key on
# their identity instead), so a version whose judge is not built yet reuses identical retrieval rows.
ANSWERING_STAGES = ("support_judge", "answer_reader")
ProgressFor = Callable[[str, int], Callable[[int, int], None]]


class IndexesMissing(RuntimeError):
    """The version has no vectors or lexical index on disk yet."""


@dataclass
class EvalRunResult:
    engine: Any  # the QueryEngine that served the run (its floor and calibration are reported)
    retrieval: EvalOutcome
    answers: AnswerOutcome
    judge_note: str
    results: pl.DataFrame
    metrics: pl.DataFrame
    answer_rows: pl.DataFrame
    answer_metrics: pl.DataFrame


def evaluate_version(
    plan: EvalPlan,
    home: DataHome,
    version: str,
    run_id: str,
    upstream: Mapping[str, str],
    judge_backend: str,
    *,
    log: Callable[[str], None],
    progress: ProgressFor,
) -> EvalRunResult:
    """Score, answer and write one version's evaluation. ``upstream`` maps each upstream asset to
    its data version (the content address of reuse); ``progress(label, every)`` makes a
    ``(done, total)`` callback."""
    from ..search.engine import QueryEngine, one_torch_thread

    missing = missing_indexes(home, version)
    if missing:  # one line instead of the search library's "table ... was not found" trace
        raise IndexesMissing(
            f"index version {version} has no {' or '.join(missing)} yet: build it first "
            f"(`infra-rag build --index-version {version} --through indexes`)"
        )
    warehouse, engine = home.warehouse(), QueryEngine(home, version)
    # Coverage by the built corpus (every page record), not by indexed chunks: a page that
    # parsed to no content is in the corpus, and a question about it is a scored miss.
    known = warehouse.doc_ids(version)
    retrieval_upstream = {k: v for k, v in upstream.items() if k not in ANSWERING_STAGES}
    inputs = shared_inputs(plan, engine, known, retrieval_upstream, warehouse.version_config(version))
    with one_torch_thread():  # per-question latency as served (see engine.single_thread_queries)
        outcome = score_or_reuse(
            plan, engine, known, inputs, cache_root=home.cache("eval_run").root, version=version, log=log,
            progress_for=lambda name: progress(f"{name}: question-regime pairs", 500),
        )  # fmt: skip
        judge, judge_note = load_judge(home, version, judge_backend)
        answers = answer_or_reuse(
            engine, home, version, known, inputs, judge, benchmarks=plan.answer_names(),
            serving_config=plan.serving_config, fault=plan.answer_fault, log=log,
            progress_for=lambda name: progress(f"{name}: questions", 200),
        )  # fmt: skip
    results, metrics = eval_frames(outcome.runs, version, run_id)
    answer_rows, answer_metrics = answer_frames(answers.runs, version, run_id)
    warehouse.replace_partition("eval_results", version, results)
    warehouse.replace_partition("answer_results", version, answer_rows)
    warehouse.replace_partition("eval_metrics", version, pl.concat([metrics, answer_metrics], how="vertical_relaxed"))
    return EvalRunResult(engine, outcome, answers, judge_note, results, metrics, answer_rows, answer_metrics)
