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

# Several narrow tables instead of one wide one (the UI scrolls a wide table and loses the row
# labels): each starts with the benchmark, the most telling columns first. Gate metrics are in
# the first (answer_adherent is what answer-adherence-floor measures; answer_adherence the mean).
SCORECARD_TABLES = {
    "answer_scorecard": (
        "n_answers", "answer_adherent", "answer_adherence", "correctness_f1", "citation_validity", "safety_pass_rate",
    ),
    "answer_scorecard_trace": ("answer_relevance", "answer_utilization", "answer_completeness",
                               "answer_completeness_silver", "correctness_recall"),
    "answer_scorecard_citations": ("cited_page_precision", "gap_named_recall", "gap_named_false_rate",
                                   "generation_p95_ms"),
}  # fmt: skip
SCORECARD_METRICS = tuple(m for metrics in SCORECARD_TABLES.values() for m in metrics)
PLOTTED = ("answer_adherence", "answer_completeness", "correctness_f1", "citation_validity", "safety_pass_rate")
WORST = 15
QUESTIONS_SHOWN = 50  # the per-question table (worst first); every row is in answer_results
PAGES_SHOWN = 60  # beyond every page the listed questions cite
QUESTION_CHARS = 90


def answer_metadata(answers: AnswerOutcome, rows: pl.DataFrame, metrics: pl.DataFrame, judge_note: str) -> dict:
    overall = metrics.filter(pl.col("slice") == "overall") if len(metrics) else metrics
    return {
        **floats(
            {f"{b}/{m}": v for b, m, v in overall.select("benchmark", "metric", "value").iter_rows() if m in PLOTTED}
        ),
        **{name: md_table(_scorecard(overall, metrics), 20, 24) for name, metrics in SCORECARD_TABLES.items()},
        "worst_answers": md_table(worst_answers(rows), WORST, 120),
        "answer_rows": len(rows),
        "answer_cache_hits": (
            f"{answers.generation_hits} of {len(rows)} answers and {answers.judging_hits} judgements were found in "
            "the content cache (identical question, passages, model and judge) instead of generated again; "
            "the scores below were computed from them where answers_measured_in says 'this run'"
        ),
        "answers_measured_in": dg.MetadataValue.json(answers.measured_in),
        "judge": judge_note,
    }


def _scorecard(overall: pl.DataFrame, metrics: tuple[str, ...] = SCORECARD_METRICS) -> pl.DataFrame:
    """One row per benchmark, one column per answer metric of ``metrics`` (rounded)."""
    if overall.is_empty():
        return overall
    wanted = overall.filter(pl.col("metric").is_in(metrics)).with_columns(pl.col("value").round(3))
    if wanted.is_empty():
        return wanted
    table = wanted.pivot(on="metric", index="benchmark", values="value")
    return table.select("benchmark", *[m for m in metrics if m in table.columns])


def clip(text: str | None, limit: int = QUESTION_CHARS) -> str:
    """``text`` cut to ``limit`` characters, ending in "…" when it was cut."""
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def worst_answers(rows: pl.DataFrame) -> pl.DataFrame:
    """Answered questions, least adherent first: the question, the answer's least supported
    sentence with its support (never empty while the answer has a sentence, whatever the
    threshold) and the pages it cites, so a reader sees what users were told that the docs do
    not say."""
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
        pl.col("question").map_elements(clip, return_dtype=pl.String),
        pl.col("adherence").alias("adh"),
        pl.col("completeness").alias("compl"),
        pl.col("correctness_f1").alias("f1"),
        pl.col("sentences_json").map_elements(least_supported, return_dtype=pl.String).alias("least supported"),
        pl.col("cited_doc_ids").list.join(" ").alias("cited pages"),
    )


def least_supported(value: str | None) -> str:
    """``support: sentence`` for the answer sentence the judge found least supported."""
    sentences = json.loads(value) if value else []
    if not sentences:
        return ""
    worst = min(sentences, key=lambda s: s.get("supported", 1.0))
    return f"{worst.get('supported', 0):.2f}: {clip(worst.get('text'), 100)}"


def lineage_tables(answers: pl.DataFrame, results: pl.DataFrame, pages: pl.DataFrame, pages_link: str) -> dict:
    """``questions`` (worst first: id, rank, TRACe, each cited page linked to its upstream URL
    with its sha256 prefix) and ``cited_pages`` (full sha256, upstream URL, and a link to
    ``pages_link``: the source_pages materialization these bytes were read in), which lists
    every page a listed question cites, then the most cited others: from a score on this page,
    a cited page's URL is one click and its full sha256 is on the same page."""
    sha = dict(zip(pages["doc_id"], pages["bytes_hash"])) if not pages.is_empty() else {}
    url = dict(zip(pages["doc_id"], pages["url"])) if not pages.is_empty() else {}

    def page_cell(doc_ids) -> str:
        cells = []
        for d in doc_ids if doc_ids is not None else []:
            name = f"[{d}]({url[d]})" if url.get(d) else d
            cells.append(f"{name} `{(sha.get(d) or '?')[:12]}…`")
        return " ".join(cells)

    rows = question_rows(answers, results)
    if rows.is_empty():
        return {"questions": dg.MetadataValue.md("_no answers_")}
    listed = rows.head(QUESTIONS_SHOWN)
    shown = listed.with_columns(
        pl.col("question").map_elements(clip, return_dtype=pl.String),
        pl.col("cited_doc_ids").map_elements(page_cell, return_dtype=pl.String).alias("cited pages (sha256)"),
    )
    shown = shown.rename({"question_id": "id", "adherence": "adh", "relevance": "rel", "utilization": "util",
                          "completeness": "compl", "correctness_f1": "f1"}).drop("cited_doc_ids")  # fmt: skip
    cited = cited_pages(answers, pages)
    if not cited.is_empty():
        on_page = set(listed["cited_doc_ids"].explode().drop_nulls().to_list())
        first = cited.filter(pl.col("doc_id").is_in(on_page))
        cited = pl.concat([first, cited.filter(~pl.col("doc_id").is_in(on_page)).head(PAGES_SHOWN)])
        if pages_link:
            cited = cited.with_columns(pl.lit(f"[source_pages]({pages_link})").alias("bytes read in"))
    return {
        "questions": md_table(shown, QUESTIONS_SHOWN, 2000),
        "cited_pages": md_table(cited, len(cited), 400),
    }
