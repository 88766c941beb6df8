"""chunks, vectors and lexical_index materialized in-process with the real model and stores."""

from __future__ import annotations

import dagster as dg
import pytest

from infra_rag_assets.control.builds import materialize_version, register_version
from infra_rag_assets.control.stages import index_stages
from infra_rag_assets.defs.resources import BuildResource, DataHomeResource, EmbedderResource
from infra_rag_assets.rag.index.lexical_store import LexicalSearcher
from infra_rag_assets.rag.index.vector_store import count_rows, read_model_info

pytestmark = pytest.mark.build

STAGES = index_stages()


@pytest.fixture
def env(tmp_path, fixture_sources):
    store = DataHomeResource(home=str(tmp_path / "home"))
    settings = BuildResource(sources_file=str(fixture_sources), chunk_target_tokens=200, chunk_max_tokens=224)
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance, store, settings


def _build(instance, store, settings):
    version = register_version(instance, store, settings, created_by="test")
    result = materialize_version(version, STAGES, instance, store, settings, EmbedderResource(batch_size=16))
    assert result.success
    return version, result


def _meta(result, asset: str) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node(asset)[0].metadata.items()}


def test_full_chain_builds_consistent_indexes(env):
    instance, store, settings = env
    version, result = _build(instance, store, settings)
    chunks = (
        store.data_home()
        .warehouse()
        .frame(
            "SELECT c.*, d.text AS doc_text FROM chunks c JOIN documents d "
            "USING (index_version, doc_id) WHERE index_version = ?",
            [version],
        )
    )
    assert len(chunks) > 20
    for row in chunks.iter_rows(named=True):
        assert row["doc_text"][row["start_char"] : row["end_char"]] == row["text"]
        assert 0 < row["token_count"] <= 224
    assert count_rows(store.data_home().vectors_uri(), version) == len(chunks)
    assert LexicalSearcher.open(store.data_home().version(version).tantivy).doc_count() == len(chunks)
    info = read_model_info(store.data_home().vectors_uri(), version)
    assert info["weights_hash"] == store.data_home().warehouse().version_config(version)["model_hash"]
    assert int(info["dimension"]) == 384
    checks = {e.asset_check_key.name: e.passed for e in result.get_asset_check_evaluations()}
    assert len(checks) == 6
    assert checks.pop("documents_failure_rate") is False  # WARN: the fixture's random-bytes PDF is 1 of 2
    assert all(checks.values()), checks
    vectors_meta = _meta(result, "vectors")
    assert vectors_meta["texts_embedded"] > 0 and vectors_meta["cache_hits"] == 0
    pdf_chunks = chunks.filter(chunks["project"] == "cncf")
    assert pdf_chunks["pages"].list.len().min() >= 1 and pdf_chunks["url"].str.contains("#page=").all()


def test_second_version_reuses_every_vector_and_edit_reembeds_only_that_page(env, fixture_corpus):
    instance, store, settings = env
    _build(instance, store, settings)
    _, second = _build(instance, store, settings)
    assert _meta(second, "vectors")["texts_embedded"] == 0  # unchanged corpus: nothing re-embedded

    page = fixture_corpus / "argocd" / "core_concepts.md"
    page.write_text(page.read_text() + "\n\n## Added section\n\nA brand new paragraph about sync waves.\n")
    version, third = _build(instance, store, settings)
    embedded = _meta(third, "vectors")["texts_embedded"]
    argocd_chunks = (
        store.data_home()
        .warehouse()
        .rows("SELECT count(*) FROM chunks WHERE index_version = ? AND doc_id = 'argocd:core_concepts'", [version])[0][
            0
        ]
    )
    assert 1 <= embedded <= argocd_chunks  # only chunks of the edited page


def test_lexical_index_finds_identifiers(built_index):
    store, version = DataHomeResource(home=str(built_index["home"])), built_index["version"]
    searcher = LexicalSearcher.open(store.data_home().version(version).tantivy)
    hits = searcher.search("maxSurge", 5)
    doc_ids = (
        store.data_home()
        .warehouse()
        .frame("SELECT chunk_id, doc_id FROM chunks WHERE index_version = ?", [version])
        .rows_by_key("chunk_id")
    )
    assert hits and doc_ids[hits[0][0]][0][0] == "kubernetes:concepts_workloads_controllers_deployment"
