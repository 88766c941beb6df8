"""The data home: where every stored artifact of every index version lives.

    <home>/warehouse.duckdb   tables, eval results, releases, traces
    <home>/blobs/             source page bytes by sha256
    <home>/lancedb/           one vectors table per version (or lancedb_uri, e.g. s3://...)
    <home>/tantivy/<version>/ lexical index per version
    <home>/embedding_cache/   vectors by (model weights hash, text hash)
    <home>/serving/<version>/ serving snapshot (catalog + manifest) the query path reads
    <home>/serving/release.json  the release pointer: what serves now, and its history
    <home>/traces/            trace segments (JSON lines), one writer per process
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ... import settings
from ..ingest.blobs import BlobStore
from .warehouse import Warehouse


def default_home() -> str:
    return settings.home()


@dataclass(frozen=True)
class DataHome:
    root: Path
    lancedb_uri: str = ""

    @classmethod
    def at(cls, home: str | Path | None = None, lancedb_uri: str = "") -> DataHome:
        return cls(Path(home or default_home()).resolve(), lancedb_uri or settings.lancedb_uri())

    def warehouse(self) -> Warehouse:
        return Warehouse(self.root / "warehouse.duckdb")

    def blobs(self) -> BlobStore:
        return BlobStore(self.root / "blobs")

    def vectors_uri(self) -> str:
        return self.lancedb_uri or str(self.root / "lancedb")

    def tantivy_root(self) -> Path:
        return self.root / "tantivy"

    def cache_dir(self) -> Path:
        return self.root / "embedding_cache"

    def serving_root(self) -> Path:
        return self.root / "serving"

    def release_pointer(self) -> Path:
        return self.serving_root() / "release.json"

    def traces_dir(self) -> Path:
        return self.root / "traces"
