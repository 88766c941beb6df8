"""Build configuration of an index version, its hash, and readable unique version names.

An index version is an immutable build. What it was built with (sources snapshot, parser and
chunker settings, model) is captured once, hashed, and stored with the version, so any
score can be traced to the exact configuration that produced it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from ..ingest.sources import Source
from ..versions import PAIRS_VERSION, PIPELINE_VERSION
from .embedding import DEFAULT_MODEL

# Measured on the real corpus (eval/measure_ingest_bounds.py): longest chunk 4,403 chars,
# most chunks in one document 335. The bounds leave ~2x and ~6x headroom.
MAX_CHUNK_CHARS = 8_000
MAX_CHUNKS_PER_DOC = 2_000


@dataclass(frozen=True)
class ChunkSettings:
    """The chunk settings a version builds with, and the one home of their defaults
    (``chunking.ChunkerSettings`` and the ``BuildResource`` resource take theirs from here)."""

    target_tokens: int = 256
    max_tokens: int = 256
    min_tokens: int = 16
    context_line: bool = True
    max_chars: int = MAX_CHUNK_CHARS  # a chunk is bounded in characters too
    max_chunks: int = MAX_CHUNKS_PER_DOC  # a document stops there (recorded in chunks metadata)


@dataclass(frozen=True)
class AdaptRecipe:
    """How a version adapts its base model to the corpus (``domain_model``), recorded in its
    build config; the adapted weights are only known after training, so the recipe is what
    a version is registered with. Defaults are the measured main-job recipe
    (docs/tuning-log.md, "Every labelled question in the recipe" and "96 training tokens"):
    ~4,300 triplets, 11–15 min on 2 cores."""

    # Upper bound on the k8s train questions whose page is indexed (seeded sample below it): 3,000
    # is above the 2,769 usable today, so every labelled question trains the model.
    labelled_examples: int = 3000
    doc_examples: int = 1500  # label-free (query, chunk) pairs from the docs, shared across projects
    epochs: int = 1
    batch_size: int = 32
    # Training truncation only; the model embeds at its own length (256). 96 trains in ~0.7x the
    # time of 128 with the same served quality (tuning-log "96 training tokens").
    max_seq_length: int = 96
    lr: float = 2e-5
    seed: int = 0
    negatives: str = "bm25"  # hard negative: the best other-page chunk by BM25
    pairs_version: str = PAIRS_VERSION  # moves when the label-free pair rules change
    train_split: str = ""  # labelled train questions (JSONL); hashed by content, never eval/test


@dataclass(frozen=True)
class BuildSettings:
    sources: list[dict]
    parsers: dict[str, str]
    chunking: ChunkSettings = field(default_factory=ChunkSettings)
    model_id: str = DEFAULT_MODEL  # the base model (adapted per version when ``adaptation`` is set)
    model_hash: str = ""  # the base model's weights hash
    pipeline_version: str = PIPELINE_VERSION
    adaptation: AdaptRecipe | None = None  # None: vectors embed with the base model as is

    def to_dict(self) -> dict:
        raw = asdict(self)
        if self.adaptation is None:
            del raw["adaptation"]  # versions built before adaptation keep their config hash
        return raw

    @classmethod
    def from_dict(cls, raw: dict) -> BuildSettings:
        raw = dict(raw)
        raw["chunking"] = ChunkSettings(**raw.get("chunking", {}))
        if raw.get("adaptation") is not None:
            raw["adaptation"] = AdaptRecipe(**raw["adaptation"])
        return cls(**raw)

    def config_hash(self) -> str:
        return stable_hash(self.to_dict())


def stable_hash(value: object, length: int = 64) -> str:
    return hashlib.sha256(_canonical(value).encode()).hexdigest()[:length]


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


class StableRowsHash:
    """``stable_hash([head, rows])`` (or ``stable_hash(rows)`` without a head) fed a batch of rows
    at a time: the same digest without holding every row (rows serialise as JSON lists)."""

    _NO_HEAD = object()

    def __init__(self, head: object = _NO_HEAD) -> None:
        self._headed = head is not StableRowsHash._NO_HEAD
        self._digest = hashlib.sha256(f"[{_canonical(head)},[".encode() if self._headed else b"[")
        self._empty = True

    def add(self, rows) -> None:
        for row in rows:
            self._digest.update((("" if self._empty else ",") + _canonical(list(row))).encode())
            self._empty = False

    def hexdigest(self, length: int = 64) -> str:
        final = self._digest.copy()
        final.update(b"]]" if self._headed else b"]")
        return final.hexdigest()[:length]


def source_snapshot(source: Source, fingerprint: str) -> dict:
    return {
        "name": source.name,
        "project": source.project,
        "kind": source.kind,
        "license": source.license,
        "upstream": source.upstream_ref(),
        "mirror": str(source.mirror) if source.mirror else None,
        "fingerprint": fingerprint,
    }


def sources_fingerprint(snapshots: list[dict]) -> str:
    return stable_hash([(s["name"], s["fingerprint"]) for s in snapshots])


def new_version_name(config_hash: str, existing: set[str], now: datetime | None = None) -> str:
    """``2026-11-29T1830-3f9a2c``: UTC minute + short config hash, suffixed when taken."""
    now = now or datetime.now(UTC)
    base = f"{now:%Y-%m-%dT%H%M}-{config_hash[:6]}"
    name, n = base, 2
    while name in existing:
        name, n = f"{base}-{n}", n + 1
    return name


def make_build_config(
    sources: list[Source],
    parsers: dict[str, str],
    chunking: ChunkSettings,
    model_id: str,
    model_hash: str,
    adaptation: AdaptRecipe | None = None,
) -> BuildSettings:
    """Snapshot the sources (with mirror fingerprints) and settings a new version builds with."""
    from ..ingest.sources import mirror_fingerprint

    snapshots = [source_snapshot(s, mirror_fingerprint(s)) for s in sources]
    return BuildSettings(
        sources=snapshots,
        parsers=parsers,
        chunking=chunking,
        model_id=model_id,
        model_hash=model_hash,
        adaptation=adaptation,
    )


def claim_version(warehouse, partitions, config, created_by: str) -> str:
    """Name a new version and record its configuration; the CLI and the sensor both use it.

    Names are unique per data home, not per Dagster instance: another DAGSTER_HOME, or a build
    started in the same minute, must not reuse (and overwrite) an existing version.
    """
    existing = set(partitions) | warehouse.version_names()
    while True:
        version = new_version_name(config.config_hash(), existing)
        if warehouse.record_version(
            version, config.to_dict(), config.config_hash(), sources_fingerprint(config.sources), created_by
        ):
            return version
        existing.add(version)  # taken by a concurrent build between our read and our insert
