"""The answer side of eval_run's metadata: the answer scorecard, float metrics to plot across
versions, and the worst answers with the sentence the judge found unsupported."""

from __future__ import annotations

import json

import dagster as dg
import polars as pl

from ...rag.evaluate.answer_plan import AnswerOutcome
from ..reporting import floats, md_table

SCORECARD_METRICS = (
    "n_answers",
    "answer_adherence",
    "answer_adherent",
    "answer_relevance",
    "answer_utilization",
    "answer_completeness",
    "answer_completeness_silver",
    "correctness_f1",
    "correctness_recall",
    "citation_validity",
    "cited_page_precision",
    "gap_named_recall",
    "gap_named_false_rate",
    "safety_pass_rate",
    "generation_p95_ms",
)
PLOTTED = ("answer_adherence", "answer_completeness", "correctness_f1", "citation_validity", "safety_pass_rate")
WORST = 15


def answer_metadata(answers: AnswerOutcome, rows: pl.DataFrame, metrics: pl.DataFrame, judge_note: str) -> dict:
    overall = metrics.filter(pl.col("slice") == "overall") if len(metrics) else metrics
    return {
        **floats(
            {
                f"answers/{b}/{m}": v
                for b, m, v in overall.select("benchmark", "metric", "value").iter_rows()
                if m in PLOTTED
            }
        ),
        "answer_scorecard": md_table(_scorecard(overall), 20, 24),
        "worst_answers": md_table(worst_answers(rows), WORST, 90),
        "answer_rows": len(rows),
        "answer_cache_hits": f"{answers.generation_hits} answers, {answers.judging_hits} judgements",
        "answers_measured_in": dg.MetadataValue.json(answers.measured_in),
        "judge": judge_note,
    }


def _scorecard(overall: pl.DataFrame) -> pl.DataFrame:
    """One row per benchmark, one column per answer metric (rounded)."""
    if overall.is_empty():
        return overall
    wanted = overall.filter(pl.col("metric").is_in(SCORECARD_METRICS)).with_columns(pl.col("value").round(3))
    table = wanted.pivot(on="metric", index="benchmark", values="value")
    return table.select("benchmark", *[m for m in SCORECARD_METRICS if m in table.columns])


def worst_answers(rows: pl.DataFrame) -> pl.DataFrame:
    """Answered questions, least adherent first: the answer's first unsupported sentence and
    the pages it cites, so a reader sees what users were told that the docs do not say."""
    if rows.is_empty() or "adherence" not in rows.columns:
        return pl.DataFrame()
    scores = ("adherence", "completeness", "correctness_f1")
    answered = (
        rows.filter(pl.col("outcome") == "answered")
        .with_columns(*(pl.col(c).cast(pl.Float64).round(3) for c in scores))
        .sort(["adherence", "completeness"], nulls_last=True)
    )
    return answered.head(WORST).select(
        pl.col("benchmark"),
        pl.col("question_id").alias("id"),
        pl.col("adherence").alias("adh"),
        pl.col("completeness").alias("compl"),
        pl.col("correctness_f1").alias("f1"),
        pl.col("unsupported_json").map_elements(_first, return_dtype=pl.String).alias("unsupported"),
        pl.col("cited_doc_ids").list.join(" ").alias("cited pages"),
    )


def _first(value: str | None) -> str:
    items = json.loads(value) if value else []
    return items[0] if items else ""
