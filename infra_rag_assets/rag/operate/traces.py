"""One trace per question answered (CLI, service, batch, canary): what was asked, against which
version and retrieval config, both rankings with scores, stage timings, the answer, its
citations and the outcome.

Traces are written off the request path: callers ``submit`` a row to a bounded in-process
queue and one writer thread per process appends JSON lines to its own segment file

    <home>/traces/<UTC start>-<host>-<pid>-<random>.jsonl

so no two processes ever share a file or a lock. A full queue never drops a trace: the caller
writes that row itself (under the writer's file lock) and the event is counted, so /health can
report it. Readers (``infra-rag traces``, health, the ``served_traces`` asset that loads them
into the warehouse) scan the segments; a torn last line from a killed process is skipped.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import threading
import uuid
from dataclasses import asdict, is_dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TRACE_COLUMNS = {
    "trace_id": "VARCHAR",
    "occurred_at": "TIMESTAMP",
    "origin": "VARCHAR",
    "question": "VARCHAR",
    "index_version": "VARCHAR",
    "retrieval_config_name": "VARCHAR",
    "retrieval_config_hash": "VARCHAR",
    "dense_ranking_json": "VARCHAR",
    "lexical_ranking_json": "VARCHAR",
    "hits_json": "VARCHAR",
    "timings_json": "VARCHAR",
    "answer": "VARCHAR",
    "citations_json": "VARCHAR",
    "outcome": "VARCHAR",
    "method": "VARCHAR",
    "abstained": "BOOLEAN",
    "degraded": "BOOLEAN",
    "error": "VARCHAR",
}
SEGMENT_MAX_BYTES = 64 << 20
DEFAULT_QUEUE_SIZE = 10_000


def new_trace_id() -> str:
    return uuid.uuid4().hex


def _now() -> str:
    return datetime.now(UTC).replace(tzinfo=None).isoformat()


def trace_row(
    *,
    origin: str,
    version: str,
    config_name: str,
    result: Any,
    answer: Any = None,
    outcome: str | None = None,
    error: str = "",
    trace_id: str | None = None,
) -> dict:
    """Build a trace row from a RetrievalResult and an optional Answer."""
    hits = [
        {
            "chunk_id": h.chunk_id,
            "doc_id": h.doc_id,
            "score": h.score,
            "dense_score": h.dense_score,
            "lexical_score": h.lexical_score,
            "url": h.url,
        }
        for h in result.hits
    ]
    citations = [
        asdict(c) if is_dataclass(c) and not isinstance(c, type) else c for c in (answer.citations if answer else [])
    ]
    return {
        "trace_id": trace_id or new_trace_id(),
        "occurred_at": _now(),
        "origin": origin,
        "question": result.question,
        "index_version": version,
        "retrieval_config_name": config_name,
        "retrieval_config_hash": result.config_hash,
        "dense_ranking_json": json.dumps(result.dense_ranking),
        "lexical_ranking_json": json.dumps(result.lexical_ranking),
        "hits_json": json.dumps(hits),
        "timings_json": json.dumps(result.timings_ms),
        "answer": answer.text if answer else None,
        "citations_json": json.dumps(citations, default=str),
        "outcome": outcome or (answer.outcome if answer else ("abstained" if result.abstained else "retrieved")),
        "method": answer.method if answer else "retrieval",
        "abstained": bool(result.abstained),
        "degraded": bool(result.degraded),
        "error": error or (answer.error if answer else ""),
    }


CLIENT_ERROR = "client_error"  # a request refused for what the client asked (a 4xx): not a service error
CLIENT_DISCONNECTED = "client_disconnected"  # a streamed answer whose client left before its end


def error_row(
    *,
    origin: str,
    version: str,
    config_name: str,
    question: str,
    error: str,
    trace_id: str | None = None,
    outcome: str = "error",
) -> dict:
    """A trace for a question that failed before retrieval produced a result.

    ``outcome`` is ``error`` for the service's failures and ``client_error`` for a refusal of
    what the client asked (an unknown version): only the first counts against health."""
    return {k: None for k in TRACE_COLUMNS} | {
        "trace_id": trace_id or new_trace_id(),
        "occurred_at": _now(),
        "origin": origin,
        "question": question,
        "index_version": version,
        "retrieval_config_name": config_name,
        "outcome": outcome,
        "error": error,
        "abstained": False,
        "degraded": False,
    }


class TraceSink:
    """A bounded queue and one writer thread appending to this process's segment file."""

    def __init__(
        self,
        traces_dir: Path | str,
        *,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        segment_max_bytes: int = SEGMENT_MAX_BYTES,
    ) -> None:
        self.dir = Path(traces_dir)
        self.segment_max_bytes = segment_max_bytes
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self._file_lock = threading.Lock()
        self._stream: Any = None
        self._stop = threading.Event()
        self.stats = {"submitted": 0, "written": 0, "queue_full": 0, "write_errors": 0}
        self.last_error = ""
        self._thread = threading.Thread(target=self._run, name="trace-writer", daemon=True)
        self._thread.start()

    def submit(self, row: dict) -> None:
        """Queue ``row``; when the queue is full, write it here (never dropped, counted)."""
        self.stats["submitted"] += 1
        try:
            self._queue.put_nowait(row)
        except queue.Full:
            self.stats["queue_full"] += 1
            self._write([row])

    def queued(self) -> int:
        return self._queue.qsize()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every submitted row is on disk (True) or ``timeout_s`` passes (False)."""
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout_s)

    def close(self, timeout_s: float = 10.0) -> None:
        if self._stop.is_set():
            return
        self.flush(timeout_s)
        self._stop.set()
        self._queue.put(None)
        self._thread.join(timeout_s)
        with self._file_lock:
            if self._stream is not None:
                self._stream.close()
                self._stream = None

    def health(self) -> dict[str, Any]:
        problem = folder_problem(self.dir)
        return {
            **self.stats,
            "queued": self.queued(),
            "queue_size": self._queue.maxsize,
            "ok": self.stats["write_errors"] == 0 and not problem,
            "cause": "traces_unwritable" if self.stats["write_errors"] or problem else "",
            "last_error": problem or self.last_error,
        }

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            batch: list[dict] = []
            markers: list[threading.Event] = []
            while item is not None:
                (markers if isinstance(item, threading.Event) else batch).append(item)
                if len(batch) >= 500:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._write(batch)
            for marker in markers:
                marker.set()
            if item is None:
                return

    def _write(self, rows: list[dict]) -> None:
        lines = "".join(json.dumps(r, default=str, ensure_ascii=False) + "\n" for r in rows)
        data = lines.encode("utf-8", errors="surrogatepass")
        with self._file_lock:
            try:
                stream = self._segment(len(data))
                stream.write(data)
                stream.flush()
                self.stats["written"] += len(rows)
            except OSError as exc:
                self.stats["write_errors"] += len(rows)
                self.last_error = f"traces folder unusable: {os_error_text(exc)}"[:300]

    def _segment(self, incoming: int) -> Any:
        if self._stream is not None and self._stream.tell() + incoming > self.segment_max_bytes:
            self._stream.close()
            self._stream = None
        if self._stream is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
            name = f"{stamp}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}.jsonl"
            self._stream = open(self.dir / name, "ab")  # noqa: SIM115 - kept open across writes
        return self._stream


def os_error_text(exc: OSError) -> str:
    """An OSError without its absolute paths (health answers it to clients): the reason and the
    last part of the file it names."""
    name = f" ({Path(str(exc.filename)).name})" if exc.filename else ""
    return f"{type(exc).__name__}: {exc.strerror or 'failed'}{name}"


def folder_problem(traces_dir: Path) -> str:
    """Why traces cannot be written to ``traces_dir`` ("" when they can, or it can be made)."""
    if traces_dir.exists() and not traces_dir.is_dir():
        return "traces folder unusable: <home>/traces exists and is not a folder"
    if traces_dir.is_dir() and not os.access(traces_dir, os.W_OK | os.X_OK):
        return "traces folder unusable: <home>/traces is not writable"
    return ""


def read_traces(traces_dir: Path | str, *, last: int | None = None, where: str = "") -> Any:
    """Every trace row in the segments as a polars DataFrame, newest first (``last`` limits).

    Read with an in-memory DuckDB, never the warehouse; malformed lines are skipped."""
    import duckdb
    import polars as pl

    files = sorted(str(p) for p in Path(traces_dir).glob("*.jsonl") if p.stat().st_size)
    if not files:
        return pl.DataFrame(schema={name: _polars_type(sql) for name, sql in TRACE_COLUMNS.items()})
    columns = "{" + ", ".join(f"'{k}': '{v}'" for k, v in TRACE_COLUMNS.items()) + "}"
    sql = (
        f"SELECT * FROM read_json(?, format='newline_delimited', columns={columns}, ignore_errors=true) "
        f"WHERE trace_id IS NOT NULL {('AND ' + where) if where else ''} ORDER BY occurred_at DESC"
        + (f" LIMIT {int(last)}" if last else "")
    )
    with duckdb.connect() as con:
        return pl.from_arrow(con.sql(sql, params=[files]).to_arrow_table())


def _polars_type(sql: str) -> Any:
    import polars as pl

    return {"TIMESTAMP": pl.Datetime("us"), "BOOLEAN": pl.Boolean}.get(sql, pl.String)


def last_traces(traces_dir: Path | str, n: int = 10) -> Any:
    """The newest ``n`` traces, the columns `infra-rag traces` shows."""
    import polars as pl

    frame = read_traces(traces_dir, last=n)
    total = pl.col("timings_json").str.json_path_match("$.total")
    return frame.select(
        "occurred_at",
        "origin",
        "index_version",
        pl.col("retrieval_config_name").alias("config"),
        "outcome",
        "method",
        "question",
        total.alias("total_ms"),
        "trace_id",
    )


def load_into_warehouse(warehouse: Any, traces_dir: Path | str) -> tuple[int, int]:
    """Copy segment rows not yet in the warehouse's ``traces`` table; (new rows, rows seen)."""
    frame = read_traces(traces_dir)
    return warehouse.append_missing("traces", frame, "trace_id"), frame.height


_SINKS: dict[str, TraceSink] = {}
_SINKS_LOCK = threading.Lock()


def process_sink(traces_dir: Path | str) -> TraceSink:
    """The one writer of this process for ``traces_dir`` (created on first use, closed at exit)."""
    import atexit

    key = str(Path(traces_dir).resolve())
    with _SINKS_LOCK:
        sink = _SINKS.get(key)
        if sink is None or sink._stop.is_set():
            sink = _SINKS[key] = TraceSink(key)
            atexit.register(sink.close)
        return sink
