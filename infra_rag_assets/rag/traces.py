"""One trace row per question answered (CLI, service, batch, eval): what was asked, against
which version and retrieval config, both rankings with scores, stage timings, the answer, its
citations and the outcome. Rows are buffered and appended in one transaction per batch."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, is_dataclass
from datetime import datetime, timezone
from typing import Any

import polars as pl

from .warehouse import Warehouse

TRACE_SCHEMA = {
    "trace_id": pl.String, "occurred_at": pl.Datetime("us"), "origin": pl.String, "question": pl.String,
    "index_version": pl.String, "retrieval_config_name": pl.String, "retrieval_config_hash": pl.String,
    "dense_ranking_json": pl.String, "lexical_ranking_json": pl.String, "hits_json": pl.String,
    "timings_json": pl.String, "answer": pl.String, "citations_json": pl.String, "outcome": pl.String,
    "method": pl.String, "abstained": pl.Boolean, "degraded": pl.Boolean, "error": pl.String,
}


def trace_row(*, origin: str, version: str, config_name: str, result: Any, answer: Any = None,
              outcome: str | None = None, error: str = "") -> dict:
    """Build a trace row from a RetrievalResult and an optional Answer."""
    hits = [{"chunk_id": h.chunk_id, "doc_id": h.doc_id, "score": h.score, "dense_score": h.dense_score,
             "lexical_score": h.lexical_score, "url": h.url} for h in result.hits]
    citations = [asdict(c) if is_dataclass(c) else c for c in (answer.citations if answer else [])]
    return {
        "trace_id": uuid.uuid4().hex, "occurred_at": datetime.now(timezone.utc).replace(tzinfo=None),
        "origin": origin, "question": result.question, "index_version": version,
        "retrieval_config_name": config_name, "retrieval_config_hash": result.config_hash,
        "dense_ranking_json": json.dumps(result.dense_ranking), "lexical_ranking_json": json.dumps(result.lexical_ranking),
        "hits_json": json.dumps(hits), "timings_json": json.dumps(result.timings_ms),
        "answer": answer.text if answer else None, "citations_json": json.dumps(citations, default=str),
        "outcome": outcome or (answer.outcome if answer else ("abstained" if result.abstained else "retrieved")),
        "method": answer.method if answer else "retrieval", "abstained": bool(result.abstained),
        "degraded": bool(result.degraded), "error": error or (answer.error if answer else ""),
    }


def error_row(*, origin: str, version: str, config_name: str, question: str, error: str) -> dict:
    """A trace for a question that failed before retrieval produced a result."""
    return {k: None for k in TRACE_SCHEMA} | {
        "trace_id": uuid.uuid4().hex, "occurred_at": datetime.now(timezone.utc).replace(tzinfo=None),
        "origin": origin, "question": question, "index_version": version, "retrieval_config_name": config_name,
        "outcome": "error", "error": error, "abstained": False, "degraded": False}


def append_traces(warehouse: Warehouse, rows: list[dict]) -> int:
    if not rows:
        return 0
    return warehouse.append("traces", pl.DataFrame(rows, schema=TRACE_SCHEMA))


def last_traces(warehouse: Warehouse, n: int = 10) -> pl.DataFrame:
    return warehouse.frame(
        "SELECT occurred_at, origin, index_version, retrieval_config_name AS config, outcome, method, "
        "question, json_extract_string(timings_json, '$.total') AS total_ms, trace_id FROM traces "
        "ORDER BY occurred_at DESC LIMIT ?", [n])
