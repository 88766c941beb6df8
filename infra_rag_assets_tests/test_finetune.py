"""Pair mining on real train questions (rag/adapt/finetune.py); the asset is test_domain_model.py.

The fixture corpus holds one Kubernetes page with train questions
(``concepts/workloads/controllers/deployment.md``: 30 real questions of the train split), so
the pairs are real train questions against real chunks; a few train questions whose pages are
not in the fixture are added to prove they are skipped and counted.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from conftest import OFF_FIXTURE, PAGE

from infra_rag_assets.defs.resources import DataHomeResource
from infra_rag_assets.rag.adapt.finetune import load_train_pairs, no_duplicate_batches
from infra_rag_assets.rag.index.corpus_chunks import embed_input
from infra_rag_assets.rag.operate.warehouse import Warehouse

pytestmark = pytest.mark.build


def _chunks(home: Path, version: str) -> list[dict]:
    frame = Warehouse(home / "warehouse.duckdb").frame(
        "SELECT chunk_id, doc_id, text, context FROM chunks WHERE index_version = ? ORDER BY chunk_id", [version]
    )
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


def test_dense_negatives_are_the_models_top_other_page_chunk(built_index, train_subset):
    """negatives=dense: the negative is the other-page chunk the version's own vectors rank
    first for the question (recomputed here from the stored vectors)."""
    import numpy as np

    from infra_rag_assets.rag.adapt.finetune import DenseMiner
    from infra_rag_assets.rag.index.embedding import shared_embedder
    from infra_rag_assets.rag.index.vector_store import read_vectors

    store = DataHomeResource(home=str(built_index["home"]))
    chunks = _chunks(built_index["home"], built_index["version"])
    stored = read_vectors(store.data_home().vectors_uri(), built_index["version"])
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
