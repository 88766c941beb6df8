"""domain_model: a bi-encoder fine-tuned on the benchmark's *train* split, as an asset.

Why an asset: the model is data derived from other data (train questions + one version's
chunks + base weights + hyper-parameters), so it gets the same treatment as an index: a
content-addressed directory under ``<home>/models/<key>/`` where ``key`` hashes all of those
inputs, metadata that names them, and ``data_version`` = the trained weights hash, which is
exactly what the vectors asset pins when a version is built with ``BuildSettings(model=<path>)``
(or ``INFRA_RAG_MODEL=<path>``). Re-materializing with unchanged inputs finds the directory
and skips the ~20 minutes of training.

The asset is not partitioned: a model is trained once and then used by many index versions.
It reads chunks of one version (``index_version``; default the newest one with chunks) only
to mine training passages, so the UI shows ``chunks`` upstream of it.
"""

import json
import os
import time
from pathlib import Path
from typing import Literal

import dagster as dg
from pydantic import Field

from ...rag.index.config import stable_hash
from ...rag.index.embedding import DEFAULT_MODEL
from ..resources import PROJECT_ROOT, RagStore
from .chunks import chunks_version

# Measured here (batch 32, 192 tokens, 2 torch threads): ~0.48 CPU-seconds per triplet, 12.5 s
# per step = ~2.5 triplets/s on 2 idle cores, so 2,700 triplets train in ~18 min, inside the
# 25-minute budget, and cover nearly all 2,748 train questions whose page is in the 2023-11
# corpus snapshot. On a busy machine wall time grows with the CPU share the process gets
# (training.json records cpu_seconds_training beside seconds_training).
DEFAULT_MAX_QUESTIONS = 2700
TRAIN_FILE = Path("k8s-docs-rag-bench") / "qa_train.jsonl"


def default_train_split() -> str:
    """The benchmark's train split (INFRA_RAG_BENCH overrides the bench folder, as for eval specs)."""
    bench = os.environ.get("INFRA_RAG_BENCH", str(PROJECT_ROOT.parent / "shared" / "bench"))
    return str(Path(bench) / TRAIN_FILE)


class DomainModelConfig(dg.Config):
    base_model: str = Field(default=DEFAULT_MODEL, description="sentence-transformers id or local path")
    train_split: str = Field(default_factory=default_train_split, description="train split JSONL (never eval/test)")
    max_questions: int = Field(default=DEFAULT_MAX_QUESTIONS,
                               description="seeded sample of usable questions; 0 = all of them")
    epochs: int = 1
    batch_size: int = 32
    max_seq_length: int = Field(default=192, description="training truncation; the saved model keeps the base's")
    lr: float = 2e-5
    seed: int = 0
    index_version: str = Field(default="", description="version whose chunks give the passages; empty = newest")
    negatives: Literal["bm25", "dense"] = Field(
        default="bm25", description="hard negative per question: the best other-page chunk by BM25, or by the "
        "dense model that built index_version (its own mistakes; needs that version's vectors)")

    def hyper_parameters(self) -> dict:
        params = {"max_questions": self.max_questions, "epochs": self.epochs, "batch_size": self.batch_size,
                  "max_seq_length": self.max_seq_length, "lr": self.lr, "seed": self.seed}
        # Only when not the default, so models trained before this option keep their content address.
        return params if self.negatives == "bm25" else {**params, "negatives": self.negatives}


@dg.asset(
    deps=["chunks"],
    group_name="models",
    kinds={"pytorch"},
    owners=["team:search-platform"],
    description="all-MiniLM-L6-v2 fine-tuned with MultipleNegativesRankingLoss on (train question, best chunk "
    "of its page, BM25 hard negative from another page). Content-addressed under <home>/models/<key>/; "
    "data_version = trained weights hash. Build an index version with it via BuildSettings(model=<path>).",
)
def domain_model(context: dg.AssetExecutionContext, config: DomainModelConfig, store: RagStore) -> dg.MaterializeResult:
    from ...rag.index.embedding import resolve_model_path, weights_hash
    from ...rag.index.finetune import MODEL_SUBDIR, TRAINING_JSON, file_sha256

    _refuse_non_train(config.train_split)
    version = config.index_version or newest_version_with_chunks(store)
    frame = store.warehouse().chunks_of(version, ("chunk_id", "doc_id", "text", "context", "embed_hash"))
    if frame.is_empty():
        raise dg.Failure(f"no chunks for index version {version!r}: materialize its chunks first")
    lineage = {"index_version": version, "chunks_version": chunks_version(frame),
               "train_data_hash": file_sha256(config.train_split),
               "base_weights_hash": weights_hash(resolve_model_path(config.base_model))}
    target = store.root / "models" / model_key(lineage, config)
    reused = target.exists()
    if not reused:
        _train(context, config, frame, target, lineage, store)
    record = json.loads((target / TRAINING_JSON).read_text())
    model_path = target / MODEL_SUBDIR
    if weights_hash(model_path) != record["trained_weights_hash"]:
        raise dg.Failure(f"{model_path} does not match its training.json weights hash: delete {target} and rerun")
    metadata = {**_metadata(record, model_path, lineage, reused), "negatives": config.negatives}  # in the key
    return dg.MaterializeResult(metadata=metadata,
                                data_version=dg.DataVersion(record["trained_weights_hash"]))


def model_key(lineage: dict, config: DomainModelConfig) -> str:
    """Directory name: a hash of what determines the weights, by content. The version *name* is
    left out, so a new index version with unchanged chunks reuses the model instead of retraining."""
    inputs = {k: lineage[k] for k in ("train_data_hash", "chunks_version", "base_weights_hash")}
    return stable_hash({**inputs, **config.hyper_parameters()}, 12)


def newest_version_with_chunks(store: RagStore) -> str:
    """The most recently created index version that has chunk rows (others are half built)."""
    found = store.warehouse().newest_version_with("chunks")
    if not found:
        raise dg.Failure("no index version has chunks yet: build one (through chunks) first")
    return found


def _refuse_non_train(path: str) -> None:
    """Training on eval (or any test) questions would leak into every score reported on them."""
    name = Path(path).name.lower()
    if "eval" in name or "test" in name or not Path(path).is_file():
        raise dg.Failure(f"train_split must be an existing train-split file, got {path!r}")


def _train(context: dg.AssetExecutionContext, config: DomainModelConfig, frame, target: Path, lineage: dict,
           store: RagStore) -> None:
    """Mine pairs, then train into ``target`` (staged + renamed by ``train_bi_encoder``)."""
    from ...rag.index.finetune import load_train_pairs, train_bi_encoder
    from ...rag.index.lexical_store import cleanup_stale_staging

    target.parent.mkdir(parents=True, exist_ok=True)
    cleanup_stale_staging(target.parent)  # staging dirs of killed trainings
    started = time.perf_counter()
    rows = frame.select("chunk_id", "doc_id", "text", "context").iter_rows(named=True)
    miner = _dense_miner(store, lineage["index_version"], frame) if config.negatives == "dense" else None
    pairs = load_train_pairs(config.train_split, rows, max_questions=config.max_questions or None, seed=config.seed,
                             dense_miner=miner)
    context.log.info(f"mined {len(pairs)} training triplets from {lineage['index_version']} "
                     f"({pairs.skipped} of {pairs.questions} questions have no page in it) "
                     f"in {time.perf_counter() - started:.1f}s")
    train_bi_encoder(config.base_model, pairs, target, epochs=config.epochs, batch_size=config.batch_size,
                     max_seq_length=config.max_seq_length, lr=config.lr, seed=config.seed,
                     progress=_progress(context),
                     extra={"lineage": lineage, "train_split": config.train_split, "negatives": config.negatives})


def _dense_miner(store: RagStore, version: str, frame):
    """The version's own vectors (row-aligned with ``frame``) and its model as question encoder."""
    import numpy as np

    from ...rag.index.embedding import shared_embedder
    from ...rag.index.finetune import DenseMiner
    from ...rag.index.vector_store import read_model_info, read_vectors

    by_id = read_vectors(store.vectors_uri(), version)
    missing = [c for c in frame["chunk_id"].to_list() if c not in by_id]
    if missing:
        raise dg.Failure(f"negatives=dense needs the vectors of {version}: {len(missing)} chunk(s) have none")
    vectors = np.stack([by_id[c] for c in frame["chunk_id"].to_list()])
    embedder = shared_embedder(read_model_info(store.vectors_uri(), version)["model_id"])
    return DenseMiner(vectors=vectors, encode=lambda questions: embedder.encode(questions))


def _progress(context: dg.AssetExecutionContext):
    last = [0.0]

    def progress(step: int, total: int, loss: float) -> None:
        if step == total or time.monotonic() - last[0] > 30:
            last[0] = time.monotonic()
            context.log.info(f"training step {step}/{total}, loss {loss:.4f}")

    return progress


def _metadata(record: dict, model_path: Path, lineage: dict, reused: bool) -> dict:
    return {
        "path": dg.MetadataValue.path(str(model_path)),
        "weights_hash": record["trained_weights_hash"],
        "base_model": record["base_model"], "base_weights_hash": record["base_weights_hash"],
        "train_data_hash": record["train_data_hash"], "examples_hash": record["examples_hash"],
        "examples": record["examples"], "skipped_questions": record["skipped_questions"],
        "seconds_training": record["seconds_training"], "pairs_per_second": record["pairs_per_second"],
        "index_version": lineage["index_version"], "chunks_version": lineage["chunks_version"],
        "trained_on_index_version": record.get("lineage", {}).get("index_version", ""),
        "hyper_parameters": dg.MetadataValue.json(record["hyper_parameters"]),
        "reused_existing": reused,
    }
