"""Trace segments: the writer never drops a row (a full queue is written by the caller and
counted), torn lines from a killed writer are skipped, segments rotate, and loading them into
the warehouse is idempotent."""

from __future__ import annotations

import threading

import pytest

from infra_rag_assets.rag.operate.traces import TraceSink, error_row, load_into_warehouse, read_traces
from infra_rag_assets.rag.operate.warehouse import Warehouse

pytestmark = pytest.mark.unit


def _row(i: int) -> dict:
    return error_row(origin="test", version="v1", config_name="c", question=f"q{i}", error="")


def test_full_queue_writes_in_the_caller_and_counts(tmp_path):
    sink = TraceSink(tmp_path, queue_size=1)
    gate = threading.Event()
    original = sink._write

    def slow_write(rows):  # hold the writer thread so the one-slot queue fills
        if threading.current_thread().name == "trace-writer":
            gate.wait(10)
        original(rows)

    sink._write = slow_write
    rows = [_row(i) for i in range(20)]
    for row in rows:
        sink.submit(row)
    gate.set()
    sink.close()
    assert sink.stats["queue_full"] >= 17 and sink.stats["written"] == 20
    assert set(read_traces(tmp_path)["trace_id"]) == {r["trace_id"] for r in rows}
    assert sink.health()["ok"] and sink.health()["queue_full"] == sink.stats["queue_full"]


def test_concurrent_submitters_lose_nothing(tmp_path):
    sink = TraceSink(tmp_path, queue_size=50)
    rows = [[_row(t * 1000 + i) for i in range(250)] for t in range(8)]
    threads = [threading.Thread(target=lambda batch=b: [sink.submit(r) for r in batch]) for b in rows]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sink.flush()
    frame = read_traces(tmp_path)
    assert frame.height == 2000 and frame["trace_id"].n_unique() == 2000
    sink.close()


def test_torn_lines_are_skipped_and_segments_rotate(tmp_path):
    sink = TraceSink(tmp_path, segment_max_bytes=2_000)
    for i in range(30):
        sink.submit(_row(i))
        if i % 5 == 4:
            sink.flush()  # rotation happens between written batches
    sink.close()
    segments = sorted(tmp_path.glob("*.jsonl"))
    assert len(segments) > 1
    with segments[-1].open("a") as stream:  # what a writer killed mid-line leaves behind
        stream.write('{"trace_id": "torn", "occurred_at": "2026-')
    assert read_traces(tmp_path).height == 30
    assert read_traces(tmp_path, last=5).height == 5


def test_loading_into_the_warehouse_is_idempotent(tmp_path):
    sink = TraceSink(tmp_path / "traces")
    for i in range(12):
        sink.submit(_row(i))
    sink.close()
    warehouse = Warehouse(tmp_path / "warehouse.duckdb")
    assert load_into_warehouse(warehouse, tmp_path / "traces") == (12, 12)
    assert load_into_warehouse(warehouse, tmp_path / "traces") == (0, 12)
    assert warehouse.rows("SELECT count(DISTINCT trace_id) FROM traces")[0][0] == 12


@pytest.mark.unit
def test_a_warehouse_made_before_the_reader_columns_gains_them_on_open(tmp_path):
    """answer_results rows now carry short_answer; an older warehouse file must take them."""
    import duckdb
    import polars as pl

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE answer_results (index_version VARCHAR, run_id VARCHAR)")
    con.close()
    frame = pl.DataFrame({"run_id": ["r"], "short_answer": ["a span"], "correctness_f1_full_text": [0.5]})
    assert Warehouse(path).replace_partition("answer_results", "v1", frame) == 1
    assert Warehouse(path).rows("SELECT short_answer, correctness_f1_full_text FROM answer_results") == [
        ("a span", 0.5)
    ]
