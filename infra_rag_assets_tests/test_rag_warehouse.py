"""Warehouse named reads: each returns what its call sites' inline SQL used to return."""

from __future__ import annotations

import time

import polars as pl
import pytest

from infra_rag_assets.rag.operate.warehouse import Warehouse

pytestmark = pytest.mark.unit


@pytest.fixture
def warehouse(tmp_path) -> Warehouse:
    wh = Warehouse(tmp_path / "warehouse.duckdb")
    for version, docs in (("v1", ["k:a", "k:b", "k:c"]), ("v2", ["k:a"])):
        wh.record_version(version, {"chunking": {}}, f"hash-{version}", f"fp-{version}", "test")
        wh.replace_partition("documents", version, pl.DataFrame({"doc_id": docs, "status": ["ok"] * len(docs)}))
        time.sleep(0.01)  # distinct created_at, so "newest" is well defined
    # v1: k:a has two chunks, k:b one, k:c none (a page that parsed to no content)
    wh.replace_partition(
        "chunks",
        "v1",
        pl.DataFrame(
            {
                "chunk_id": ["c3", "c1", "c2"],
                "doc_id": ["k:b", "k:a", "k:a"],
                "ordinal": [0, 1, 0],
                "title": ["B", "A", "A"],
                "text": ["b0", "a1", "a0"],
            }
        ),
    )
    wh.replace_partition(
        "eval_results",
        "v1",
        pl.DataFrame(
            {
                "run_id": ["r1", "r1", "r2"],
                "benchmark": ["b"] * 3,
                "regime": ["serving"] * 3,
                "question_id": ["q1", "q2", "q1"],
                "relevant": [["k:a"], ["k:b"], ["k:a"]],
                "rank": [1, 3, 2],
            }
        ),
    )
    return wh


def test_chunk_reads(warehouse):
    assert warehouse.chunks_of("v1")["chunk_id"].to_list() == ["c1", "c2", "c3"]  # stable: by chunk id
    by_page = warehouse.chunks_of("v1", ("doc_id", "text"), order_by=("doc_id", "ordinal"))
    assert list(by_page.iter_rows()) == [("k:a", "a0"), ("k:a", "a1"), ("k:b", "b0")]
    assert warehouse.chunks_of("v2").is_empty()
    assert warehouse.chunk_count("v1") == 3 and warehouse.chunk_count("v1", ["k:a", "k:c"]) == 2
    assert warehouse.page_count("v1") == 2  # pages with a chunk
    assert warehouse.doc_ids("v1") == {"k:a", "k:b", "k:c"}  # every page record
    assert warehouse.documents_of("v2")["doc_id"].to_list() == ["k:a"]
    assert warehouse.row_count("documents", "v1") == 3
    assert warehouse.versions_with_chunks() == ["v1"]


@pytest.mark.parametrize("rows", [1, 2, 3, 5])
def test_chunk_batches_page_through_every_chunk_once_in_order(warehouse, rows):
    batches = list(warehouse.chunk_batches("v1", ("chunk_id", "text"), rows=rows))
    assert all(0 < b.height <= rows for b in batches)
    assert pl.concat(batches).equals(warehouse.chunks_of("v1", ("chunk_id", "text")))
    assert list(warehouse.chunk_batches("v2")) == []


def test_document_batches_and_chunk_reports(warehouse):
    batches = list(warehouse.document_batches("v1", ("doc_id",), rows=2))
    assert [b["doc_id"].to_list() for b in batches] == [["k:a", "k:b"], ["k:c"]]
    assert sorted(warehouse.chunk_summary("v1")["chars"].to_list()) == [2, 2, 2]
    assert warehouse.chunk_preview("v1", limit=2)["chunk_id"].to_list() == ["c1", "c2"]


def test_partition_replaced_from_batches_in_one_swap(warehouse):
    def frames(fail_after: int | None = None):
        for i in range(3):
            if fail_after is not None and i == fail_after:
                raise RuntimeError("chunking failed")
            yield pl.DataFrame({"chunk_id": [f"n{i}"], "doc_id": ["k:a"], "ordinal": [i], "text": [f"new {i}"]})

    with pytest.raises(RuntimeError):
        warehouse.replace_partition_batches("chunks", "v1", frames(fail_after=2))
    assert warehouse.chunks_of("v1")["chunk_id"].to_list() == ["c1", "c2", "c3"]  # the old rows stay
    assert warehouse.replace_partition_batches("chunks", "v1", frames()) == 3
    assert warehouse.chunks_of("v1")["chunk_id"].to_list() == ["n0", "n1", "n2"]
    assert not [t for t in warehouse.rows("SHOW TABLES") if t[0].startswith("_staging_")]  # staging dropped


def test_version_and_eval_reads(warehouse):
    info = warehouse.version_info("v1")
    assert (info["created_by"], info["config_hash"], info["sources_fingerprint"]) == ("test", "hash-v1", "fp-v1")
    assert warehouse.version_info("nope") is None
    assert warehouse.newest_version_with("documents") == "v2"
    assert warehouse.newest_version_with("chunks") == "v1"
    assert warehouse.newest_version_with("documents", exclude="v2") == "v1"
    assert warehouse.newest_version_with("eval_metrics") is None
    assert warehouse.latest_eval_result("q1", "serving")["run_id"] == "r2"
    assert warehouse.latest_eval_result("q1", "serving", "v2") is None
    assert sorted(warehouse.largest_run_ranks("v1", "serving", "b")) == [("q1", ["k:a"], 1), ("q2", ["k:b"], 3)]
    assert warehouse.release_events() == []
