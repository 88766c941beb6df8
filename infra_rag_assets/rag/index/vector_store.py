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

Search is exact (flat) with perfect recall. A version's table is immutable, so a searcher over
a table of at most ``MEMORY_SCAN_MAX_ROWS`` rows reads its ids and vectors once and ranks an
unfiltered query with one matrix product in process: 2.3 ms at 19k x 384 where LanceDB's own
flat scan takes 27 ms per query (measured 2026-12-02), which is most of a dense query after the
embedding. Filtered queries go to LanceDB, which applies filters *before* ranking so ``k``
matching rows come back whenever they exist. Larger tables (or LanceDB on object storage past
that size) are always scanned by LanceDB; add an IVF_PQ (or IVF_HNSW_SQ) index once a table
passes ~250k-1M rows or latency matters more than exact recall (prefiltering is still honoured).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lancedb.db import LanceDBConnection

from infra_rag_assets import settings
from infra_rag_assets.rag.index.embedding import Embedder, ModelInfo, ModelMismatch, ensure_same_model
from infra_rag_assets.rag.index.embedding_cache import vector_matrix

_META_KEYS = ("model_id", "weights_hash", "dimension", "metric", "max_seq_length", "version")
_EQUALITY_FILTERS = ("project", "source", "page_kind", "doc_id")
MEMORY_SCAN_MAX_ROWS = 250_000  # ~370 MB of float32 at 384 dimensions: above it, LanceDB scans
MEMORY_SCAN_ENV = "INFRA_RAG_MEMORY_SCAN_MAX_ROWS"

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


def memory_scan_limit() -> int:
    """Rows a searcher may hold in process (``INFRA_RAG_MEMORY_SCAN_MAX_ROWS``; 0 = LanceDB always)."""
    return settings.memory_scan_max_rows(MEMORY_SCAN_MAX_ROWS)


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
    """(Re)write the table for ``version``; a re-materialisation replaces it, never appends."""
    schema = _schema(model, version)
    data = _to_arrow(rows, vectors, schema)
    ids = data.column("chunk_id")
    if ids.null_count or pc.count_distinct(ids).as_py() != data.num_rows:
        raise ValueError("every row needs a distinct, non-null chunk_id")
    name = table_name(version)
    db = _connect(db_uri)
    mode = "overwrite" if name in db else "create"  # "overwrite" of nothing logs a Lance WARN
    table = db.create_table(name, data, schema=schema, mode=mode)
    return TableStats(
        rows=table.count_rows(), table=name, bytes_on_disk=dir_bytes(table.uri), lance_version=table.version
    )


def _connect(db_uri: str) -> LanceDBConnection:
    """A local or object-store URI connects to a ``LanceDBConnection`` (only LanceDB Cloud's
    ``db://`` gives a remote one, which has neither ``in`` nor ``drop_table(ignore_missing=)``)."""
    return cast(LanceDBConnection, lancedb.connect(db_uri))


def _open(db_uri: str, version: str) -> Any:
    return _connect(db_uri).open_table(table_name(version))


def table_exists(db_uri: str, version: str) -> bool:
    return table_name(version) in _connect(db_uri)


def read_model_info(db_uri: str, version: str) -> dict[str, Any]:
    """The model facts stored in the table's Arrow schema metadata at build time."""
    raw = _open(db_uri, version).schema.metadata or {}
    info = {k.decode(): v.decode() for k, v in raw.items() if k.decode() in _META_KEYS}
    for key in ("dimension", "max_seq_length"):
        if key in info:
            info[key] = int(info[key])
    return info


def read_vectors(db_uri: str, version: str) -> dict[str, np.ndarray]:
    """chunk_id -> stored (L2-normalised) vector of every row of the version's table."""
    table = _open(db_uri, version)
    ids, matrix = _ids_and_vectors(table, table.count_rows())
    return dict(zip(ids, matrix))


def iter_vectors(db_uri: str, version: str, batch_rows: int = 16_384) -> Iterator[tuple[list[str], np.ndarray]]:
    """(chunk ids, vectors) of the version's table, ``batch_rows`` at a time: memory bounded by a
    batch, not by the version (~25 MB of float32 a batch at 384 dimensions)."""
    table = _open(db_uri, version)
    dim = table.schema.field("vector").type.list_size
    query = table.search().select(["chunk_id", "vector"]).limit(table.count_rows())
    for batch in query.to_batches(batch_rows):
        yield batch["chunk_id"].to_pylist(), vector_matrix(batch["vector"], dim)


def _ids_and_vectors(table: Any, rows: int) -> tuple[list[str], np.ndarray]:
    """Every row's chunk id and vector, reading those two columns only (the dimension is the
    vector column's fixed list size, so no second read of the table's metadata)."""
    data = table.search().select(["chunk_id", "vector"]).limit(rows).to_arrow()
    return data["chunk_id"].to_pylist(), vector_matrix(data["vector"], table.schema.field("vector").type.list_size)


def count_rows(db_uri: str, version: str) -> int:
    return _open(db_uri, version).count_rows()


def drop_version(db_uri: str, version: str) -> None:
    """Delete the table of ``version``; a missing table is not an error."""
    _connect(db_uri).drop_table(table_name(version), ignore_missing=True)


def _quote(value: Any) -> str:
    """A SQL literal: ints stay ints, everything else becomes a quoted string."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        return "'" + str(value).replace("'", "''") + "'"
    return str(int(value))


def _like_prefix(prefix: str) -> str:
    """``LIKE`` pattern matching ``prefix`` literally (``%``, ``_`` and ``\\`` escaped)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return _quote(escaped + "%") + " ESCAPE '\\'"


def _as_values(value: Any) -> list[Any]:
    return list(value) if isinstance(value, Iterable) and not isinstance(value, (str, bytes)) else [value]


def build_where(filters: Mapping[str, Any] | None) -> str | None:
    """Translate search filters into a LanceDB (DataFusion) SQL predicate.

    Supported keys: ``project``/``source``/``page_kind``/``doc_id`` (a value or a list of
    allowed values), ``section_prefix`` (literal prefix of ``section_path``) and ``page``
    (PDF page number that must be in the chunk's ``pages`` list, via ``array_has``).
    """
    clauses: list[str] = []
    for key, value in (filters or {}).items():
        if value is None:
            continue
        if key in _EQUALITY_FILTERS:
            values = _as_values(value)
            clauses.append(f"{key} IN ({', '.join(_quote(v) for v in values)})" if values else "FALSE")
        elif key == "section_prefix":
            clauses.append(f"section_path LIKE {_like_prefix(str(value))}")
        elif key == "page":
            clauses.append(f"array_has(pages, {int(value)})")
        else:
            raise ValueError(f"unknown search filter {key!r}")
    return " AND ".join(f"({c})" for c in clauses) or None


class VectorSearcher:
    """Cosine search over one index version, refusing to run with a different model."""

    def __init__(
        self, table: Any, embedder: Embedder, built: Mapping[str, Any], *, memory_scan_max_rows: int | None = None
    ) -> None:
        self.table = table
        self.embedder = embedder
        self.built = dict(built)
        self.memory_scan_max_rows = memory_scan_limit() if memory_scan_max_rows is None else memory_scan_max_rows
        self._scan: tuple[list[str], np.ndarray] | None = None  # (chunk ids, unit-norm rows), read once
        self._scan_refused = False  # the table has more rows than the limit: LanceDB scans
        self._scan_lock = threading.Lock()

    @classmethod
    def open(cls, db_uri: str, version: str, embedder: Embedder, **kwargs: Any) -> VectorSearcher:
        """Open ``version`` and check that ``embedder`` is the model that built it."""
        built = read_model_info(db_uri, version)
        if not built.get("weights_hash"):
            raise ModelMismatch(f"index {version!r} carries no model metadata; rebuild it")
        ensure_same_model(built, embedder.info)
        return cls(_open(db_uri, version), embedder, built, **kwargs)

    def _query_vector(self, query: str | np.ndarray) -> np.ndarray:
        vec = self.embedder.encode([query])[0] if isinstance(query, str) else np.asarray(query, dtype=np.float32)
        if vec.shape != (int(self.built["dimension"]),):
            raise ValueError(f"query vector has shape {vec.shape}, index dimension is {self.built['dimension']}")
        return vec

    def search(
        self, query: str | np.ndarray, k: int, *, filters: Mapping[str, Any] | None = None, exact: bool = True
    ) -> list[tuple[str, float]]:
        """Top ``k`` (chunk_id, cosine similarity), best first, filters applied before ranking."""
        if k <= 0:
            return []
        vec = self._query_vector(query)
        where = build_where(filters)
        scan = self._memory_scan() if exact and where is None else None
        if scan is not None:
            return _top_k(*scan, vec, k)
        builder = self.table.search(vec).distance_type("cosine")
        if where:
            builder = builder.where(where, prefilter=True)
        if exact:
            builder = builder.bypass_vector_index()
        # Selecting "_distance" explicitly: omitting it logs a Lance deprecation WARN per query.
        hits = builder.select(["chunk_id", "_distance"]).limit(k).to_arrow()
        ids = hits.column("chunk_id").to_pylist()
        distances = hits.column("_distance").to_numpy()
        return [(cid, float(1.0 - d)) for cid, d in zip(ids, distances)]

    def _memory_scan(self) -> tuple[list[str], np.ndarray] | None:
        """The table's ids and unit-norm vectors, read on first use (None: too large to hold)."""
        if self._scan is not None or self._scan_refused:  # every query after the first
            return self._scan
        with self._scan_lock:
            if self._scan is None and not self._scan_refused:
                rows = self.table.count_rows()
                if rows > self.memory_scan_max_rows:
                    self._scan_refused = True
                else:
                    ids, matrix = _ids_and_vectors(self.table, rows)
                    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
                    self._scan = (ids, np.ascontiguousarray(matrix / np.where(norms > 0, norms, 1.0), dtype=np.float32))
            return self._scan


def _top_k(ids: list[str], unit_rows: np.ndarray, query: np.ndarray, k: int) -> list[tuple[str, float]]:
    """Exact cosine top ``k``, best first; equal scores keep table order. The product runs in
    torch, on the process's torch threads (one in the service and in eval_run): numpy's
    OpenBLAS would start its own busy-waiting threads in every service worker."""
    import torch

    norm = float(np.linalg.norm(query))
    unit_query = np.ascontiguousarray(query / norm if norm > 0 else query, dtype=np.float32)
    scores = torch.mv(torch.from_numpy(unit_rows), torch.from_numpy(unit_query)).numpy()
    k = min(k, len(ids))
    if k == 0:
        return []
    head = np.argpartition(-scores, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
    order = head[np.lexsort((head, -scores[head]))]
    return [(ids[i], float(scores[i])) for i in order]
