"""vectors (LanceDB) and lexical_index (Tantivy) for one index version, plus parity checks."""

import time

import dagster as dg
import polars as pl

from ...rag.index.config import BuildSettings, stable_hash
from ...rag.index.serving_snapshot import snapshot_files, snapshot_from_warehouse
from ..partitions import index_version
from ..resources import DataHomeResource, EmbedderResource, stage_device

VECTOR_BATCH_ROWS = 8192  # chunks embedded and written per batch (~12 MB of vectors at 384 dimensions)


def _chunks(store: DataHomeResource, version: str) -> pl.DataFrame:
    frame = store.data_home().warehouse().chunks_of(version)
    if frame.is_empty():
        raise dg.Failure(f"no chunks for {version}: materialize chunks first")
    return frame


def _config(store: DataHomeResource, version: str) -> BuildSettings:
    return BuildSettings.from_dict(store.data_home().warehouse().version_config(version) or {})


@dg.asset(
    partitions_def=index_version,
    deps=["chunks", "domain_model"],
    group_name="indexing",
    kinds={"lancedb", "pytorch"},
    owners=["team:search-platform"],
    pool="lancedb_writer",
    description="Normalized sentence-transformers vectors of context line + chunk text, one LanceDB table "
    "per index version, made with the version's domain_model (adapted or base), whose id, weights hash, "
    "dimension and metric the table metadata records. Vectors come from a content-addressed cache keyed by "
    "(model hash, exact text), so an unchanged rebuild re-embeds nothing.",
)
def vectors(
    context: dg.AssetExecutionContext, store: DataHomeResource, embedding: EmbedderResource
) -> dg.MaterializeResult:
    from ...rag.index.embedding_cache import EmbeddingCache
    from ...rag.index.vector_store import embed_batches

    version = context.partition_key
    hardware = stage_device(embedding.hardware)
    warehouse, config = store.data_home().warehouse(), _config(store, version)
    total = warehouse.chunk_count(version)
    if not total:
        raise dg.Failure(f"no chunks for {version}: materialize chunks first")
    expected, model_id = expected_model_hash(store, version, config)
    embedder = embedding.embedder(model_id)
    if expected and embedder.weights_hash != expected:
        raise dg.Failure(
            f"model {model_id} has weights {embedder.weights_hash[:12]}, but {version} "
            f"needs {expected[:12]}: build a new index version"
        )
    started = time.perf_counter()
    built = embed_batches(  # a batch of chunks at a time: memory does not grow with the version
        embedder,
        EmbeddingCache(store.data_home().cache_dir()),
        warehouse.chunk_batches(version, rows=VECTOR_BATCH_ROWS),
        store.data_home().vectors_uri(),
        version,
        total=total,
        batch_size=embedding.batch_size_on(hardware),
        progress=_embed_progress(context),
    )
    info, table, stats = embedder.info, built.table, built.cache
    total = stats.hits + stats.misses
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": table.rows,
            "table": table.table,
            "lancedb_uri": dg.MetadataValue.path(store.data_home().vectors_uri()),
            "model_id": info.model_id,
            "model_weights_hash": info.weights_hash,
            "dimension": info.dimension,
            "metric": info.metric,
            "cache_hits": stats.hits,
            "texts_embedded": stats.misses,
            "cache_hit_rate": round(stats.hits / total, 4) if total else 1.0,
            "seconds_embedding": round(stats.seconds_embedding, 2),
            "chunks_per_second": round(stats.misses / stats.seconds_embedding, 1) if stats.seconds_embedding else 0.0,
            "seconds_total": round(time.perf_counter() - started, 2),
            "bytes_on_disk": table.bytes_on_disk or 0,
            "batch_size": embedding.batch_size_on(hardware),
            "rows_per_write": VECTOR_BATCH_ROWS,
            **hardware.metadata(),
        },
        data_version=dg.DataVersion(built.content_hash),
    )


def expected_model_hash(store: DataHomeResource, version: str, config: BuildSettings) -> tuple[str, str]:
    """(weights hash, model id) ``version`` must be embedded with: the configured base model's, or
    the adapted model's from its training record ("" when unknown: the base model could not be
    hashed at registration)."""
    import json

    from ...rag.adapt.finetune import TRAINING_JSON
    from ...rag.adapt.version_model import model_for_version

    model = model_for_version(store.data_home(), version, config)
    if not model.adapted:
        return config.model_hash, model.model_id
    record = model.directory(store.data_home()) / TRAINING_JSON
    if not record.is_file():
        raise dg.Failure(
            f"{version} is adapted but its model {model.key} is not trained: materialize "
            f"domain_model for {version} first"
        )
    return json.loads(record.read_text())["trained_weights_hash"], model.model_id


def _embed_progress(context: dg.AssetExecutionContext):
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if done == total or time.monotonic() - last[0] > 10:
            last[0] = time.monotonic()
            context.log.info(f"embedded {done}/{total} new texts")

    return progress


@dg.asset(
    partitions_def=index_version,
    deps=["chunks"],
    group_name="indexing",
    kinds={"tantivy"},
    owners=["team:search-platform"],
    pool="tantivy_writer",
    description="BM25 index (Tantivy) of context line + chunk text with identifier-aware analysis "
    "(maxSurge → maxsurge, max, surge) and English stemming; title and section boosted. Built in a "
    "staging directory and renamed into place only after commit. Also writes the version's serving "
    "snapshot (chunk catalog as Parquet + manifest), which the query path reads instead of the warehouse.",
)
def lexical_index(context: dg.AssetExecutionContext, store: DataHomeResource) -> dg.MaterializeResult:
    from ...rag.index.lexical_store import LexicalDoc, build_index
    from ...rag.index.page_index import page_docs, page_index_dir
    from ...rag.index.vector_store import dir_bytes

    version = context.partition_key
    frame = _chunks(store, version)
    docs = (
        LexicalDoc(
            chunk_id=r["chunk_id"],
            doc_id=r["doc_id"],
            project=r["project"],
            source=r["source"],
            page_kind=r["page_kind"],
            section_path=r["section_path"],
            title=r["title"],
            text=r["text"],
            pages=list(r["pages"] or []),
        )
        for r in frame.iter_rows(named=True)
    )
    target = store.data_home().version(version).tantivy
    started = time.perf_counter()
    count = build_index(target, docs)
    # Pages last: a reader that finds the page index also finds the chunk index it belongs to.
    page_count = build_index(page_index_dir(target), page_docs(frame.iter_rows(named=True)))
    # Last, after both indexes: a reader that finds the manifest finds everything it names.
    snapshot = snapshot_from_warehouse(store.data_home(), version, frame.iter_rows(named=True))
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": count,
            "path": dg.MetadataValue.path(str(target)),
            "page_documents": page_count,
            "serving_snapshot": dg.MetadataValue.path(str(store.data_home().version(version).snapshot)),
            "serving_catalog_sha256": snapshot.catalog_sha256[:16],
            # files later stages fitted on these same chunks, kept from the previous snapshot
            "serving_files_kept": ", ".join(snapshot_files(store.data_home().serving_root(), version)) or "none",
            "page_index_path": dg.MetadataValue.path(str(page_index_dir(target))),
            "seconds_indexing": round(time.perf_counter() - started, 2),
            "bytes_on_disk": (dir_bytes(target) or 0) + (dir_bytes(page_index_dir(target)) or 0),
        },
        data_version=dg.DataVersion(stable_hash(frame.select("chunk_id", "text_hash").rows(), 16)),
    )


def _chunk_count(store: DataHomeResource, version: str) -> int:
    return store.data_home().warehouse().chunk_count(version)


@dg.asset_check(
    asset=vectors,
    blocking=True,
    partitions_def=index_version,
    description="Vector rows == chunk count, and the table's model hash is the version's "
    "model (its domain_model: adapted or the configured base) (ERROR, blocking).",
)
def vectors_match_chunks_and_model(
    context: dg.AssetCheckExecutionContext, store: DataHomeResource
) -> dg.AssetCheckResult:
    from ...rag.index.vector_store import count_rows, read_model_info

    version = context.partition_key
    chunks, rows = _chunk_count(store, version), count_rows(store.data_home().vectors_uri(), version)
    built = read_model_info(store.data_home().vectors_uri(), version)
    expected, _ = expected_model_hash(store, version, _config(store, version))
    model_ok = not expected or built.get("weights_hash") == expected
    return dg.AssetCheckResult(
        passed=chunks == rows and model_ok,
        metadata={
            "chunks": chunks,
            "vector_rows": rows,
            "table_model_hash": str(built.get("weights_hash", "")),
            "expected_model_hash": expected,
        },
    )


@dg.asset_check(
    asset=lexical_index,
    blocking=True,
    partitions_def=index_version,
    description="Lexical documents == chunk count, and page-index documents == pages with chunks, "
    "for the version (ERROR, blocking).",
)
def lexical_matches_chunks(context: dg.AssetCheckExecutionContext, store: DataHomeResource) -> dg.AssetCheckResult:
    from ...rag.index.lexical_store import LexicalSearcher
    from ...rag.index.page_index import open_page_searcher

    version = context.partition_key
    docs = LexicalSearcher.open(store.data_home().version(version).tantivy).doc_count()
    page_searcher = open_page_searcher(store.data_home().version(version).tantivy)
    page_docs = page_searcher.doc_count() if page_searcher else -1
    chunks = _chunk_count(store, version)
    pages = store.data_home().warehouse().page_count(version)
    return dg.AssetCheckResult(
        passed=docs == chunks and page_docs == pages,
        metadata={"chunks": chunks, "lexical_docs": docs, "pages_with_chunks": pages, "page_index_docs": page_docs},
    )
