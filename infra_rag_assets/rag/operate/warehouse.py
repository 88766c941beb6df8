"""DuckDB warehouse: schema and atomic per-index-version writes.

DuckDB allows one writing process per file, so connections are short-lived (open, write in
one transaction, close) and opening retries while another process holds the lock. Every
table carries ``index_version``; writing a partition deletes its rows and inserts the new
ones in one transaction, so a re-materialization replaces rather than duplicates.
Reads that more than one module needs are named methods here, so their SQL is written once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

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
# Tables that are append-only history rather than per-version partitions.
HISTORY_TABLES = {"releases", "traces"}


_SCHEMA_READY: set[str] = set()  # warehouse files whose schema this process has ensured


class WarehouseBusy(RuntimeError):
    """Another process held the DuckDB write lock for longer than the wait budget."""


class Warehouse:
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
            return pl.from_arrow(con.sql(sql, params=params or None).to_arrow_table())

    def rows(self, sql: str, params: list[Any] | None = None) -> list[tuple]:
        with self.connect(read_only=True) as con:
            return con.execute(sql, params or []).fetchall()

    def execute(self, sql: str, params: list[Any] | None = None) -> None:
        with self.connect() as con:
            con.execute(sql, params or [])

    # --- index versions -------------------------------------------------------------------
    def record_version(self, version: str, config: dict, config_hash: str, fingerprint: str,
                       created_by: str) -> bool:
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
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming i "
                        f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE t.{key} = i.{key})")
            after = con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
            con.unregister("incoming")
        return after - before

    def copy_partition(self, table: str, source_version: str, target_version: str) -> int:
        """Replace ``target_version``'s rows of ``table`` with a copy of ``source_version``'s."""
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            con.execute(f"DELETE FROM {table} WHERE index_version = ?", [target_version])
            con.execute(f"INSERT INTO {table} SELECT * REPLACE (CAST(? AS VARCHAR) AS index_version) "
                        f"FROM {table} WHERE index_version = ?", [target_version, source_version])
            count = con.execute(f"SELECT count(*) FROM {table} WHERE index_version = ?",
                                [target_version]).fetchall()[0][0]
            con.execute("COMMIT")
        return count

    # --- named reads ----------------------------------------------------------------------
    def chunks_of(self, version: str, columns: Sequence[str] = ("*",),
                  order_by: Sequence[str] = ("chunk_id",)) -> pl.DataFrame:
        """``version``'s chunk rows (stable order: chunk id unless ``order_by`` says otherwise)."""
        return self._of("chunks", version, columns, order_by)

    def documents_of(self, version: str, columns: Sequence[str] = ("*",),
                     order_by: Sequence[str] = ()) -> pl.DataFrame:
        """``version``'s page records (every status)."""
        return self._of("documents", version, columns, order_by)

    def _of(self, table: str, version: str, columns: Sequence[str], order_by: Sequence[str]) -> pl.DataFrame:
        order = f" ORDER BY {', '.join(order_by)}" if order_by else ""
        return self.frame(f"SELECT {', '.join(columns)} FROM {table} WHERE index_version = ?{order}", [version])

    def row_count(self, table: str, version: str) -> int:
        return self.rows(f"SELECT count(*) FROM {table} WHERE index_version = ?", [version])[0][0]

    def chunk_count(self, version: str, doc_ids: Sequence[str] | None = None) -> int:
        """Chunks of ``version`` (only those of ``doc_ids`` when given)."""
        if doc_ids is None:
            return self.row_count("chunks", version)
        return self.rows("SELECT count(*) FROM chunks WHERE index_version = ? AND doc_id IN "
                         "(SELECT unnest(?::VARCHAR[]))", [version, list(doc_ids)])[0][0]

    def page_count(self, version: str) -> int:
        """Pages with at least one chunk (what the page-level lexical index holds)."""
        return self.rows("SELECT count(DISTINCT doc_id) FROM chunks WHERE index_version = ?", [version])[0][0]

    def doc_ids(self, version: str) -> set[str]:
        """Doc ids of ``version``'s page records, chunked or not (eval coverage counts these)."""
        return {d for (d,) in self.rows("SELECT doc_id FROM documents WHERE index_version = ?", [version])}

    def versions_with_chunks(self) -> list[str]:
        return [v for (v,) in self.rows("SELECT DISTINCT index_version FROM chunks ORDER BY 1")]

    def newest_version_with(self, table: str, exclude: str = "") -> str | None:
        """The newest version (by creation time) with rows in ``table``; others are half built."""
        found = self.rows(
            f"SELECT v.index_version FROM index_versions v WHERE v.index_version <> ? AND EXISTS "
            f"(SELECT 1 FROM {table} t WHERE t.index_version = v.index_version) ORDER BY v.created_at DESC LIMIT 1",
            [exclude])
        return found[0][0] if found else None

    def has_rows(self, table: str, version: str) -> bool:
        """Whether ``table`` holds any row of ``version`` (e.g. eval_metrics: was it evaluated?)."""
        return bool(self.rows(f"SELECT 1 FROM {table} WHERE index_version = ? LIMIT 1", [version]))

    def version_names(self) -> set[str]:
        return {v for (v,) in self.rows("SELECT index_version FROM index_versions")}

    def newest_version(self) -> tuple[str, str] | None:
        """(name, sources fingerprint) of the most recently registered version, built or not."""
        found = self.rows("SELECT index_version, sources_fingerprint FROM index_versions "
                          "ORDER BY created_at DESC LIMIT 1")
        return (found[0][0], found[0][1]) if found else None

    def trace_counts(self) -> pl.DataFrame:
        """Loaded traces by origin and outcome (the served_traces asset's summary)."""
        return self.frame("SELECT origin, outcome, count(*) AS traces FROM traces "
                          "GROUP BY ALL ORDER BY origin, outcome")

    def has_question(self, question_id: str) -> bool:
        return bool(self.rows("SELECT 1 FROM eval_results WHERE question_id = ? LIMIT 1", [question_id]))

    def version_info(self, version: str) -> dict | None:
        """``version``'s registration (created_at, created_by, config_hash, sources_fingerprint)."""
        names = ("created_at", "created_by", "config_hash", "sources_fingerprint")
        found = self.rows(f"SELECT {', '.join(names)} FROM index_versions WHERE index_version = ?", [version])
        return dict(zip(names, found[0])) if found else None

    def release_events(self) -> list[dict]:
        """Every release event, oldest first."""
        return self.frame("SELECT * FROM releases ORDER BY occurred_at, event_id").to_dicts()

    def latest_eval_result(self, question_id: str, regime: str, version: str | None = None) -> dict | None:
        """The newest scored run of one question under one regime (of ``version`` when given)."""
        found = self.frame(
            "SELECT * FROM eval_results WHERE question_id = ? AND regime = ?"
            + (" AND index_version = ?" if version else "") + " ORDER BY run_id DESC LIMIT 1",
            [question_id, regime] + ([version] if version else [])).to_dicts()
        return found[0] if found else None

    def largest_run_ranks(self, version: str, regime: str, benchmark: str) -> list[tuple]:
        """(question_id, relevant, rank) of ``benchmark`` under ``regime`` in the version's run
        with the most eval rows (its full run, not a smoke run)."""
        return self.rows(
            "SELECT question_id, relevant, rank FROM eval_results WHERE index_version = ? AND regime = ? "
            "AND benchmark = ? AND run_id = (SELECT max_by(run_id, n) FROM (SELECT run_id, "
            "count(*) n FROM eval_results WHERE index_version = ? GROUP BY run_id))",
            [version, regime, benchmark, version])

    def chunk_provenance(self, version: str, chunk_id: str) -> dict | None:
        """A chunk's span in its document and the source page bytes behind it (lineage)."""
        found = self.frame(
            "SELECT c.chunk_id, c.doc_id, c.section_path, c.start_char, c.end_char, c.text_hash, c.url AS cite_url, "
            "d.content_hash AS document_hash, d.parser, d.parser_version, p.url, p.rel_path, p.bytes_hash, "
            "p.size_bytes, p.upstream, p.license, "
            "substr(d.text, c.start_char + 1, c.end_char - c.start_char) = c.text AS span_matches "
            "FROM chunks c JOIN documents d USING (index_version, doc_id) "
            "JOIN source_pages p USING (index_version, doc_id) WHERE c.index_version = ? AND c.chunk_id = ?",
            [version, chunk_id]).to_dicts()
        return found[0] if found else None
