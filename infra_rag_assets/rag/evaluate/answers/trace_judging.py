"""Live traffic scored like the eval run: every answered trace judged sentence by sentence, so
adherence of what users were actually told can be followed per day.

A trace keeps its hits' chunk ids and the answer with its ``[n]`` markers, not the passage
texts; the texts come back from the version's chunks, and each sentence is judged against the
passages it cites, as in the eval run. Relevance and completeness need the packed context,
which a trace does not record, so live traffic gets adherence only (docs/answers.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from ...judge.sentences import answer_sentences
from ...judge.trace import judged_sentences, trace_scores

JUDGED_COLUMNS = {
    "trace_id": pl.String,
    "index_version": pl.String,
    "day": pl.String,
    "judge": pl.String,
    "adherence": pl.Float64,
    "adherent": pl.Boolean,
    "sentences": pl.Int32,
    "unsupported_json": pl.String,
}


@dataclass(frozen=True)
class _Passage:
    text: str


def judge_traces(
    traces: pl.DataFrame, judge_for: Callable[[str], object | None], chunk_texts: Callable[[str], Mapping[str, str]]
) -> pl.DataFrame:
    """One row per answered trace whose version has a judge (``JUDGED_COLUMNS``)."""
    rows = []
    answered = traces.filter(pl.col("outcome") == "answered")
    for version in answered["index_version"].unique().to_list():
        judge = judge_for(version)
        if judge is None:
            continue
        texts = chunk_texts(version)
        rows += _judged(answered.filter(pl.col("index_version") == version), judge, texts)
    return pl.DataFrame(rows, schema=JUDGED_COLUMNS)


def _judged(traces: pl.DataFrame, judge, texts: Mapping[str, str]) -> list[dict]:
    plans = []
    for t in traces.iter_rows(named=True):
        hits = json.loads(t["hits_json"] or "[]")
        passages = [_Passage(texts.get(h["chunk_id"], "")) for h in hits]
        sentences = answer_sentences(t["answer"] or "")
        judged = judged_sentences(sentences)
        evidence = [_evidence(s.passages, passages) for s in judged]
        plans.append((t, sentences, judged, evidence))
    claims = [(s.text, e) for _, _, judged, evidence in plans for s, e in zip(judged, evidence, strict=True)]
    support = judge.support([c for c, _ in claims], [e for _, e in claims]) if claims else []
    rows, at = [], 0
    for t, sentences, judged, _ in plans:
        scores = support[at : at + len(judged)]
        at += len(judged)
        trace = trace_scores([], [], [], sentences, scores)
        rows.append(
            {
                "trace_id": t["trace_id"],
                "index_version": t["index_version"],
                "day": str(t["occurred_at"])[:10],
                "judge": judge.identity,
                "adherence": trace.adherence,
                "adherent": trace.adherent,
                "sentences": len(trace.sentences),
                "unsupported_json": json.dumps(trace.unsupported()),
            }
        )
    return rows


def _evidence(numbers: Sequence[int], passages: Sequence[_Passage]) -> str:
    return "\n\n".join(passages[n - 1].text for n in numbers if 0 < n <= len(passages))


def adherence_by_day(judged: pl.DataFrame) -> pl.DataFrame:
    """Per day: answers judged, mean adherence, share fully supported."""
    if judged.is_empty():
        return pl.DataFrame(schema={"day": pl.String, "answers": pl.UInt32, "adherence": pl.Float64})
    return (
        judged.group_by("day")
        .agg(
            pl.len().alias("answers"),
            pl.col("adherence").mean().round(3).alias("adherence"),
            pl.col("adherent").mean().round(3).alias("supported_share"),
        )
        .sort("day", descending=True)
    )
