"""The data home: where every stored artifact of every index version lives.

    <home>/warehouse.duckdb   tables, eval results, releases, traces
    <home>/blobs/             source page bytes by sha256
    <home>/lancedb/           one vectors table per version (or lancedb_uri, e.g. s3://...)
    <home>/tantivy/<version>/ lexical index per version
    <home>/embedding_cache/   vectors by (model weights hash, text hash)
    <home>/serving/<version>/ serving snapshot (catalog + manifest) the query path reads
    <home>/serving/release.json  the release pointer: what serves now, and its history
    <home>/traces/            trace segments (JSON lines), one writer per process
    <home>/models/ rankers/ calibrations/ eval_cache/ generations/
                              content-addressed caches (``DataHome.cache(kind)``)

``DataHome.version(v)`` maps one version's files; nothing else joins these paths.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ... import settings
from ..ingest.blobs import BlobStore
from .warehouse import Warehouse

# Fitted files of a version's serving snapshot (<home>/serving/<version>/), which the query path
# reads; named here, with the rest of the home's layout, so search/ and this module share them.
RANKER_FILE = "ranker.json"
PAGE_VECTORS_FILE = "page_vectors.npz"
CALIBRATION_FILE = "calibration.json"
# ... and its model pointers: which trained support judge and answer reader serve it
JUDGE_POINTER = "judge.json"
READER_POINTER = "reader.json"
MODEL_POINTERS = (JUDGE_POINTER, READER_POINTER)


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

    def version(self, version: str) -> VersionPaths:
        """The files of one index version (raises ValueError for a name that is not a version)."""
        return VersionPaths(self, version)

    def cache(self, kind: str) -> ContentCache:
        """The content-addressed cache of ``kind`` (one of ``CACHE_KINDS``)."""
        if kind not in CACHE_KINDS:
            raise ValueError(f"unknown cache {kind!r}; one of {', '.join(CACHE_KINDS)}")
        return ContentCache(self.root / CACHE_KINDS[kind])


def checked_name(name: str, what: str) -> str:
    """``name`` if it names one entry inside its folder (no separator, not hidden, not empty)."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"not {what} name: {name!r}")
    return name


# kind -> folder under the data home. An entry is a file or a folder named by its content key:
# the hash of everything it was computed from, so an unchanged input finds it again.
CACHE_KINDS = {
    "model": "models",
    "ranker": "rankers",
    "readers": "readers",
    "calibration": "calibrations",
    "eval_run": "eval_cache",
    "generation": "generations",
    "judge": "judges",
    "judging": "judgings",
}


@dataclass(frozen=True)
class ContentCache:
    """Entries computed once and found again by content key (``get``), written by ``put``."""

    root: Path

    def path(self, key: str) -> Path:
        """Where the entry ``key`` lives (whether or not it exists yet)."""
        return self.root / checked_name(key, "a cache key")

    def get(self, key: str) -> Path | None:
        """The stored entry ``key``, or None."""
        path = self.path(key)
        return path if path.exists() else None

    def put(self, key: str, write: Callable[[Path], object]) -> Path:
        """Store the entry ``key``: ``write`` gets its path (folder created) and writes it there."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path)
        return path


@dataclass(frozen=True)
class VersionPaths:
    """One index version's files under a data home: its lexical index and its serving snapshot."""

    home: DataHome
    name: str

    def __post_init__(self) -> None:
        checked_name(self.name, "an index version")

    @property
    def tantivy(self) -> Path:
        return self.home.tantivy_root() / self.name

    @property
    def snapshot(self) -> Path:
        """The serving snapshot folder: catalog, manifest and the fitted files the query path reads."""
        return self.home.serving_root() / self.name

    @property
    def ranker(self) -> Path:
        return self.snapshot / RANKER_FILE

    @property
    def page_vectors(self) -> Path:
        return self.snapshot / PAGE_VECTORS_FILE

    @property
    def calibration(self) -> Path:
        return self.snapshot / CALIBRATION_FILE
