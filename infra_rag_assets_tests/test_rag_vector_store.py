"""Per-version LanceDB tables: model pinning, exact cosine search, prefilters, overwrite."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from infra_rag_assets.rag.index.config import StableRowsHash, stable_hash
from infra_rag_assets.rag.index.embedding import DEFAULT_MODEL, Embedder, ModelMismatch
from infra_rag_assets.rag.index.vector_store import (
    count_rows,
    drop_version,
    read_model_info,
    read_vectors,
    table_exists,
    table_name,
    write_vector_batches,
    write_vectors,
)
from infra_rag_assets.rag.search.vector_search import VectorSearcher, build_where

pytestmark = pytest.mark.unit

# (chunk_id, project, source, page_kind, section_path, pages, text)
CHUNKS = [
    (
        "k8s-1",
        "kubernetes",
        "web",
        "reference",
        "Workloads > Pods",
        [],
        "A Pod is the smallest deployable unit of computing in Kubernetes.",
    ),
    (
        "k8s-2",
        "kubernetes",
        "web",
        "guide",
        "Networking > Services",
        [],
        "A Service exposes a set of Pods behind a stable virtual IP address.",
    ),
    (
        "k8s-3",
        "kubernetes",
        "pdf",
        "guide",
        "Storage > Volumes",
        [3, 4],
        "PersistentVolumeClaims request durable storage for stateful workloads.",
    ),
    (
        "tf-1",
        "terraform",
        "web",
        "reference",
        "State > Backends",
        [],
        "Terraform stores state remotely in an S3 backend with DynamoDB locking.",
    ),
    (
        "tf-2",
        "terraform",
        "pdf",
        "guide",
        "Modules_v2 > Inputs",
        [1],
        "Module input variables parameterise reusable Terraform configuration.",
    ),
    (
        "prom-1",
        "prometheus",
        "web",
        "reference",
        "Querying > PromQL",
        [],
        "PromQL rate() computes the per-second increase of a counter.",
    ),
    (
        "prom-2",
        "prometheus",
        "pdf",
        "guide",
        "Alerting > Rules",
        [2, 3],
        "Alerting rules fire when a PromQL expression stays true for a duration.",
    ),
    (
        "vault-1",
        "vault",
        "web",
        "guide",
        "Secrets > Database",
        [],
        "Vault generates short-lived database credentials on demand.",
    ),
    (
        "nginx-1",
        "nginx",
        "web",
        "reference",
        "Modules%x > Proxy",
        [],
        "proxy_pass forwards requests to an upstream server group.",
    ),
    (
        "docker-1",
        "docker",
        "pdf",
        "guide",
        "Build > Cache",
        [1, 2],
        "Docker reuses cached image layers when instructions are unchanged.",
    ),
]


def _rows() -> list[dict]:
    keys = ("chunk_id", "project", "source", "page_kind", "section_path", "pages", "text")
    return [dict(zip(keys, c), doc_id=c[0].split("-")[0]) for c in CHUNKS]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(DEFAULT_MODEL)


@pytest.fixture(scope="module")
def vectors(embedder) -> np.ndarray:
    return embedder.encode([c[-1] for c in CHUNKS])


@pytest.fixture()
def searcher(tmp_path, embedder, vectors) -> VectorSearcher:
    db = str(tmp_path / "lancedb")
    write_vectors(db, "v1", _rows(), vectors, embedder.info)
    return VectorSearcher.open(db, "v1", embedder)


def test_write_records_model_and_stats(tmp_path, embedder, vectors):
    db = str(tmp_path / "lancedb")
    stats = write_vectors(db, "2024-06-01T12:00", _rows(), vectors, embedder.info)
    assert stats.rows == len(CHUNKS) and stats.table == table_name("2024-06-01T12:00")
    assert stats.bytes_on_disk and stats.bytes_on_disk > vectors.nbytes
    info = read_model_info(db, "2024-06-01T12:00")
    assert info["weights_hash"] == embedder.info.weights_hash
    assert info["dimension"] == 384 and info["metric"] == "cosine" and info["version"] == "2024-06-01T12:00"


def test_table_names_are_valid_and_distinct():
    assert table_name("v1.2-rc") == "chunks_v1.2-rc"
    assert table_name("2024:01") != table_name("2024_01")
    assert table_name("a b").startswith("chunks_a_b_")


@pytest.mark.parametrize(
    "query, expected",
    [
        ("How do I expose pods with a stable IP?", "k8s-2"),
        ("where does terraform keep its state", "tf-1"),
        ("per-second rate of a counter metric", "prom-1"),
        ("temporary credentials for a database", "vault-1"),
    ],
)
def test_semantically_closest_chunk_ranks_first(searcher, query, expected):
    hits = searcher.search(query, k=3)
    assert hits[0][0] == expected
    sims = [s for _, s in hits]
    assert sims == sorted(sims, reverse=True) and -1.0 <= sims[-1] <= sims[0] <= 1.0 + 1e-6


def test_search_by_vector_matches_search_by_text(searcher, vectors):
    hits = searcher.search(vectors[3], k=1)
    assert hits[0][0] == "tf-1" and hits[0][1] == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize(
    "filters, allowed",
    [
        ({"project": "kubernetes"}, {"k8s-1", "k8s-2", "k8s-3"}),
        ({"source": "pdf"}, {"k8s-3", "tf-2", "prom-2", "docker-1"}),
        ({"page_kind": "reference", "source": "web"}, {"k8s-1", "tf-1", "prom-1", "nginx-1"}),
        ({"project": ["vault", "nginx"]}, {"vault-1", "nginx-1"}),
        ({"page": 3}, {"k8s-3", "prom-2"}),
        ({"section_prefix": "Modules_"}, {"tf-2"}),  # "_" is literal, not a LIKE wildcard
        ({"section_prefix": "Modules%"}, {"nginx-1"}),
    ],
)
def test_filters_return_only_matches_and_still_fill_k(searcher, filters, allowed):
    hits = searcher.search("terraform state backend", k=len(allowed), filters=filters)
    assert {cid for cid, _ in hits} == allowed
    many = searcher.search("terraform state backend", k=20, filters=filters)
    assert {cid for cid, _ in many} == allowed


def test_filter_without_matches_and_unknown_filter(searcher):
    assert searcher.search("pods", k=5, filters={"project": "O'Reilly"}) == []
    with pytest.raises(ValueError):
        searcher.search("pods", k=5, filters={"colour": "blue"})
    assert build_where({"section_prefix": "a\\b"}) == "(section_path LIKE 'a\\\\b%' ESCAPE '\\')"


def test_index_built_by_another_model_is_refused(tmp_path, embedder, vectors):
    db = str(tmp_path / "lancedb")
    other = dataclasses.replace(embedder.info, model_id="someone/else", weights_hash="0" * 64)
    write_vectors(db, "v-other", _rows(), vectors, other)
    with pytest.raises(ModelMismatch, match="someone/else"):
        VectorSearcher.open(db, "v-other", embedder)


def test_rematerialisation_overwrites_instead_of_appending(tmp_path, embedder, vectors):
    db = str(tmp_path / "lancedb")
    write_vectors(db, "v1", _rows(), vectors, embedder.info)
    table = pa.Table.from_pylist(_rows()[:6])
    stats = write_vectors(db, "v1", table, vectors[:6], embedder.info)
    assert stats.rows == 6 == count_rows(db, "v1")
    hits = VectorSearcher.open(db, "v1", embedder).search("kubernetes", k=20)
    assert len(hits) == 6 and len({cid for cid, _ in hits}) == 6
    write_vectors(db, "v2", _rows(), vectors, embedder.info)
    drop_version(db, "v1")
    assert not table_exists(db, "v1") and table_exists(db, "v2")
    drop_version(db, "v1")  # idempotent


def test_batches_make_the_same_table_as_one_write(tmp_path, embedder, vectors):
    db = str(tmp_path / "lancedb")
    rows = sorted(_rows(), key=lambda r: r["chunk_id"])
    order = [_rows().index(r) for r in rows]
    batches = [(rows[i : i + 3], vectors[order[i : i + 3]]) for i in range(0, len(rows), 3)]
    write_vector_batches(db, "batched", batches, embedder.info)
    write_vectors(db, "whole", rows, vectors[order], embedder.info)
    assert count_rows(db, "batched") == len(CHUNKS)
    batched, whole = read_vectors(db, "batched"), read_vectors(db, "whole")
    assert batched.keys() == whole.keys() and all(np.array_equal(batched[k], whole[k]) for k in whole)
    with pytest.raises(ValueError, match="increasing chunk_id order"):  # a repeat across batches
        write_vector_batches(db, "again", [batches[0], batches[0]], embedder.info)


def test_bad_input_is_rejected_before_writing(tmp_path, embedder, vectors):
    db = str(tmp_path / "db")
    with pytest.raises(ValueError, match="shape"):
        write_vectors(db, "v1", _rows(), vectors[:5], embedder.info)
    with pytest.raises(ValueError, match="distinct"):
        write_vectors(db, "v1", _rows()[:2] + _rows()[:1], vectors[:3], embedder.info)
    assert not table_exists(db, "v1")


def _lancedb_scan(searcher: VectorSearcher, query: np.ndarray, k: int) -> list[tuple[str, float]]:
    hits = (
        searcher.table.search(query)
        .distance_type("cosine")
        .bypass_vector_index()
        .select(["chunk_id", "_distance"])
        .limit(k)
        .to_arrow()
    )
    return [(cid, 1.0 - d) for cid, d in zip(hits["chunk_id"].to_pylist(), hits["_distance"].to_numpy())]


@pytest.mark.parametrize("k", [1, 3, len(CHUNKS), 50])
def test_memory_scan_ranks_exactly_like_lancedb(searcher, embedder, k):
    """Unfiltered queries rank in process; order and scores must be LanceDB's flat scan's."""
    for question in ["stable IP for pods", "terraform remote state", "cached docker layers", "zzz"]:
        query = embedder.encode([question])[0]
        ours, theirs = searcher.search(query, k), _lancedb_scan(searcher, query, k)
        assert [cid for cid, _ in ours] == [cid for cid, _ in theirs]
        np.testing.assert_allclose([s for _, s in ours], [s for _, s in theirs], atol=1e-5)
    assert searcher._scan is not None  # the in-process path was the one taken


def test_large_table_and_unnormalised_queries_fall_back_or_normalise(tmp_path, embedder, vectors):
    db = str(tmp_path / "lancedb")
    write_vectors(db, "v1", _rows(), vectors, embedder.info)
    small_limit = VectorSearcher.open(db, "v1", embedder, memory_scan_max_rows=len(CHUNKS) - 1)
    query = embedder.encode(["how are alerting rules evaluated"])[0]
    ours, theirs = small_limit.search(query, 4), _lancedb_scan(small_limit, query, 4)
    assert [cid for cid, _ in ours] == [cid for cid, _ in theirs]
    np.testing.assert_allclose([s for _, s in ours], [s for _, s in theirs], rtol=1e-6)
    assert small_limit._scan is None  # too many rows to hold: LanceDB scanned
    held = VectorSearcher.open(db, "v1", embedder)
    assert [c for c, _ in held.search(query * 7.0, 4)] == [c for c, _ in held.search(query, 4)]
    assert held.search(query * 7.0, 1)[0][1] == pytest.approx(held.search(query, 1)[0][1], abs=1e-6)


def test_concurrent_first_queries_share_one_scan(searcher, embedder):
    from concurrent.futures import ThreadPoolExecutor

    query = embedder.encode(["persistent storage"])[0]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: searcher.search(query, 3), range(32)))
    assert all(r == results[0] for r in results) and results[0][0][0] == "k8s-3"


def test_operators_bound_the_in_process_scan(tmp_path, embedder, vectors, monkeypatch):
    from infra_rag_assets.rag.search.vector_search import MEMORY_SCAN_ENV

    db = str(tmp_path / "lancedb")
    write_vectors(db, "v1", _rows(), vectors, embedder.info)
    query = embedder.encode(["database credentials"])[0]
    monkeypatch.setenv(MEMORY_SCAN_ENV, "0")
    off = VectorSearcher.open(db, "v1", embedder)
    assert off.search(query, 2)[0][0] == "vault-1" and off._scan is None and off._scan_refused
    monkeypatch.setenv(MEMORY_SCAN_ENV, "100")
    on = VectorSearcher.open(db, "v1", embedder)
    assert on.search(query, 2)[0][0] == "vault-1" and on._scan is not None
    for bad in ("-1", "lots", "1e6"):
        monkeypatch.setenv(MEMORY_SCAN_ENV, bad)
        with pytest.raises(ValueError, match=MEMORY_SCAN_ENV):
            VectorSearcher.open(db, "v1", embedder)


def test_chunks_version_fed_in_batches_equals_the_whole_frame():
    import polars as pl

    from infra_rag_assets.rag.index.corpus_chunks import chunks_version, chunks_version_of

    frame = pl.DataFrame({"chunk_id": [f"c{i}" for i in range(5)], "embed_hash": [f"e{i}" for i in range(5)]})
    assert chunks_version_of([frame[:2], frame[2:]]) == chunks_version(frame.reverse())


def test_rows_hash_fed_in_batches_equals_the_whole_hash():
    rows = [(f"c{i}", f"h{i}") for i in range(7)]
    digest = StableRowsHash("weights")
    for start in range(0, 7, 3):
        digest.add(rows[start : start + 3])
    assert digest.hexdigest(16) == stable_hash(["weights", rows], 16)
    assert StableRowsHash("w").hexdigest() == stable_hash(["w", []])


def test_embedding_a_version_in_batches(tmp_path, embedder):
    """Chunks from the warehouse a batch at a time into the version's table, through the cache."""
    import polars as pl

    from infra_rag_assets.rag.index.embedding_cache import EmbeddingCache
    from infra_rag_assets.rag.index.vector_store import embed_batches
    from infra_rag_assets.rag.operate.warehouse import Warehouse

    warehouse = Warehouse(tmp_path / "warehouse.duckdb")
    rows = sorted(_rows(), key=lambda r: r["chunk_id"])
    frame = pl.DataFrame(rows).with_columns(
        pl.lit("Kubernetes").alias("context"), pl.col("chunk_id").alias("embed_hash")
    )
    warehouse.replace_partition("chunks", "v1", frame)
    db, cache, seen = str(tmp_path / "lancedb"), EmbeddingCache(tmp_path / "cache"), []
    built = embed_batches(
        embedder, cache, warehouse.chunk_batches("v1", rows=3), db, "v1",
        total=len(rows), batch_size=4, progress=lambda done, total: seen.append((done, total)),
    )  # fmt: skip
    assert built.table.rows == len(rows) == count_rows(db, "v1")
    assert built.cache.misses == len(rows) and seen[-1] == (len(rows), len(rows)) and len(seen) == -(-len(rows) // 3)
    assert built.content_hash == stable_hash([embedder.weights_hash, [[r["chunk_id"]] * 2 for r in rows]], 16)
    again = embed_batches(embedder, cache, warehouse.chunk_batches("v1", rows=4), db, "v1",
                          total=len(rows), batch_size=4)  # fmt: skip
    assert again.cache.misses == 0 and again.content_hash == built.content_hash and count_rows(db, "v1") == len(rows)
