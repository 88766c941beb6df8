"""Named reads of the warehouse: every query a caller needs, so no caller writes SQL.

A mixin of ``Warehouse`` (which supplies ``frame`` and ``rows``); split from warehouse.py so
the schema and write path read in one place and the queries in another.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import polars as pl


class WarehouseReads:
    """Queries by name; ``frame``/``rows`` come from ``Warehouse``."""

    def frame(self, sql: str, params: list[Any] | None = None) -> pl.DataFrame:  # pragma: no cover
        raise NotImplementedError

    def rows(self, sql: str, params: list[Any] | None = None) -> list[tuple]:  # pragma: no cover
        raise NotImplementedError

    def chunks_of(
        self, version: str, columns: Sequence[str] = ("*",), order_by: Sequence[str] = ("chunk_id",)
    ) -> pl.DataFrame:
        """``version``'s chunk rows (stable order: chunk id unless ``order_by`` says otherwise)."""
        return self._of("chunks", version, columns, order_by)

    def chunk_batches(self, version: str, columns: Sequence[str] = ("*",), rows: int = 8192) -> Iterator[pl.DataFrame]:
        """``version``'s chunk rows in chunk-id order, ``rows`` at a time."""
        return self._batches("chunks", "chunk_id", version, columns, rows)

    def document_batches(
        self, version: str, columns: Sequence[str] = ("*",), rows: int = 256
    ) -> Iterator[pl.DataFrame]:
        """``version``'s page records (every status) in doc-id order, ``rows`` at a time."""
        return self._batches("documents", "doc_id", version, columns, rows)

    def _batches(self, table: str, key: str, version: str, columns: Sequence[str], rows: int) -> Iterator[pl.DataFrame]:
        """Keyset pages of a version's rows, each its own short query, so no connection stays
        open between batches (writers are not held up) and memory is one batch."""
        selected, last = ", ".join(columns), None
        while True:
            after = "" if last is None else f" AND {key} > ?"
            frame = self.frame(
                f"SELECT {selected} FROM {table} WHERE index_version = ?{after} ORDER BY {key} LIMIT {int(rows)}",
                [version] if last is None else [version, last],
            )
            if frame.height:
                yield frame
            if frame.height < rows:
                return
            last = frame[key][-1]

    def chunk_summary(self, version: str) -> pl.DataFrame:
        """One row per chunk without its text (project, token count, characters): for reports."""
        return self.frame(
            "SELECT project, token_count, length(text) AS chars FROM chunks WHERE index_version = ?", [version]
        )

    def chunk_preview(self, version: str, limit: int = 10) -> pl.DataFrame:
        return self.frame(
            "SELECT chunk_id, doc_id, section_path, token_count, text FROM chunks WHERE index_version = ? "
            f"ORDER BY chunk_id LIMIT {int(limit)}",
            [version],
        )

    def documents_of(self, version: str, columns: Sequence[str] = ("*",), order_by: Sequence[str] = ()) -> pl.DataFrame:
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
        return self.rows(
            "SELECT count(*) FROM chunks WHERE index_version = ? AND doc_id IN (SELECT unnest(?::VARCHAR[]))",
            [version, list(doc_ids)],
        )[0][0]

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
            [exclude],
        )
        return found[0][0] if found else None

    def has_rows(self, table: str, version: str) -> bool:
        """Whether ``table`` holds any row of ``version`` (e.g. eval_metrics: was it evaluated?)."""
        return bool(self.rows(f"SELECT 1 FROM {table} WHERE index_version = ? LIMIT 1", [version]))

    def version_names(self) -> set[str]:
        return {v for (v,) in self.rows("SELECT index_version FROM index_versions")}

    def newest_version(self) -> tuple[str, str] | None:
        """(name, sources fingerprint) of the most recently registered version, built or not."""
        found = self.rows(
            "SELECT index_version, sources_fingerprint FROM index_versions ORDER BY created_at DESC LIMIT 1"
        )
        return (found[0][0], found[0][1]) if found else None

    def trace_counts(self) -> pl.DataFrame:
        """Loaded traces by origin and outcome (the served_traces asset's summary)."""
        return self.frame(
            "SELECT origin, outcome, count(*) AS traces FROM traces GROUP BY ALL ORDER BY origin, outcome"
        )

    def unjudged_answers(self) -> pl.DataFrame:
        """Answered traces that no judge has scored yet (``trace_judgements``)."""
        return self.frame(
            "SELECT * FROM traces t WHERE outcome = 'answered' AND NOT EXISTS "
            "(SELECT 1 FROM trace_judgements j WHERE j.trace_id = t.trace_id)"
        )

    def chunk_texts(self, version: str) -> dict[str, str]:
        return dict(self.rows("SELECT chunk_id, text FROM chunks WHERE index_version = ?", [version]))

    def judged_answers(self) -> pl.DataFrame:
        return self.frame("SELECT * FROM trace_judgements")

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
            + (" AND index_version = ?" if version else "")
            + " ORDER BY run_id DESC LIMIT 1",
            [question_id, regime] + ([version] if version else []),
        ).to_dicts()
        return found[0] if found else None

    def largest_run_ranks(self, version: str, regime: str, benchmark: str) -> list[tuple]:
        """(question_id, relevant, rank) of ``benchmark`` under ``regime`` in the version's run
        with the most eval rows (its full run, not a smoke run)."""
        return self.rows(
            "SELECT question_id, relevant, rank FROM eval_results WHERE index_version = ? AND regime = ? "
            "AND benchmark = ? AND run_id = (SELECT max_by(run_id, n) FROM (SELECT run_id, "
            "count(*) n FROM eval_results WHERE index_version = ? GROUP BY run_id))",
            [version, regime, benchmark, version],
        )

    def chunk_provenance(self, version: str, chunk_id: str) -> dict | None:
        """A chunk's span in its document and the source page bytes behind it (lineage)."""
        found = self.frame(
            "SELECT c.chunk_id, c.doc_id, c.section_path, c.start_char, c.end_char, c.text_hash, c.url AS cite_url, "
            "d.content_hash AS document_hash, d.parser, d.parser_version, p.url, p.rel_path, p.bytes_hash, "
            "p.size_bytes, p.upstream, p.license, "
            "substr(d.text, c.start_char + 1, c.end_char - c.start_char) = c.text AS span_matches "
            "FROM chunks c JOIN documents d USING (index_version, doc_id) "
            "JOIN source_pages p USING (index_version, doc_id) WHERE c.index_version = ? AND c.chunk_id = ?",
            [version, chunk_id],
        ).to_dicts()
        return found[0] if found else None

    # --- reads of the build's own checks and reports ----------------------------------------
    def source_pages_of(self, version: str) -> pl.DataFrame:
        return self._of("source_pages", version, ("*",), ("source", "rel_path"))

    def parses_of_bytes(self, bytes_hashes: Sequence[str], exclude_version: str) -> pl.DataFrame:
        """One earlier parse per (bytes, parser, parser version, pipeline) of any other version."""
        return self.frame(
            "SELECT * EXCLUDE (index_version) FROM documents WHERE index_version <> ? "
            "AND source_hash IN (SELECT unnest(?::VARCHAR[])) QUALIFY row_number() OVER "
            "(PARTITION BY source_hash, parser, parser_version, pipeline_version ORDER BY doc_id) = 1",
            [exclude_version, list(bytes_hashes)],
        )

    def parse_failures_by_project(self, version: str) -> pl.DataFrame:
        """Pages and failed parses (error, too_large) per project."""
        return self.frame(
            "SELECT project, count(*) AS pages, count(*) FILTER (WHERE status IN ('error', 'too_large')) AS failed "
            "FROM documents WHERE index_version = ? GROUP BY project ORDER BY project",
            [version],
        )

    def chunks_not_slices(self, version: str) -> pl.DataFrame:
        """Chunks whose text is not exactly ``document.text[start:end]``."""
        return self.frame(
            "SELECT c.chunk_id, c.doc_id, c.start_char, c.end_char FROM chunks c JOIN documents d "
            "ON d.index_version = c.index_version AND d.doc_id = c.doc_id WHERE c.index_version = ? "
            "AND substr(d.text, c.start_char + 1, c.end_char - c.start_char) IS DISTINCT FROM c.text",
            [version],
        )

    def chunks_out_of_bounds(self, version: str, max_tokens: int, max_chars: int) -> pl.DataFrame:
        """Empty chunks and chunks over the token or character bound."""
        return self.frame(
            "SELECT chunk_id, doc_id, token_count, length(text) AS chars FROM chunks WHERE index_version = ? "
            "AND (trim(text) = '' OR token_count > ? OR length(text) > ?)",
            [version, max_tokens, max_chars],
        )

    def eval_metric_rows(self, version: str) -> list[tuple]:
        """(benchmark, regime, slice, slice_value, metric, value) of the version's eval_run."""
        return self.rows(
            "SELECT benchmark, regime, slice, slice_value, metric, value FROM eval_metrics WHERE index_version = ?",
            [version],
        )
