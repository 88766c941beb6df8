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

``model_for_version`` is the one resolution of "which model embeds this version", shared by this
asset and ``vectors`` (which refuses to run before the model exists); the vectors table then
records the model id and weights hash that the query path loads and checks.
"""

import json
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from ...rag.index.config import AdaptRecipe, BuildSettings
from ..partitions import index_version
from ..reporting import training_progress
from ..resources import DataHomeResource
from .chunks import chunks_version


@dataclass(frozen=True)
class VersionModel:
    """The model that embeds one version: the base model, or the adapted one at ``key``."""

    model_id: str  # what the embedder loads (a model id or a directory)
    adapted: bool
    key: str = ""  # content address under <home>/models/ (adapted only)
    lineage: dict | None = None  # the hashes the key is made of (adapted only)

    def directory(self, store: DataHomeResource) -> Path:
        return store.data_home().cache("model").path(self.key)


def model_for_version(store: DataHomeResource, version: str, config: BuildSettings, frame=None) -> VersionModel:
    """Which model embeds ``version``: the base model, or the content-addressed adapted one."""
    from ...rag.adapt.finetune import MODEL_SUBDIR
    from ...rag.adapt.training_set import descriptions_hash, model_key, train_data_hash
    from ...rag.index.embedding import resolve_model_path, weights_hash

    recipe = config.adaptation
    if recipe is None:
        return VersionModel(model_id=config.model_id, adapted=False)
    frame = store.data_home().warehouse().chunks_of(version, ("chunk_id", "embed_hash")) if frame is None else frame
    lineage = {
        "chunks_version": chunks_version(frame),
        "train_data_hash": train_data_hash(recipe.train_split),
        "base_weights_hash": weights_hash(resolve_model_path(config.model_id)),
        "descriptions_hash": descriptions_hash(_descriptions(store, version)),
    }
    key = model_key(recipe, **lineage)
    return VersionModel(
        model_id=str(store.data_home().cache("model").path(key) / MODEL_SUBDIR), adapted=True, key=key, lineage=lineage
    )


def _descriptions(store: DataHomeResource, version: str) -> dict[str, str]:
    rows = store.data_home().warehouse().documents_of(version, ("doc_id", "description")).rows()
    return {doc_id: text for doc_id, text in rows if text}


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

    version = context.partition_key
    config = BuildSettings.from_dict(store.data_home().warehouse().version_config(version) or {})
    model = model_for_version(store, version, config)
    if not model.adapted:
        base_hash = weights_hash(resolve_model_path(model.model_id))
        return dg.MaterializeResult(
            metadata={"model_id": model.model_id, "weights_hash": base_hash, "adapted": False},
            data_version=dg.DataVersion(base_hash),
        )
    refuse_non_train(config.adaptation.train_split, context.log.warning)
    target = model.directory(store)
    reused = (target / TRAINING_JSON).is_file()
    if not reused:
        train_version_model(
            store, version, config, model, progress=training_progress(context, "training"), log=context.log.info
        )
    record = json.loads((target / TRAINING_JSON).read_text())
    if weights_hash(model.model_id) != record["trained_weights_hash"]:
        raise dg.Failure(f"{model.model_id} does not match its training.json weights hash: delete {target} and rerun")
    return dg.MaterializeResult(
        metadata=_metadata(record, model, reused), data_version=dg.DataVersion(record["trained_weights_hash"])
    )


def train_version_model(
    store: DataHomeResource, version: str, config: BuildSettings, model: VersionModel, progress=None, log=print
) -> dict:
    """Build the version's training set and train into ``model.directory`` (staged + renamed)."""
    from ...rag.adapt.finetune import train_bi_encoder
    from ...rag.adapt.training_set import CHUNK_FIELDS, training_set
    from ...rag.index.lexical_store import cleanup_stale_staging

    recipe: AdaptRecipe = config.adaptation
    target = model.directory(store)
    target.parent.mkdir(parents=True, exist_ok=True)
    cleanup_stale_staging(target.parent)  # staging dirs of killed trainings
    started = time.perf_counter()
    rows = store.data_home().warehouse().chunks_of(version, CHUNK_FIELDS).to_dicts()
    pairs = training_set(recipe, rows, _descriptions(store, version))
    log(
        f"training set of {version}: {len(pairs)} triplets {pairs.composition} "
        f"({pairs.skipped} of {pairs.questions} labelled questions have no page here) "
        f"in {time.perf_counter() - started:.1f}s"
    )
    return train_bi_encoder(
        config.model_id,
        pairs,
        target,
        epochs=recipe.epochs,
        batch_size=recipe.batch_size,
        max_seq_length=recipe.max_seq_length,
        lr=recipe.lr,
        seed=recipe.seed,
        progress=progress,
        extra={
            "lineage": {**model.lineage, "index_version": version},
            "train_split": recipe.train_split,
            "recipe": config.to_dict()["adaptation"],
            "composition": pairs.composition,
            "seconds_training_set": round(time.perf_counter() - started, 1),
        },
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
