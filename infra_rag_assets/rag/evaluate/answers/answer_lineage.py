"""From a scored answer back to the bytes it rests on: per question its retrieval rank, TRACe
and the pages it cites; per cited page the sha256 of the source bytes this version indexed.

Framework-free frames; ``defs/evaluate/answer_report.py`` renders them with UI links.
"""

from __future__ import annotations

import polars as pl

from ..evaluation import SERVING

TRACE_COLUMNS = ("adherence", "relevance", "utilization", "completeness", "correctness_f1")


def question_rows(answers: pl.DataFrame, results: pl.DataFrame) -> pl.DataFrame:
    """One row per answered question, worst first (least adherent, then least complete, then
    least correct; abstentions, which have no adherence, last), with the serving regime's rank
    of the first relevant page (None: not in the top k, or nothing to find)."""
    if answers.is_empty():
        return pl.DataFrame()
    ranks = (
        results.filter(pl.col("regime") == SERVING).select("benchmark", "question_id", "rank")
        if not results.is_empty()
        else pl.DataFrame(schema={"benchmark": pl.String, "question_id": pl.String, "rank": pl.Int32})
    )
    return (
        answers.join(ranks, on=["benchmark", "question_id"], how="left")
        .with_columns(*(pl.col(c).cast(pl.Float64).round(3) for c in TRACE_COLUMNS))
        .sort(["adherence", "completeness", "correctness_f1"], nulls_last=True)
        .select("benchmark", "question_id", "question", "outcome", "rank", *TRACE_COLUMNS, "cited_doc_ids")
    )


def cited_pages(answers: pl.DataFrame, pages: pl.DataFrame) -> pl.DataFrame:
    """Every page an answer cites, with the sha256 of its source bytes in this version, its
    upstream URL and how many answers cite it (most cited first)."""
    if answers.is_empty() or "cited_doc_ids" not in answers.columns:
        return pl.DataFrame()
    cited = (
        answers.select(pl.col("cited_doc_ids").alias("doc_id"))
        .explode("doc_id")
        .drop_nulls()
        .group_by("doc_id")
        .len(name="answers")
    )
    return (
        cited.join(pages.select("doc_id", pl.col("bytes_hash").alias("sha256"), "url"), on="doc_id", how="left")
        .sort(["answers", "doc_id"], descending=[True, False])
        .select("doc_id", "sha256", "answers", "url")
    )
