"""Chunk vectors in LanceDB: one immutable table per index version.

Layout: ``<home>/lancedb/chunks_<sanitized version>``. An index version never changes after
it is built, so a table per version makes rollback and deletion a table drop and lets every
query run without a ``version = ...`` filter.

Atomicity: LanceDB OSS has no ``rename_table`` (it raises ``NotImplementedError: not
supported in LanceDB OSS``), so there is no stage-then-rename. ``create_table(mode="overwrite")``
is still all-or-nothing: Lance writes new data files first and publishes them with a single
atomic manifest commit, so readers see either the previous complete version or the new one,
never a mix, and a crash mid-write leaves the previous version current. Old versions stay on
disk until ``table.optimize(cleanup_older_than=...)`` prunes them.

The vectors stage writes a version in batches (``embed_batches``): the first replaces any
earlier table and each later batch is its own commit, so a build that dies midway leaves a
part-written table, which the vectors check (rows = chunks) fails and a rebuild replaces.

Search over these tables: rag/search/vector_search.py.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lancedb.db import LanceDBConnection

from infra_rag_assets.rag.index.embedding import Embedder, ModelInfo, Progress
from infra_rag_assets.rag.index.embedding_cache import CacheStats, EmbeddingCache, vector_matrix

_META_KEYS = ("model_id", "weights_hash", "dimension", "metric", "max_seq_length", "version")

_ROW_FIELDS = [
    pa.field("chunk_id", pa.string(), nullable=False),
    pa.field("doc_id", pa.string()),
    pa.field("project", pa.string()),
    pa.field("source", pa.string()),
    pa.field("page_kind", pa.string()),
    pa.field("section_path", pa.string()),
    pa.field("pages", pa.list_(pa.int32())),
    pa.field("text", pa.string()),
]


@dataclass(frozen=True)
class TableStats:
    rows: int
    table: str
    bytes_on_disk: int | None  # whole table dir incl. superseded versions; None for object stores
    lance_version: int


def table_name(version: str) -> str:
    """``chunks_<version>`` with characters LanceDB rejects replaced by ``_``.

    When replacement happened a short hash of the raw version is appended, so distinct
    versions such as ``2024:01`` and ``2024_01`` never share a table.
    """
    clean = re.sub(r"[^A-Za-z0-9_.-]", "_", version)
    if clean != version or not clean:
        clean = f"{clean}_{hashlib.sha256(version.encode()).hexdigest()[:8]}"
    return f"chunks_{clean}"


def _schema(model: ModelInfo, version: str) -> pa.Schema:
    meta = {**model.to_dict(), "version": version}
    metadata = {k: str(meta[k]) for k in _META_KEYS}
    vector = pa.field("vector", pa.list_(pa.float32(), model.dimension), nullable=False)
    return pa.schema([*_ROW_FIELDS, vector], metadata=metadata)


def _to_arrow(rows: list[dict] | pa.Table, vectors: np.ndarray, schema: pa.Schema) -> pa.Table:
    """Rows + vectors as one table in exactly ``schema`` (missing optional columns -> null)."""
    row_schema = pa.schema(_ROW_FIELDS)
    if not isinstance(rows, pa.Table):
        rows = pa.Table.from_pylist(list(rows), schema=row_schema)
    for field in row_schema:
        if field.name not in rows.column_names:
            rows = rows.append_column(field.name, pa.nulls(rows.num_rows, field.type))
    base = rows.select(row_schema.names).cast(row_schema)
    dim = schema.field("vector").type.list_size
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape != (base.num_rows, dim):
        raise ValueError(f"vectors have shape {matrix.shape}, expected ({base.num_rows}, {dim})")
    column = pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel()), dim)
    return base.append_column(schema.field("vector"), column).replace_schema_metadata(schema.metadata)


def dir_bytes(uri: str | Path) -> int | None:
    """Bytes under a local directory (or file:// URI); None for object stores or a missing path."""
    uri = str(uri)
    path = Path(uri.removeprefix("file://"))
    if ("://" in uri and not uri.startswith("file://")) or not path.exists():
        return None
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def write_vectors(
    db_uri: str, version: str, rows: list[dict] | pa.Table, vectors: np.ndarray, model: ModelInfo
) -> TableStats:
    """(Re)write the table for ``version`` in one commit; a re-materialisation replaces it, never appends."""
    return write_vector_batches(db_uri, version, [(rows, vectors)], model)


def write_vector_batches(
    db_uri: str, version: str, batches: Iterable[tuple[list[dict] | pa.Table, np.ndarray]], model: ModelInfo
) -> TableStats:
    """(Re)write ``version``'s table from (rows, vectors) batches: the first replaces any earlier
    table, each later one is appended, so memory is one batch. Chunk ids must be distinct and
    non-null within a batch, and every batch's ids must sort after the previous batch's."""
    schema, name, db = _schema(model, version), table_name(version), _connect(db_uri)
    table, last_id = None, None
    for rows, vectors in batches:
        data = _to_arrow(rows, vectors, schema)
        ids = data.column("chunk_id")
        if ids.null_count or pc.count_distinct(ids).as_py() != data.num_rows:
            raise ValueError("every row needs a distinct, non-null chunk_id")
        if data.num_rows == 0 and table is not None:
            continue
        if last_id is not None and data.num_rows and pc.min(ids).as_py() <= last_id:
            raise ValueError("vector batches must come in increasing chunk_id order")
        last_id = pc.max(ids).as_py() if data.num_rows else last_id
        if table is None:
            mode = "overwrite" if name in db else "create"  # "overwrite" of nothing logs a Lance WARN
            table = db.create_table(name, data, schema=schema, mode=mode)
        else:
            table.add(data)
    if table is None:
        raise ValueError("no vector batches to write")
    return TableStats(
        rows=table.count_rows(), table=name, bytes_on_disk=dir_bytes(table.uri), lance_version=table.version
    )


def _connect(db_uri: str) -> LanceDBConnection:
    """A local or object-store URI connects to a ``LanceDBConnection`` (only LanceDB Cloud's
    ``db://`` gives a remote one, which has neither ``in`` nor ``drop_table(ignore_missing=)``)."""
    return cast(LanceDBConnection, lancedb.connect(db_uri))


def open_table(db_uri: str, version: str) -> Any:
    return _connect(db_uri).open_table(table_name(version))


def table_exists(db_uri: str, version: str) -> bool:
    return table_name(version) in _connect(db_uri)


def read_model_info(db_uri: str, version: str) -> dict[str, Any]:
    """The model facts stored in the table's Arrow schema metadata at build time."""
    raw = open_table(db_uri, version).schema.metadata or {}
    info = {k.decode(): v.decode() for k, v in raw.items() if k.decode() in _META_KEYS}
    for key in ("dimension", "max_seq_length"):
        if key in info:
            info[key] = int(info[key])
    return info


def read_vectors(db_uri: str, version: str) -> dict[str, np.ndarray]:
    """chunk_id -> stored (L2-normalised) vector of every row of the version's table."""
    table = open_table(db_uri, version)
    ids, matrix = ids_and_vectors(table, table.count_rows())
    return dict(zip(ids, matrix))


def iter_vectors(db_uri: str, version: str, batch_rows: int = 16_384) -> Iterator[tuple[list[str], np.ndarray]]:
    """(chunk ids, vectors) of the version's table, ``batch_rows`` at a time: memory bounded by a
    batch, not by the version (~25 MB of float32 a batch at 384 dimensions)."""
    table = open_table(db_uri, version)
    dim = table.schema.field("vector").type.list_size
    query = table.search().select(["chunk_id", "vector"]).limit(table.count_rows())
    for batch in query.to_batches(batch_rows):
        yield batch["chunk_id"].to_pylist(), vector_matrix(batch["vector"], dim)


def ids_and_vectors(table: Any, rows: int) -> tuple[list[str], np.ndarray]:
    """Every row's chunk id and vector, reading those two columns only (the dimension is the
    vector column's fixed list size, so no second read of the table's metadata)."""
    data = table.search().select(["chunk_id", "vector"]).limit(rows).to_arrow()
    return data["chunk_id"].to_pylist(), vector_matrix(data["vector"], table.schema.field("vector").type.list_size)


def count_rows(db_uri: str, version: str) -> int:
    return open_table(db_uri, version).count_rows()


def drop_version(db_uri: str, version: str) -> None:
    """Delete the table of ``version``; a missing table is not an error."""
    _connect(db_uri).drop_table(table_name(version), ignore_missing=True)


@dataclass(frozen=True)
class VectorBuild:
    table: TableStats
    cache: CacheStats  # summed over batches: a text repeated in a later batch counts as a hit
    content_hash: str  # stable_hash([weights hash, [[chunk_id, embed_hash], ...]]), as before streaming


def embed_batches(
    embedder: Embedder,
    cache: EmbeddingCache,
    batches: Iterable[Any],
    db_uri: str,
    version: str,
    *,
    total: int,
    batch_size: int,
    progress: Progress | None = None,
) -> VectorBuild:
    """Embed ``batches`` (polars frames, in chunk-id order) of chunk rows (``context``, ``text``,
    ``embed_hash`` and the table's row columns) and write them as ``version``'s table a batch at
    a time (``Warehouse.chunk_batches``), so memory is one batch whatever the version's size;
    ``progress(chunks done, total)``. Lance commits each append, so a build that fails midway
    leaves a part-written table, which the vectors parity check reports and a rebuild replaces."""
    from .config import StableRowsHash
    from .corpus_chunks import embed_input
    from .embedding_cache import embed_with_cache

    digest = StableRowsHash(embedder.weights_hash)
    per_batch: list[CacheStats] = []

    def embedded() -> Iterator[tuple[pa.Table, np.ndarray]]:
        done = 0
        for frame in batches:
            texts = [embed_input(c, t) for c, t in zip(frame["context"], frame["text"])]
            matrix, stats = embed_with_cache(embedder, cache, texts, batch_size=batch_size)
            per_batch.append(stats)
            digest.add(frame.select("chunk_id", "embed_hash").rows())
            done += frame.height
            if progress is not None:
                progress(done, total)
            yield frame.to_arrow(), matrix

    table = write_vector_batches(db_uri, version, embedded(), embedder.info)
    stats = CacheStats(
        hits=sum(s.hits for s in per_batch),
        misses=sum(s.misses for s in per_batch),
        seconds_embedding=sum(s.seconds_embedding for s in per_batch),
    )
    return VectorBuild(table, stats, digest.hexdigest(16))
