"""The serving snapshot of an index version: what the query path reads instead of the warehouse.

The build's DuckDB warehouse allows one configuration per file per process and one writing
process per file, so a service that opened it per request failed under two concurrent users.
The query path therefore reads only immutable files written once by the build, next to the
version's LanceDB table and Tantivy indexes:

    <home>/serving/<version>/catalog.parquet   the chunk fields a hit needs (one row per chunk)
    <home>/serving/<version>/manifest.json     build config, counts, catalog sha256 (written last)

Both are written into a staging directory and renamed into place, so a reader sees the whole
snapshot or none. A version is servable when its manifest, Tantivy index and LanceDB table all
exist (``servable_versions``). Later stages add files fitted on these chunks (calibration.json,
ranker.json, page_vectors.npz); rewriting a snapshot carries them over when the new catalog is byte-identical, and
drops them when the chunks changed (their assets must run again). Model pointers (judge.json,
reader.json) are always carried: they name content-keyed models that read passages at query time,
not chunk ids, and their assets may run before the first snapshot exists (they need only chunks).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..operate.files import fsync_tree, swap_into_place, write_json
from ..operate.home import MODEL_POINTERS, checked_name

MANIFEST = "manifest.json"
CATALOG = "catalog.parquet"
SNAPSHOT_FORMAT = 1
# The chunk fields Retriever hits, packing and citations read (see retrieval._hit).
CATALOG_FIELDS = (
    "chunk_id",
    "doc_id",
    "project",
    "source",
    "page_id",
    "url",
    "title",
    "section_path",
    "text",
    "page_kind",
    "pages",
    "start_char",
    "end_char",
)


class SnapshotMissing(FileNotFoundError):
    """The version has no serving snapshot (not built through lexical_index with this code)."""


@dataclass(frozen=True)
class SnapshotManifest:
    version: str
    created_at: str
    build_config: dict
    chunks: int
    pages: int
    catalog_sha256: str
    format: int = SNAPSHOT_FORMAT

    @property
    def created(self) -> datetime:
        return datetime.fromisoformat(self.created_at)


def snapshot_dir(serving_root: Path, version: str) -> Path:
    return Path(serving_root) / checked_name(version, "an index version")


def write_snapshot(
    serving_root: Path,
    version: str,
    rows: Iterable[Mapping[str, Any]],
    build_config: dict,
    created_at: datetime | None = None,
) -> SnapshotManifest:
    """Write the catalog and manifest for ``version`` atomically (replacing an older snapshot)."""
    target = snapshot_dir(serving_root, version)
    staging = target.parent / f".staging-{version}-{uuid.uuid4().hex[:8]}"
    staging.mkdir(parents=True)
    try:
        columns: dict[str, list] = {name: [] for name in CATALOG_FIELDS}
        for row in rows:
            for name in CATALOG_FIELDS:
                columns[name].append(row.get(name))
        table = pa.table({name: columns[name] for name in CATALOG_FIELDS}, schema=_schema())
        pq.write_table(table, staging / CATALOG, compression="zstd")
        manifest = SnapshotManifest(
            version=version,
            created_at=(created_at or datetime.now(UTC)).isoformat(),
            build_config=build_config,
            chunks=table.num_rows,
            pages=len(set(columns["doc_id"])),
            catalog_sha256=_sha256(staging / CATALOG),
        )
        _carry_derived_files(target, staging, manifest.catalog_sha256)
        write_json(staging / MANIFEST, manifest.__dict__)
        fsync_tree(staging)
        swap_into_place(staging, target, target.parent / f".old-{version}-{uuid.uuid4().hex[:8]}")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def _fitted_files(folder: Path) -> list[Path]:
    """The plain files later stages wrote into a snapshot (not catalog, manifest, temp files or links)."""
    if not folder.is_dir():
        return []
    return sorted(
        e
        for e in folder.iterdir()
        if e.name not in (CATALOG, MANIFEST) and not e.name.startswith(".") and not e.is_symlink() and e.is_file()
    )


def _carry_derived_files(old: Path, staging: Path, catalog_sha256: str) -> None:
    """Copy the files later stages wrote into the old snapshot when they were fitted on the same
    chunks (same catalog sha256). Rewriting the released version's snapshot (`infra-rag snapshot`,
    `lexical_index` again) used to drop its ranker and calibrated floor, so it served degraded.
    Model pointers are carried whatever the catalog: a cold build's answer_reader or support_judge
    may run before lexical_index writes the first snapshot, which then dropped their pointers."""
    try:
        previous = json.loads((old / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        previous = None  # no old snapshot, or one that cannot vouch for its fitted files
    same_chunks = isinstance(previous, dict) and previous.get("catalog_sha256") == catalog_sha256
    for entry in _fitted_files(old):
        if same_chunks or entry.name in MODEL_POINTERS:
            shutil.copy2(entry, staging / entry.name)


def snapshot_files(serving_root: Path, version: str) -> list[str]:
    """The files in the version's snapshot besides catalog and manifest (what later stages wrote)."""
    return [e.name for e in _fitted_files(snapshot_dir(serving_root, version))]


def snapshot_from_warehouse(
    home: Any, version: str, rows: Iterable[Mapping[str, Any]] | None = None
) -> SnapshotManifest:
    """Write ``version``'s snapshot from the build warehouse (its chunks, config and creation
    time). ``rows``: the version's chunk rows when the caller has them loaded already."""
    warehouse = home.warehouse()
    info = warehouse.version_info(version)
    if info is None:
        raise ValueError(f"index version {version!r} is not registered in {warehouse.path}")
    if rows is None:
        rows = warehouse.chunks_of(version, CATALOG_FIELDS).iter_rows(named=True)
    return write_snapshot(
        home.serving_root(),
        version,
        rows,
        warehouse.version_config(version) or {},
        created_at=info["created_at"].replace(tzinfo=UTC),
    )


def _schema() -> pa.Schema:
    text = ("chunk_id", "doc_id", "project", "source", "page_id", "url", "title", "section_path", "text", "page_kind")
    return pa.schema(
        [
            *(pa.field(n, pa.string()) for n in text),
            pa.field("pages", pa.list_(pa.int32())),
            pa.field("start_char", pa.int64()),
            pa.field("end_char", pa.int64()),
        ]
    )


def read_manifest(serving_root: Path, version: str) -> SnapshotManifest:
    """The snapshot manifest of ``version``; SnapshotMissing for any name that is not a built
    version, including names of other files under serving/ (``release.json``)."""
    path = snapshot_dir(serving_root, version) / MANIFEST
    try:
        raw = json.loads(path.read_text())
    except (FileNotFoundError, NotADirectoryError):  # NotADirectoryError: a file named like a version
        raise SnapshotMissing(
            f"index version {version!r} has no serving snapshot "
            f"(`infra-rag snapshot --index-version {version}` writes it)"
        ) from None
    return SnapshotManifest(**raw)


def read_catalog(serving_root: Path, version: str) -> dict[str, dict]:
    """chunk_id -> row, checked against the manifest's sha256 (a torn or swapped file is refused)."""
    manifest = read_manifest(serving_root, version)
    path = snapshot_dir(serving_root, version) / CATALOG
    if _sha256(path) != manifest.catalog_sha256:
        raise ValueError(f"serving catalog of {version} does not match its manifest (sha256): rebuild it")
    table = pq.read_table(path)
    return {row["chunk_id"]: row for row in table.to_pylist()}


def list_manifests(serving_root: Path) -> list[SnapshotManifest]:
    """Every version with a complete snapshot, oldest first."""
    root = Path(serving_root)
    found = []
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        if entry.name.startswith(".") or not (entry / MANIFEST).is_file():
            continue
        try:
            found.append(read_manifest(root, entry.name))
        except (ValueError, TypeError, json.JSONDecodeError):
            continue  # a foreign or damaged directory is not a version
    return sorted(found, key=lambda m: m.created_at)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
