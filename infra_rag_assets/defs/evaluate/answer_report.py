"""The answer side of eval_run's metadata: the answer scorecard, float metrics to plot across
versions, the worst answers with the sentence the judge found unsupported, and the path from a
question to the bytes behind it (per-question table → cited pages → their sha256 and the
``source_pages`` materialization of this version)."""

from __future__ import annotations

import json

import dagster as dg
import polars as pl

from ...rag.evaluate.answers.answer_lineage import cited_pages, question_rows
from ...rag.evaluate.answers.answer_plan import AnswerOutcome
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
QUESTIONS_SHOWN = 50  # the per-question table (worst first); every row is in answer_results
PAGES_SHOWN = 60


def answer_metadata(answers: AnswerOutcome, rows: pl.DataFrame, metrics: pl.DataFrame, judge_note: str) -> dict:
    overall = metrics.filter(pl.col("slice") == "overall") if len(metrics) else metrics
    return {
        **floats(
            {f"{b}/{m}": v for b, m, v in overall.select("benchmark", "metric", "value").iter_rows() if m in PLOTTED}
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


def lineage_tables(answers: pl.DataFrame, results: pl.DataFrame, pages: pl.DataFrame, pages_link: str) -> dict:
    """``questions`` (worst first: rank, TRACe, cited pages with their sha256) and
    ``cited_pages`` (full sha256, upstream URL), each page linked to ``pages_link``: the
    source_pages materialization these bytes were read in."""
    sha = dict(zip(pages["doc_id"], pages["bytes_hash"])) if not pages.is_empty() else {}

    def page(doc_id: str) -> str:
        return f"[{doc_id}]({pages_link})" if pages_link else doc_id

    def page_cell(doc_ids) -> str:
        return " ".join(f"{page(d)} `{(sha.get(d) or '?')[:8]}`" for d in (doc_ids if doc_ids is not None else []))

    rows = question_rows(answers, results)
    if rows.is_empty():
        return {"questions": dg.MetadataValue.md("_no answers_")}
    shown = rows.head(QUESTIONS_SHOWN).with_columns(
        pl.col("question").str.slice(0, 70),
        pl.col("cited_doc_ids").map_elements(page_cell, return_dtype=pl.String).alias("cited pages (sha256)"),
    )
    shown = shown.rename({"adherence": "adh", "relevance": "rel", "utilization": "util", "completeness": "compl",
                          "correctness_f1": "f1"}).drop("cited_doc_ids", "question_id")  # fmt: skip
    cited = cited_pages(answers, pages).head(PAGES_SHOWN)
    if not cited.is_empty():
        cited = cited.with_columns(pl.col("doc_id").map_elements(page, return_dtype=pl.String))
    return {
        "questions": md_table(shown, QUESTIONS_SHOWN, 2000),
        "cited_pages": md_table(cited, PAGES_SHOWN, 400),
    }
