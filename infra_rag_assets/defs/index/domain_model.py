"""domain_model: the embedding model a version's vectors are made with, adapted per version.

chunks → domain_model → vectors. When the version's build config carries an adaptation recipe
(the default; ``BuildResource.adapt``, ``INFRA_RAG_ADAPT=0`` or ``infra-rag build --quick`` turn it
off), the base bi-encoder is fine-tuned on the version's training set
(``rag/adapt/training_set.py``: labelled k8s train questions + label-free pairs from every
project's docs) into ``<home>/models/<key>/``, where ``key`` hashes every input by content (train
data bytes, chunk texts, descriptions, base weights, recipe) and not the version name: an
unchanged rebuild finds the directory, trains nothing, and its vectors come from the embedding
cache (keyed by weights hash and text). Without a recipe the asset is a cheap pass-through
naming the base model.

Which model and how it is trained is the library's (``rag/adapt/version_model.py``); the vectors
table then records the model id and weights hash that the query path loads and checks.
"""

import json
from pathlib import Path

import dagster as dg

from ...rag.adapt.version_model import VersionModel, model_for_version, train_version_model
from ...rag.index.config import BuildSettings
from ..partitions import index_version
from ..reporting import training_progress
from ..resources import DataHomeResource


@dg.asset(
    partitions_def=index_version,
    deps=["chunks"],
    group_name="indexing",
    kinds={"pytorch"},
    owners=["team:search-platform"],
    description="The embedding model of the version. With an adaptation recipe in the version's config "
    "(default): all-MiniLM-L6-v2 fine-tuned (MultipleNegativesRankingLoss) on labelled k8s train questions "
    "+ label-free pairs from every project's docs, with BM25 hard negatives; content-addressed under "
    "<home>/models/<key>/, so an unchanged rebuild retrains nothing (10-20 min cold on 2 cores). Without one "
    "(quick build): a pass-through naming the base model. data_version = the weights hash vectors embed with.",
)
def domain_model(context: dg.AssetExecutionContext, store: DataHomeResource) -> dg.MaterializeResult:
    from ...rag.adapt.finetune import TRAINING_JSON
    from ...rag.index.embedding import resolve_model_path, weights_hash

    version, home = context.partition_key, store.data_home()
    config = BuildSettings.from_dict(home.warehouse().version_config(version) or {})
    model = model_for_version(home, version, config)
    if not model.adapted:
        base_hash = weights_hash(resolve_model_path(model.model_id))
        return dg.MaterializeResult(
            metadata={"model_id": model.model_id, "weights_hash": base_hash, "adapted": False},
            data_version=dg.DataVersion(base_hash),
        )
    refuse_non_train(config.adaptation.train_split, context.log.warning)
    target = model.directory(home)
    reused = (target / TRAINING_JSON).is_file()
    if not reused:
        train_version_model(
            home, version, config, model, progress=training_progress(context, "training"), log=context.log.info
        )
    record = json.loads((target / TRAINING_JSON).read_text())
    if weights_hash(model.model_id) != record["trained_weights_hash"]:
        raise dg.Failure(f"{model.model_id} does not match its training.json weights hash: delete {target} and rerun")
    return dg.MaterializeResult(
        metadata=_metadata(record, model, reused), data_version=dg.DataVersion(record["trained_weights_hash"])
    )


def refuse_non_train(path: str, log) -> None:
    """Training on eval (or any test) questions would leak into every score reported on them.
    A missing train split leaves the label-free pairs only (said in the log and the composition)."""
    name = Path(path).name.lower()
    if path and ("eval" in name or "test" in name):
        raise dg.Failure(f"train_split must be a train-split file, got {path!r}")
    if not path or not Path(path).is_file():
        log(f"no labelled train split at {path!r}: adapting on label-free pairs only")


def _metadata(record: dict, model: VersionModel, reused: bool) -> dict:
    return {
        "model_id": model.model_id,
        "path": dg.MetadataValue.path(model.model_id),
        "adapted": True,
        "weights_hash": record["trained_weights_hash"],
        "key": model.key,
        "base_model": record["base_model"],
        "base_weights_hash": record["base_weights_hash"],
        "train_data_hash": record["train_data_hash"],
        "examples_hash": record["examples_hash"],
        "examples": record["examples"],
        "skipped_questions": record["skipped_questions"],
        "composition": dg.MetadataValue.json(record.get("composition", {})),
        "seconds_training": record["seconds_training"],
        "pairs_per_second": record["pairs_per_second"],
        "chunks_version": model.lineage["chunks_version"],
        "trained_on_index_version": record.get("lineage", {}).get("index_version", ""),
        "recipe": dg.MetadataValue.json(record.get("recipe", {})),
        "reused_existing": reused,
    }
