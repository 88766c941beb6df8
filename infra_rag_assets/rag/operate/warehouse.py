"""DuckDB warehouse: schema and atomic per-index-version writes.

DuckDB allows one writing process per file, so connections are short-lived (open, write in
one transaction, close) and opening retries while another process holds the lock. Every
table carries ``index_version``; writing a partition deletes its rows and inserts the new
ones in one transaction, so a re-materialization replaces rather than duplicates.
Reads are named methods (``warehouse_reads.WarehouseReads``), so callers write no SQL.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import duckdb
import polars as pl

from .warehouse_reads import WarehouseReads

SCHEMA: dict[str, str] = {
    "index_versions": """
        index_version VARCHAR PRIMARY KEY, created_at TIMESTAMP, created_by VARCHAR,
        config_hash VARCHAR, sources_fingerprint VARCHAR, config_json VARCHAR""",
    "source_pages": """
        index_version VARCHAR, source VARCHAR, project VARCHAR, doc_id VARCHAR, page_id VARCHAR,
        rel_path VARCHAR, url VARCHAR, upstream VARCHAR, license VARCHAR, kind VARCHAR,
        bytes_hash VARCHAR, size_bytes BIGINT, fetch_status VARCHAR, fetch_reason VARCHAR,
        read_ms DOUBLE""",
    "documents": """
        index_version VARCHAR, doc_id VARCHAR, source VARCHAR, project VARCHAR, page_id VARCHAR,
        url VARCHAR, title VARCHAR, description VARCHAR, text VARCHAR, page_kind VARCHAR,
        sections_json VARCHAR, page_spans_json VARCHAR, section_count INTEGER, status VARCHAR,
        reason VARCHAR, source_hash VARCHAR, content_hash VARCHAR, parser VARCHAR,
        parser_version VARCHAR, pipeline_version VARCHAR, char_count BIGINT, parse_ms DOUBLE""",
    "chunks": """
        index_version VARCHAR, chunk_id VARCHAR, doc_id VARCHAR, source VARCHAR, project VARCHAR,
        page_id VARCHAR, url VARCHAR, title VARCHAR, section_path VARCHAR, anchor VARCHAR,
        pages INTEGER[], page_kind VARCHAR, ordinal INTEGER, start_char BIGINT, end_char BIGINT,
        text VARCHAR, context VARCHAR, token_count INTEGER, text_hash VARCHAR,
        embed_hash VARCHAR""",
    "eval_results": """
        index_version VARCHAR, run_id VARCHAR, benchmark VARCHAR, benchmark_hash VARCHAR,
        regime VARCHAR, retrieval_config_hash VARCHAR, question_id VARCHAR, question VARCHAR,
        category VARCHAR, project VARCHAR, page_kind VARCHAR, relevant VARCHAR[],
        ranked_doc_ids VARCHAR[], ranked_chunk_ids VARCHAR[], rank INTEGER, hit_at_1 BOOLEAN,
        hit_at_5 BOOLEAN, hit_at_10 BOOLEAN, reciprocal_rank DOUBLE, ndcg_at_10 DOUBLE,
        abstained BOOLEAN, should_abstain BOOLEAN, degraded BOOLEAN, support DOUBLE,
        latency_ms DOUBLE""",
    "eval_metrics": """
        index_version VARCHAR, run_id VARCHAR, benchmark VARCHAR, regime VARCHAR, slice VARCHAR,
        slice_value VARCHAR, metric VARCHAR, value DOUBLE, n INTEGER""",
    "answer_results": """
        index_version VARCHAR, run_id VARCHAR, benchmark VARCHAR, benchmark_hash VARCHAR,
        question_id VARCHAR, question VARCHAR, category VARCHAR, project VARCHAR,
        relevant VARCHAR[], should_abstain BOOLEAN, outcome VARCHAR, gap_named BOOLEAN,
        method VARCHAR, model VARCHAR, prompt_hash VARCHAR, answer VARCHAR, error VARCHAR,
        cited_chunk_ids VARCHAR[], cited_doc_ids VARCHAR[], citations_json VARCHAR,
        context_sentences INTEGER, relevance DOUBLE, utilization DOUBLE, completeness DOUBLE,
        adherence DOUBLE, adherent BOOLEAN, unsupported_json VARCHAR, sentences_json VARCHAR,
        relevant_sentences_json VARCHAR, utilized_sentences_json VARCHAR,
        relevance_silver DOUBLE, completeness_silver DOUBLE, judge_silver_kappa DOUBLE,
        correctness_f1 DOUBLE, correctness_recall DOUBLE, citation_valid BOOLEAN,
        citation_problems_json VARCHAR, cited_page_precision DOUBLE, safety_passed BOOLEAN, safety_harmful BOOLEAN,
        safety_reasons_json VARCHAR, retrieval_ms DOUBLE, generation_ms DOUBLE, judge_ms DOUBLE,
        tokens_in INTEGER, tokens_out INTEGER, cost_usd DOUBLE, short_answer VARCHAR,
        correctness_f1_full_text DOUBLE""",
    "trace_judgements": """
        trace_id VARCHAR, index_version VARCHAR, day VARCHAR, judge VARCHAR, adherence DOUBLE,
        adherent BOOLEAN, sentences INTEGER, unsupported_json VARCHAR""",
    "releases": """
        event_id VARCHAR, index_version VARCHAR, action VARCHAR, occurred_at TIMESTAMP, actor VARCHAR,
        run_id VARCHAR, previous_version VARCHAR, reason VARCHAR, metrics_json VARCHAR""",
    "traces": """
        trace_id VARCHAR, occurred_at TIMESTAMP, origin VARCHAR, question VARCHAR, index_version VARCHAR,
        retrieval_config_name VARCHAR, retrieval_config_hash VARCHAR, dense_ranking_json VARCHAR,
        lexical_ranking_json VARCHAR, hits_json VARCHAR, timings_json VARCHAR, answer VARCHAR,
        citations_json VARCHAR, outcome VARCHAR, method VARCHAR, abstained BOOLEAN,
        degraded BOOLEAN, error VARCHAR""",
}
# Columns added to a table after warehouses were made with it (also in SCHEMA): added on open.
ADDED_COLUMNS = {"answer_results": ("short_answer VARCHAR", "correctness_f1_full_text DOUBLE")}
# Tables that are append-only history rather than per-version partitions.
HISTORY_TABLES = {"releases", "traces", "trace_judgements"}


_SCHEMA_READY: set[str] = set()  # warehouse files whose schema this process has ensured


class WarehouseBusy(RuntimeError):
    """Another process held the DuckDB write lock for longer than the wait budget."""


class Warehouse(WarehouseReads):
    """The one place that opens the DuckDB file."""

    def __init__(self, path: Path | str, lock_wait_s: float = 60.0):
        self.path = Path(path)
        self.lock_wait_s = lock_wait_s

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if read_only and str(self.path) not in _SCHEMA_READY:
            read_only = False  # first touch per process creates the file and any new tables
        con = self._open(read_only)
        try:
            if not read_only and str(self.path) not in _SCHEMA_READY:
                self._ensure_schema(con)
                _SCHEMA_READY.add(str(self.path))
            yield con
        finally:
            con.close()

    def _open(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.lock_wait_s
        delay = 0.05
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                    if "lock" in str(exc).lower():
                        raise WarehouseBusy(f"warehouse {self.path} is locked by another process") from None
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    @staticmethod
    def _ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
        for table, columns in SCHEMA.items():
            con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({columns})")
        for table, added in ADDED_COLUMNS.items():  # warehouse files made before these columns
            for column in added:
                con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column}")

    def replace_partition_batches(self, table: str, version: str, frames: Iterable[pl.DataFrame]) -> int:
        """``replace_partition`` fed a batch at a time: batches land in a staging table (a short
        write each, so other writers are not held up for the whole stage), then one transaction
        swaps the version's rows for them; a failure leaves the version's old rows in place."""
        staging = f"_staging_{table}_{uuid.uuid4().hex[:12]}"
        rows = 0
        try:
            with self.connect() as con:
                con.execute(f"CREATE TABLE {staging} AS SELECT * FROM {table} LIMIT 0")
            for frame in frames:
                if "index_version" not in frame.columns:
                    frame = frame.with_columns(pl.lit(version).alias("index_version"))
                arrow = frame.to_arrow()
                if arrow.num_rows:
                    with self.connect() as con:
                        con.register("incoming", arrow)
                        con.execute(f"INSERT INTO {staging} BY NAME SELECT * FROM incoming")
                        con.unregister("incoming")
                    rows += arrow.num_rows
            with self.connect() as con:
                con.execute("BEGIN TRANSACTION")
                try:
                    con.execute(f"DELETE FROM {table} WHERE index_version = ?", [version])
                    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {staging}")
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
        finally:
            with self.connect() as con:
                con.execute(f"DROP TABLE IF EXISTS {staging}")
        return rows

    def replace_partition(self, table: str, version: str, frame: pl.DataFrame) -> int:
        """Atomically swap ``table``'s rows for ``version`` with ``frame`` (columns by name)."""
        if "index_version" not in frame.columns:
            frame = frame.with_columns(pl.lit(version).alias("index_version"))
        arrow = frame.to_arrow()
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute(f"DELETE FROM {table} WHERE index_version = ?", [version])
                if arrow.num_rows:
                    con.register("incoming", arrow)
                    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming")
                    con.unregister("incoming")
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return arrow.num_rows

    def frame(self, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
        with self.connect(read_only=True) as con:
            # An Arrow table converts to a DataFrame (from_arrow gives a Series only for an array).
            return cast(pl.DataFrame, pl.from_arrow(con.sql(sql, params=params or None).to_arrow_table()))

    def rows(self, sql: str, params: list[Any] | None = None) -> list[tuple]:
        with self.connect(read_only=True) as con:
            return con.execute(sql, params or []).fetchall()

    def execute(self, sql: str, params: list[Any] | None = None) -> None:
        with self.connect() as con:
            con.execute(sql, params or [])

    # --- index versions -------------------------------------------------------------------
    def record_version(self, version: str, config: dict, config_hash: str, fingerprint: str, created_by: str) -> bool:
        """Insert the version's row unless the name exists; True when this call inserted it
        (one transaction, so of two processes recording one name exactly one gets True)."""
        with self.connect() as con:
            inserted = con.execute(
                "INSERT INTO index_versions VALUES (?, now(), ?, ?, ?, ?) ON CONFLICT DO NOTHING "
                "RETURNING index_version",
                [version, created_by, config_hash, fingerprint, json.dumps(config, sort_keys=True)],
            ).fetchall()
        return bool(inserted)

    def version_config(self, version: str) -> dict | None:
        found = self.rows("SELECT config_json FROM index_versions WHERE index_version = ?", [version])
        return json.loads(found[0][0]) if found else None

    def versions(self) -> pl.DataFrame:
        return self.frame(
            "SELECT v.index_version, v.created_at, v.created_by, v.config_hash, "
            "(SELECT count(*) FROM documents d WHERE d.index_version = v.index_version) AS documents, "
            "(SELECT count(*) FROM chunks c WHERE c.index_version = v.index_version) AS chunks "
            "FROM index_versions v ORDER BY v.created_at"
        )

    def append(self, table: str, frame: pl.DataFrame) -> int:
        """Append rows (history tables: releases, traces) in one transaction."""
        arrow = frame.to_arrow()
        with self.connect() as con:
            con.register("incoming", arrow)
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming")
            con.unregister("incoming")
        return arrow.num_rows

    def append_missing(self, table: str, frame: pl.DataFrame, key: str) -> int:
        """Append the rows whose ``key`` is not in ``table`` yet (idempotent loads); returns how many."""
        if frame.is_empty():
            return 0
        arrow = frame.to_arrow()
        with self.connect() as con:
            con.register("incoming", arrow)
            before = con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
            con.execute(
                f"INSERT INTO {table} BY NAME SELECT * FROM incoming i "
                f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE t.{key} = i.{key})"
            )
            after = con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
            con.unregister("incoming")
        return after - before

    def copy_partition(self, table: str, source_version: str, target_version: str) -> int:
        """Replace ``target_version``'s rows of ``table`` with a copy of ``source_version``'s."""
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            con.execute(f"DELETE FROM {table} WHERE index_version = ?", [target_version])
            con.execute(
                f"INSERT INTO {table} SELECT * REPLACE (CAST(? AS VARCHAR) AS index_version) "
                f"FROM {table} WHERE index_version = ?",
                [target_version, source_version],
            )
            count = con.execute(f"SELECT count(*) FROM {table} WHERE index_version = ?", [target_version]).fetchall()[
                0
            ][0]
            con.execute("COMMIT")
        return count
