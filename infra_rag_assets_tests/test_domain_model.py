"""domain_model in the main job: adapted once per content, reused by an unchanged rebuild (no
retraining, no re-embedding), the quick switch, and the training set on the fixture corpus.

Recipes are tiny on purpose (12 triplets, 32 tokens, one step): what is tested is the plumbing,
not quality (that is measured on the full corpus, docs/tuning-log.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dagster as dg
import pytest
from conftest import OFF_FIXTURE, PAGE, TRAIN_SPLIT

from infra_rag_assets.cli.main import without_adaptation
from infra_rag_assets.control.builds import materialize_version, register_version
from infra_rag_assets.control.stages import index_stages
from infra_rag_assets.defs.index.domain_model import domain_model
from infra_rag_assets.defs.resources import BuildResource, DataHomeResource, EmbedderResource
from infra_rag_assets.rag.adapt.training_set import CHUNK_FIELDS, model_key, training_set
from infra_rag_assets.rag.devices import versions
from infra_rag_assets.rag.index.config import AdaptRecipe, BuildSettings
from infra_rag_assets.rag.index.embedding import DEFAULT_MODEL, ModelMismatch, resolve_model_path, shared_embedder
from infra_rag_assets.rag.index.embedding import weights_hash as model_weights_hash
from infra_rag_assets.rag.index.vector_store import read_model_info
from infra_rag_assets.rag.search.engine import QueryEngine
from infra_rag_assets.rag.search.vector_search import VectorSearcher

pytestmark = pytest.mark.build

TINY = {"adapt_labelled_examples": 6, "adapt_doc_examples": 6, "adapt_max_seq_length": 32}


def _build(instance: dg.DagsterInstance, store: DataHomeResource, settings: BuildResource) -> tuple[str, dict, dict]:
    """A new version through the indexes: (version, domain_model metadata, vectors metadata)."""
    version = register_version(instance, store, settings, created_by="test")
    result = materialize_version(version, index_stages(), instance, store, settings, EmbedderResource(batch_size=16))
    assert result.success
    return version, *(_meta(result, node) for node in ("domain_model", "vectors"))


def _meta(result, node: str) -> dict:
    [event] = result.asset_materializations_for_node(node)
    return {k: v.value for k, v in event.metadata.items()}


def test_main_job_adapts_once_and_an_unchanged_rebuild_retrains_and_reembeds_nothing(
    tmp_path, fixture_sources, train_subset
):
    store = DataHomeResource(home=str(tmp_path / "home"))
    settings = BuildResource(sources_file=str(fixture_sources), adapt=True, train_split=str(train_subset), **TINY)
    with dg.DagsterInstance.ephemeral() as instance:
        first, model, vectors = _build(instance, store, settings)
        second, model2, vectors2 = _build(instance, store, settings)

    base_hash = model_weights_hash(resolve_model_path(DEFAULT_MODEL))
    assert model["adapted"] and not model["reused_existing"] and model["examples"] == 12
    assert model["skipped_questions"] == OFF_FIXTURE and model["base_weights_hash"] == base_hash
    assert model["weights_hash"] != base_hash and model["model_id"].startswith(str(store.data_home().root / "models"))
    assert vectors["model_weights_hash"] == model["weights_hash"] and vectors["texts_embedded"] > 0
    # Unchanged rebuild (a new version name, same content): the same model, nothing trained or embedded.
    assert first != second and model2["reused_existing"] and model2["key"] == model["key"]
    assert model2["weights_hash"] == model["weights_hash"]
    assert vectors2["texts_embedded"] == 0 and vectors2["cache_hit_rate"] == 1.0
    assert [p.name for p in (store.data_home().root / "models").iterdir() if not p.name.startswith(".")] == [
        model["key"]
    ]

    config = BuildSettings.from_dict(
        store.data_home().warehouse().version_config(second)
    )  # the recipe, not the weights
    assert config.model_id == DEFAULT_MODEL and config.model_hash == base_hash
    assert config.adaptation == AdaptRecipe(
        labelled_examples=6, doc_examples=6, max_seq_length=32, train_split=str(train_subset)
    )
    engine = QueryEngine(store.data_home(), second)  # loads the model the vectors table records
    assert engine.embedder.weights_hash == model["weights_hash"] and engine.model_id == model["model_id"]
    assert engine.search("How does maxSurge work?", config="dense", k=3).hits
    with pytest.raises(ModelMismatch):  # the base model is refused for an adapted version
        VectorSearcher.open(store.data_home().vectors_uri(), second, shared_embedder(DEFAULT_MODEL))


def test_quick_build_passes_the_base_model_through(fresh_home, built_index):
    """The fixture builds are quick builds (conftest: INFRA_RAG_ADAPT=0): no recipe, no training."""
    store, version = DataHomeResource(home=str(fresh_home)), built_index["version"]
    assert BuildSettings.from_dict(store.data_home().warehouse().version_config(version)).adaptation is None
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("index_version", [version])
        result = dg.materialize([domain_model], instance=instance, partition_key=version, resources={"store": store})
    meta = _meta(result, "domain_model")
    base_hash = model_weights_hash(resolve_model_path(DEFAULT_MODEL))
    assert meta == {"model_id": DEFAULT_MODEL, "weights_hash": base_hash, "adapted": False, **versions()}
    assert read_model_info(store.data_home().vectors_uri(), version)["weights_hash"] == base_hash
    assert not (fresh_home / "models").exists()


def test_the_switches(monkeypatch, tmp_path):
    monkeypatch.setenv("INFRA_RAG_ADAPT", "0")
    assert BuildResource().recipe() is None
    monkeypatch.setenv("INFRA_RAG_ADAPT", "1")
    adapted = BuildResource(train_split=str(tmp_path / "train.jsonl"))
    assert adapted.recipe() == AdaptRecipe(train_split=str(tmp_path / "train.jsonl"))  # the measured defaults
    quick = without_adaptation(adapted)  # infra-rag build --quick
    assert quick.recipe() is None and quick.train_split == adapted.train_split


def test_the_eval_split_is_refused(fresh_home, built_index):
    store, version = DataHomeResource(home=str(fresh_home)), built_index["version"]
    recorded = BuildSettings.from_dict(store.data_home().warehouse().version_config(version))
    eval_split = str(TRAIN_SPLIT.with_name("qa_eval.jsonl"))
    config = dataclasses.replace(recorded, adaptation=AdaptRecipe(train_split=eval_split))
    store.data_home().warehouse().record_version("v-eval", config.to_dict(), config.config_hash(), "x", "test")
    store.data_home().warehouse().copy_partition("chunks", version, "v-eval")
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("index_version", ["v-eval"])
        with pytest.raises(dg.Failure, match="train-split"):
            dg.materialize([domain_model], instance=instance, partition_key="v-eval", resources={"store": store})


def test_training_set_mixes_labelled_and_label_free_pairs(built_index, train_subset):
    warehouse = DataHomeResource(home=str(built_index["home"])).data_home().warehouse()
    rows = warehouse.chunks_of(built_index["version"], CHUNK_FIELDS).to_dicts()
    recipe = AdaptRecipe(labelled_examples=10, doc_examples=20, train_split=str(train_subset))
    pairs = training_set(recipe, rows, {})
    by_id = {r["chunk_id"]: r for r in rows}
    labelled = [ex for ex in pairs if not ex.question_id.startswith("doc:")]
    assert len(labelled) == 10 and all(ex.doc_id == f"kubernetes:{PAGE}" for ex in labelled)
    assert pairs.composition["labelled"] == 10 and len(pairs) == 30
    assert {k for k in pairs.composition if k.startswith("project_")} >= {"project_argocd", "project_prometheus"}
    for ex in pairs:  # the hard negative is always another page's chunk
        assert by_id[ex.negative_chunk_id]["doc_id"] != by_id[ex.positive_chunk_id]["doc_id"] == ex.doc_id
    assert len(training_set(dataclasses.replace(recipe, train_split=""), rows, {})) == 20  # label-free only


def test_model_key_is_content_not_names():
    lineage = {"chunks_version": "c", "base_weights_hash": "b", "train_data_hash": "t", "descriptions_hash": "d"}
    recipe = AdaptRecipe(train_split="/a/qa_train.jsonl")
    moved = dataclasses.replace(recipe, train_split=str(Path("/elsewhere/qa_train.jsonl")))
    assert model_key(recipe, **lineage) == model_key(moved, **lineage)  # the bytes are in train_data_hash
    assert model_key(recipe, **lineage) != model_key(dataclasses.replace(recipe, doc_examples=10), **lineage)
    assert model_key(recipe, **lineage) != model_key(recipe, **{**lineage, "chunks_version": "c2"})
