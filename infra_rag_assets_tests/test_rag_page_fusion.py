"""Page-level terms and the per-page cap: by hand, then on the real fixture index."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from infra_rag_assets.defs.resources import DataHomeResource, EmbedderResource
from infra_rag_assets.rag.index.lexical_store import LexicalSearcher
from infra_rag_assets.rag.index.page_index import page_index_dir
from infra_rag_assets.rag.search.fusion import add_page_terms, best_per_page, cap_per_page
from infra_rag_assets.rag.search.retrieval import NAMED_CONFIGS, catalog_from_rows, open_retriever

PAGE = {"a1": "A", "a2": "A", "b1": "B", "c1": "C"}.get


@pytest.mark.unit
def test_page_terms_by_hand():
    fused = [("a1", 0.9), ("b1", 0.8), ("a2", 0.1), ("c1", 0.05)]
    page_lexical = [("B", 10.0), ("C", 6.0), ("A", 2.0)]  # -> B 1.0, C 0.5, A 0.0
    dense = [("a2", 0.7), ("b1", 0.5), ("a1", 0.3)]  # page best: A 0.7, B 0.5 -> A 1.0, B 0.0
    out = dict(
        add_page_terms(fused, PAGE, page_lexical=page_lexical, page_weight=0.5, dense=dense, page_dense_weight=0.2)
    )
    assert out == pytest.approx({"a1": 0.9 + 0.2, "b1": 0.8 + 0.5, "a2": 0.1 + 0.2, "c1": 0.05 + 0.25})
    ranked = [c for c, _ in add_page_terms(fused, PAGE, page_lexical=page_lexical, page_weight=0.5)]
    assert ranked == ["b1", "a1", "c1", "a2"]
    assert best_per_page(dense, PAGE) == {"A": 0.7, "B": 0.5}
    assert add_page_terms(fused, PAGE) == sorted(fused, key=lambda x: -x[1])  # no weights: unchanged


@pytest.mark.unit
def test_cap_moves_overflow_behind_in_order():
    items = ["a1", "a2", "b1", "a3", "c1", "b2", "b3"]
    page = lambda c: c[0]  # noqa: E731
    assert cap_per_page(items, page, 1) == ["a1", "b1", "c1", "a2", "a3", "b2", "b3"]
    assert cap_per_page(items, page, 2) == ["a1", "a2", "b1", "c1", "b2", "a3", "b3"]
    assert cap_per_page(items, page, 0) == items


@pytest.mark.unit
def test_page_config_hash_and_validation():
    base = NAMED_CONFIGS["hybrid-weighted"]
    # Page knobs at defaults do not enter the hash: results recorded before they existed stay comparable.
    assert dataclasses.replace(base, page_depth=100).config_hash() == base.config_hash()
    assert NAMED_CONFIGS["hybrid-page"].config_hash() != base.config_hash()
    for bad in ({"page_weight": -1}, {"max_per_page": -2}, {"page_depth": 0}):
        with pytest.raises(ValueError):
            dataclasses.replace(base, **bad)


@pytest.fixture(scope="module")
def index(built_index):
    store, version = DataHomeResource(home=str(built_index["home"])), built_index["version"]
    frame = store.data_home().warehouse().frame("SELECT * FROM chunks WHERE index_version = ?", [version])
    embedder = EmbedderResource().embedder("all-MiniLM-L6-v2")
    return store, version, catalog_from_rows(frame.iter_rows(named=True)), embedder


QUESTION = "How do I roll back a Deployment to a previous revision?"


@pytest.mark.build
def test_page_index_has_one_document_per_page(index):
    store, version, catalog, _ = index
    pages = LexicalSearcher.open(page_index_dir(store.data_home().version(version).tantivy))
    assert pages.doc_count() == len({row["doc_id"] for row in catalog.values()})
    top = pages.search(QUESTION, 3)
    assert top[0][0] == "kubernetes:concepts_workloads_controllers_deployment"  # ids are page ids


@pytest.mark.build
def test_hybrid_page_uses_the_page_index_and_caps_pages(index):
    store, version, catalog, embedder = index
    config = NAMED_CONFIGS["hybrid-page"]
    result = open_retriever(
        store.data_home().vectors_uri(), store.data_home().version(version).tantivy, catalog, embedder, config
    ).search(QUESTION, k=6)
    assert not result.degraded and result.timings_ms["page"] > 0
    assert result.hits[0].doc_id == "kubernetes:concepts_workloads_controllers_deployment"
    pages = [h.doc_id for h in result.hits]
    head = pages[: len(set(pages)) * config.max_per_page]
    assert all(head.count(p) <= config.max_per_page for p in set(head))
    plain = open_retriever(
        store.data_home().vectors_uri(),
        store.data_home().version(version).tantivy,
        catalog,
        embedder,
        NAMED_CONFIGS["hybrid-weighted"],
    ).search(QUESTION, k=6)
    assert [h.score for h in result.hits] != [h.score for h in plain.hits]  # the page terms were added


@pytest.mark.build
def test_version_without_page_index_degrades_instead_of_failing(index, tmp_path):
    store, version, catalog, embedder = index
    chunk_dir = tmp_path / version
    shutil.copytree(store.data_home().version(version).tantivy, chunk_dir)  # chunk index only, no sibling .pages
    result = open_retriever(
        store.data_home().vectors_uri(), chunk_dir, catalog, embedder, NAMED_CONFIGS["hybrid-page"], version=version
    ).search(QUESTION, k=5)
    assert result.degraded and "no page index" in result.degraded_reason and len(result.hits) == 5
