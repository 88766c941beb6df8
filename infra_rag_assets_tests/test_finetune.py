"""domain_model: pair mining on real train questions and a tiny real fine-tune, as an asset.

The fixture corpus holds one Kubernetes page with train questions
(``concepts/workloads/controllers/deployment.md``: 30 real questions of the train split), so
the pairs are real train questions against real chunks; a few train questions whose pages are
not in the fixture are added to prove they are skipped and counted.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg
import pytest

from infra_rag_assets.defs.index.models import domain_model
from infra_rag_assets.defs.resources import RagStore
from infra_rag_assets.rag.index.corpus_chunks import embed_input
from infra_rag_assets.rag.index.embedding import Embedder
from infra_rag_assets.rag.index.finetune import MODEL_SUBDIR, TRAINING_JSON, load_train_pairs, no_duplicate_batches
from infra_rag_assets.rag.operate.warehouse import Warehouse

TRAIN_SPLIT = Path(__file__).resolve().parents[2] / "shared" / "bench" / "k8s-docs-rag-bench" / "qa_train.jsonl"
PAGE = "concepts_workloads_controllers_deployment"
OFF_FIXTURE = 4  # train questions whose page is not in the fixture corpus


@pytest.fixture(scope="module")
def train_subset(tmp_path_factory) -> Path:
    """The deployment page's train questions plus a few whose pages the fixture lacks."""
    if not TRAIN_SPLIT.is_file():
        pytest.skip(f"train split not found at {TRAIN_SPLIT}")
    rows = [json.loads(line) for line in TRAIN_SPLIT.read_text().splitlines() if line.strip()]
    on_page = [r for r in rows if r["source_page"] == PAGE]
    elsewhere = [r for r in rows if r["source_page"].startswith("tasks_")][:OFF_FIXTURE]
    assert len(on_page) >= 25
    path = tmp_path_factory.mktemp("train") / "qa_train_subset.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in on_page + elsewhere))
    return path


def _chunks(home: Path, version: str) -> list[dict]:
    frame = Warehouse(home / "warehouse.duckdb").frame(
        "SELECT chunk_id, doc_id, text, context FROM chunks WHERE index_version = ? ORDER BY chunk_id", [version])
    return frame.to_dicts()


def test_pairs_are_page_positives_and_other_page_hard_negatives(built_index, train_subset):
    chunks = _chunks(built_index["home"], built_index["version"])
    pairs = load_train_pairs(train_subset, chunks)
    assert pairs.skipped == OFF_FIXTURE and pairs.questions == len(pairs) + OFF_FIXTURE
    assert pairs.train_data_hash == hashlib.sha256(train_subset.read_bytes()).hexdigest()
    embedded = {c["chunk_id"]: (c["doc_id"], embed_input(c["context"], c["text"])) for c in chunks}
    for ex in pairs:
        assert embedded[ex.positive_chunk_id] == (f"kubernetes:{PAGE}", ex.positive)
        neg_doc, neg_text = embedded[ex.negative_chunk_id]
        assert neg_doc != ex.doc_id and neg_text == ex.negative
    maxsurge = next(ex for ex in pairs if "maxSurge" in ex.question)
    assert "maxSurge" in maxsurge.positive  # BM25 found the section that answers it
    sample = load_train_pairs(train_subset, chunks, max_questions=10, seed=1)
    assert len(sample) == 10 and sample.skipped == OFF_FIXTURE
    for batch in no_duplicate_batches(pairs, 8, seed=0):
        texts = [t for ex in batch for t in (ex.positive, ex.negative)]
        assert len(texts) == len(set(texts)) and len(batch) <= 8


def test_domain_model_trains_once_and_is_content_addressed(fresh_home, built_index, train_subset):
    store = RagStore(home=str(fresh_home))
    # Tiny on purpose (2 steps of 6 triplets, 48 tokens): what is tested is the plumbing, not quality.
    config = {"train_split": str(train_subset), "max_questions": 12, "batch_size": 6, "max_seq_length": 48}
    run_config = {"ops": {"domain_model": {"config": config}}}

    first = _materialize(store, run_config)
    assert not first["reused_existing"] and first["examples"] == 12
    assert first["skipped_questions"] == OFF_FIXTURE and first["index_version"] == built_index["version"]
    assert first["weights_hash"] != first["base_weights_hash"]
    model_path = Path(first["path"])
    embedder = Embedder(str(model_path))
    assert embedder.weights_hash == first["weights_hash"]  # what the vectors asset would pin
    assert embedder.encode(["How does maxSurge work?"]).shape == (1, 384)
    assert embedder.info.max_seq_length == 256  # inference length of the base model, not the training one
    record = json.loads((model_path.parent / TRAINING_JSON).read_text())
    assert record["train_data_hash"] == hashlib.sha256(train_subset.read_bytes()).hexdigest()
    assert record["trained_weights_hash"] == first["weights_hash"] and record["examples"] == first["examples"]
    assert model_path.name == MODEL_SUBDIR and not list(model_path.parent.parent.glob(".staging-*"))

    second = _materialize(store, run_config)
    assert second["reused_existing"] and second["weights_hash"] == first["weights_hash"]
    assert second["path"] == first["path"]

    # Content-addressed by chunks, not by version name: an identical rebuild reuses the model.
    store.warehouse().copy_partition("chunks", built_index["version"], "rebuilt-same-chunks")
    config["index_version"] = "rebuilt-same-chunks"
    third = _materialize(store, run_config)
    assert third["reused_existing"] and third["path"] == first["path"]
    assert third["index_version"] == "rebuilt-same-chunks" and third["chunks_version"] == first["chunks_version"]


def test_domain_model_refuses_the_eval_split(fresh_home):
    store = RagStore(home=str(fresh_home))
    eval_split = TRAIN_SPLIT.with_name("qa_eval.jsonl")
    run_config = {"ops": {"domain_model": {"config": {"train_split": str(eval_split)}}}}
    with pytest.raises(dg.Failure, match="train-split"):
        _materialize(store, run_config)


def _materialize(store: RagStore, run_config: dict) -> dict:
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([domain_model], instance=instance, resources={"store": store}, run_config=run_config)
    assert result.success
    [event] = result.asset_materializations_for_node("domain_model")
    meta = {k: v.value for k, v in event.metadata.items()}
    assert event.tags["dagster/data_version"] == meta["weights_hash"]
    return meta


def test_dense_negatives_are_the_models_top_other_page_chunk(built_index, train_subset):
    """negatives=dense: the negative is the other-page chunk the version's own vectors rank
    first for the question (recomputed here from the stored vectors)."""
    import numpy as np

    from infra_rag_assets.rag.index.embedding import shared_embedder
    from infra_rag_assets.rag.index.finetune import DenseMiner
    from infra_rag_assets.rag.index.vector_store import read_vectors

    store = RagStore(home=str(built_index["home"]))
    chunks = _chunks(built_index["home"], built_index["version"])
    stored = read_vectors(store.vectors_uri(), built_index["version"])
    vectors = np.stack([stored[c["chunk_id"]] for c in chunks])
    embedder = shared_embedder("all-MiniLM-L6-v2")
    miner = DenseMiner(vectors=vectors, encode=embedder.encode)
    pairs = load_train_pairs(train_subset, chunks, dense_miner=miner)
    bm25_pairs = load_train_pairs(train_subset, chunks)
    assert [ex.positive_chunk_id for ex in pairs] == [ex.positive_chunk_id for ex in bm25_pairs]
    index = {c["chunk_id"]: i for i, c in enumerate(chunks)}
    for ex in pairs:
        scores = vectors @ embedder.encode([ex.question])[0]
        other = [i for i, c in enumerate(chunks) if c["doc_id"] != ex.doc_id]
        assert index[ex.negative_chunk_id] == max(other, key=lambda i: scores[i])
    assert [ex.negative_chunk_id for ex in pairs] != [ex.negative_chunk_id for ex in bm25_pairs]


def test_dense_negatives_change_the_model_address_but_bm25_keeps_old_ones():
    from infra_rag_assets.defs.index.models import DomainModelConfig, model_key

    lineage = {"train_data_hash": "t", "chunks_version": "c", "base_weights_hash": "b"}
    bm25, dense = DomainModelConfig(train_split="x"), DomainModelConfig(train_split="x", negatives="dense")
    assert "negatives" not in bm25.hyper_parameters()  # models trained before the option keep their key
    assert model_key(lineage, bm25) != model_key(lineage, dense)


def test_domain_model_with_dense_negatives_mines_from_the_versions_vectors(fresh_home, built_index, train_subset):
    store = RagStore(home=str(fresh_home))
    config = {"train_split": str(train_subset), "max_questions": 6, "batch_size": 6, "max_seq_length": 32,
              "negatives": "dense"}
    meta = _materialize(store, {"ops": {"domain_model": {"config": config}}})
    assert meta["examples"] == 6 and meta["negatives"] == "dense"
    assert meta["index_version"] == built_index["version"] and not meta["reused_existing"]
