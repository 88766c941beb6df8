"""The embedding cache: vectors keyed by (model weights hash, text hash), so an unchanged
rebuild embeds nothing and a rebuild after a small change embeds only the new texts."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from .embedding import Embedder, Progress, text_hash

_DDL = """
CREATE TABLE IF NOT EXISTS models (model_hash VARCHAR PRIMARY KEY, dimension INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS vectors_{dim} (model_hash VARCHAR, text_hash VARCHAR,
    vector FLOAT[{dim}] NOT NULL, PRIMARY KEY (model_hash, text_hash));
"""


def vector_matrix(column: pa.ChunkedArray | pa.Array, dim: int) -> np.ndarray:
    """An Arrow column of ``dim``-float lists as one (rows, dim) float32 matrix, without a
    Python object per row (DuckDB ``FLOAT[dim]`` and LanceDB vector columns alike)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    flat = array.flatten().to_numpy(zero_copy_only=False)
    return flat.astype(np.float32, copy=False).reshape(len(array), dim)


class EmbeddingCache:
    """Vectors keyed by (model weights hash, text hash) in ``<cache_dir>/embeddings.duckdb``.

    DuckDB rather than LanceDB because the workload is keyed lookup + small appends:
    a composite PRIMARY KEY gives ``INSERT OR IGNORE`` de-duplication, a batched lookup is one
    hash join against a registered Arrow table (~50 ms for 10k keys), and each ``put_many`` is
    one ACID transaction in the WAL, so a crash keeps every committed batch. LanceDB would add
    a fragment + manifest version per batch (needing compaction) and has no primary key.
    Vectors live in one ``FLOAT[dim]`` table per dimension; ``models`` maps hash -> dimension.

    DuckDB takes a whole-file lock per open connection, so connections are opened per call
    (read-only for lookups) and closed immediately; a briefly held lock is retried.
    """

    def __init__(self, cache_dir: str | Path, *, lock_timeout_s: float = 30.0) -> None:
        self.path = Path(cache_dir) / "embeddings.duckdb"
        self.lock_timeout_s = lock_timeout_s

    @contextmanager
    def _connect(self, *, read_only: bool) -> Iterator[Any]:
        deadline = time.monotonic() + self.lock_timeout_s
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=read_only)
                break
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        try:
            yield con
        finally:
            con.close()

    def _dimension(self, con: Any, model_hash: str) -> int | None:
        try:
            # fetchall, not fetchone: DuckDB 2 keeps a partly fetched result open and then
            # refuses the next statement on this connection (ResourceInUseException).
            rows = con.execute("SELECT dimension FROM models WHERE model_hash = ?", [model_hash]).fetchall()
        except duckdb.CatalogException:  # fresh file without tables
            return None
        return int(rows[0][0]) if rows else None

    def get_many(self, model_hash: str, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Return the cached vectors among ``text_hashes`` (missing keys are simply absent)."""
        if not text_hashes or not self.path.exists():
            return {}
        with self._connect(read_only=True) as con:
            dim = self._dimension(con, model_hash)
            if dim is None:
                return {}
            con.register("wanted", pa.table({"text_hash": pa.array(list(set(text_hashes)), pa.string())}))
            table = con.sql(
                f"SELECT v.text_hash, v.vector FROM vectors_{dim} v JOIN wanted w USING (text_hash) "
                "WHERE v.model_hash = $m",
                params={"m": model_hash},
            ).to_arrow_table()
        return dict(zip(table.column("text_hash").to_pylist(), vector_matrix(table.column("vector"), dim)))

    def put_many(self, model_hash: str, items: Mapping[str, np.ndarray]) -> None:
        """Insert vectors in one transaction; keys already present are left untouched."""
        if not items:
            return
        keys = list(items)
        matrix = np.stack([np.asarray(items[k], dtype=np.float32) for k in keys])
        dim = matrix.shape[1]
        vector = pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel()), dim)
        batch = pa.table({"model_hash": [model_hash] * len(keys), "text_hash": keys, "vector": vector})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect(read_only=False) as con:
            con.begin()
            con.execute(_DDL.format(dim=int(dim)))
            known = self._dimension(con, model_hash)
            if known is not None and known != dim:
                con.rollback()
                raise ValueError(f"model {model_hash[:12]} is cached with dimension {known}, got {dim}")
            con.execute("INSERT OR IGNORE INTO models VALUES (?, ?)", [model_hash, dim])
            con.register("batch", batch)
            con.execute(f"INSERT OR IGNORE INTO vectors_{dim} SELECT model_hash, text_hash, vector FROM batch")
            con.commit()


@dataclass(frozen=True)
class CacheStats:
    """Counts are over *distinct* texts; ``seconds_embedding`` is model time only."""

    hits: int
    misses: int
    seconds_embedding: float


def embed_with_cache(
    embedder: Embedder,
    cache: EmbeddingCache,
    texts: Sequence[str],
    *,
    batch_size: int = 8,
    commit_every: int = 512,
    progress: Progress | None = None,
) -> tuple[np.ndarray, CacheStats]:
    """Vectors for ``texts`` (row-aligned), encoding only distinct texts missing from the cache.

    Misses are sorted by length so forward passes of ``batch_size`` texts pad little. Every
    ``commit_every`` texts are committed to the cache (one transaction) before
    ``progress(done, total_misses)`` runs: an interrupted build resumes where it stopped.
    """
    hashes = [text_hash(t) for t in texts]
    unique = dict(zip(hashes, texts))
    model_hash = embedder.weights_hash
    found = cache.get_many(model_hash, list(unique))
    misses = sorted((h for h in unique if h not in found), key=lambda h: len(unique[h]))
    seconds = 0.0
    step = max(commit_every, batch_size)
    for start in range(0, len(misses), step):
        batch = misses[start : start + step]
        t0 = time.perf_counter()
        vecs = embedder.encode([unique[h] for h in batch], batch_size=batch_size)
        seconds += time.perf_counter() - t0
        fresh = dict(zip(batch, vecs))
        cache.put_many(model_hash, fresh)
        found.update(fresh)
        if progress is not None:
            progress(start + len(batch), len(misses))
    stats = CacheStats(hits=len(unique) - len(misses), misses=len(misses), seconds_embedding=seconds)
    if not hashes:
        return np.zeros((0, embedder.info.dimension), dtype=np.float32), stats
    return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False), stats
