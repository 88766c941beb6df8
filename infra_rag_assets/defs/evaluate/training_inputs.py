"""What the per-corpus models of the evaluate domain (support judge, answer reader) train from:
the version's chunks, the k8s TRAIN split and the base encoder, with their content hashes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from ...rag.index.config import BuildSettings
from ...rag.operate.home import DataHome
from ..index.domain_model import refuse_non_train
from ..resources import DataHomeResource, default_train_split


@dataclass(frozen=True)
class TrainingInputs:
    home: DataHome
    version: str
    train_split: str
    chunks: list[dict]
    base: Path
    lineage: dict[str, str]  # train_data_hash, chunks_hash, base_weights_hash: a model key's parts


def training_inputs(context: dg.AssetExecutionContext, store: DataHomeResource) -> TrainingInputs:
    from ...rag.adapt.training_set import train_data_hash
    from ...rag.index.embedding import resolve_model_path, weights_hash
    from ...rag.judge.support_judge import chunks_hash

    home, version = store.data_home(), context.partition_key
    build = BuildSettings.from_dict(home.warehouse().version_config(version) or {})
    train_split = build.adaptation.train_split if build.adaptation else default_train_split()
    refuse_non_train(train_split, context.log.warning)
    chunks = home.warehouse().chunks_of(version, ("chunk_id", "doc_id", "text")).to_dicts()
    if not chunks:
        raise dg.Failure(f"index version {version} has no chunks: build it through chunks first")
    base = resolve_model_path(build.model_id)
    lineage = {
        "train_data_hash": train_data_hash(train_split),
        "chunks_hash": chunks_hash(chunks),
        "base_weights_hash": weights_hash(base),
    }
    return TrainingInputs(home, version, train_split, chunks, base, lineage)
