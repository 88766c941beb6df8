"""Which model embeds an index version, and training it: the library half of ``domain_model``.

``model_for_version`` is the one resolution of "which model embeds this version", shared by the
``domain_model`` asset, ``vectors`` (which refuses to run before the model exists) and
``eval/train_adapted.py``: the base model, or the adapted one under ``<home>/models/<key>/``,
where ``key`` hashes every input by content (train data bytes, chunk texts, descriptions, base
weights, recipe) and not the version name, so an unchanged rebuild finds it and trains nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..index.config import AdaptRecipe, BuildSettings
from ..index.corpus_chunks import chunks_version_of
from ..operate.home import DataHome


@dataclass(frozen=True)
class VersionModel:
    """The model that embeds one version: the base model, or the adapted one at ``key``."""

    model_id: str  # what the embedder loads (a model id or a directory)
    adapted: bool
    key: str = ""  # content address under <home>/models/ (adapted only)
    lineage: dict | None = None  # the hashes the key is made of (adapted only)

    def directory(self, home: DataHome) -> Path:
        return home.cache("model").path(self.key)


def model_for_version(home: DataHome, version: str, config: BuildSettings) -> VersionModel:
    """Which model embeds ``version``: the base model, or the content-addressed adapted one."""
    from ..index.embedding import resolve_model_path, weights_hash
    from .finetune import MODEL_SUBDIR
    from .training_set import descriptions_hash, model_key, train_data_hash

    recipe = config.adaptation
    if recipe is None:
        return VersionModel(model_id=config.model_id, adapted=False)
    ids = home.warehouse().chunk_batches(version, ("chunk_id", "embed_hash"), rows=65_536)
    lineage = {
        "chunks_version": chunks_version_of(ids),  # a batch at a time, not the version's frame
        "train_data_hash": train_data_hash(recipe.train_split),
        "base_weights_hash": weights_hash(resolve_model_path(config.model_id)),
        "descriptions_hash": descriptions_hash(_descriptions(home, version)),
    }
    key = model_key(recipe, **lineage)
    return VersionModel(
        model_id=str(home.cache("model").path(key) / MODEL_SUBDIR), adapted=True, key=key, lineage=lineage
    )


def _descriptions(home: DataHome, version: str) -> dict[str, str]:
    rows = home.warehouse().documents_of(version, ("doc_id", "description")).rows()
    return {doc_id: text for doc_id, text in rows if text}


def train_version_model(
    home: DataHome,
    version: str,
    config: BuildSettings,
    model: VersionModel,
    progress: Callable | None = None,
    log: Callable[[str], object] = print,
    device=None,
) -> dict:
    """Build the version's training set and train into ``model.directory`` (staged + renamed)."""
    from ..index.lexical_store import cleanup_stale_staging
    from .finetune import train_bi_encoder
    from .training_set import CHUNK_FIELDS, training_set

    recipe: AdaptRecipe | None = config.adaptation
    if recipe is None or model.lineage is None:
        raise ValueError(f"{version} has no adaptation recipe: its model is the base model, nothing to train")
    target = model.directory(home)
    target.parent.mkdir(parents=True, exist_ok=True)
    cleanup_stale_staging(target.parent)  # staging dirs of killed trainings
    started = time.perf_counter()
    rows = home.warehouse().chunks_of(version, CHUNK_FIELDS).to_dicts()
    pairs = training_set(recipe, rows, _descriptions(home, version))
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
        device=device,
        extra={
            "lineage": {**model.lineage, "index_version": version},
            "train_split": recipe.train_split,
            "recipe": config.to_dict()["adaptation"],
            "composition": pairs.composition,
            "seconds_training_set": round(time.perf_counter() - started, 1),
        },
    )
