"""source_pages and documents materialized in-process on a real ephemeral Dagster instance."""

from __future__ import annotations

import json

import pytest

from infra_rag_assets.control.builds import materialize_version, register_version
from infra_rag_assets.defs.resources import DataHomeResource

pytestmark = pytest.mark.build


def _docs(store: DataHomeResource, version: str) -> dict[str, dict]:
    frame = store.data_home().warehouse().frame("SELECT * FROM documents WHERE index_version = ?", [version])
    return {row["doc_id"]: row for row in frame.to_dicts()}


def test_ingestion_materializes_every_page_with_a_status(pipeline_env):
    instance, store, settings = pipeline_env
    version = register_version(instance, store, settings, created_by="test")
    assert instance.has_dynamic_partition("index_version", version)
    result = materialize_version(version, ["source_pages", "documents"], instance, store, settings)
    assert result.success

    pages = store.data_home().warehouse().frame("SELECT * FROM source_pages WHERE index_version = ?", [version])
    docs = _docs(store, version)
    assert len(pages) == len(docs) == 12  # every file gets exactly one record
    assert docs["kubernetes:concepts_services-networking_endpoint-slices"]["status"] == "ok"
    assert docs["kubernetes:empty"]["status"] == "no_content"
    assert docs["alerting-html:nav"]["status"] == "no_content"
    assert docs["alerting-html:routing"]["status"] == "ok"
    assert docs["cncf-whitepapers:random"]["status"] == "error" and docs["cncf-whitepapers:random"]["reason"]
    pdf = docs["cncf-whitepapers:supply-chain"]
    assert pdf["status"] == "ok" and json.loads(pdf["page_spans_json"])
    # index page whose only text is its description is still a document
    assert docs["kubernetes:tasks"]["status"] == "ok"
    for row in docs.values():
        assert "{{<" not in row["text"] and "{{%" not in row["text"]
        for section in json.loads(row["sections_json"]):
            assert row["text"][section["heading_start"] : section["heading_end"]] == section["heading"]

    checks = {e.asset_check_key.name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["documents_spans_are_exact"] is True
    materializations = result.asset_materializations_for_node("documents")
    assert materializations[0].metadata["dagster/row_count"].value == 12


def test_rematerializing_a_partition_replaces_rows_and_reuses_parses(pipeline_env):
    instance, store, settings = pipeline_env
    version = register_version(instance, store, settings, created_by="test")
    assert materialize_version(version, ["source_pages", "documents"], instance, store, settings).success
    assert materialize_version(version, ["source_pages", "documents"], instance, store, settings).success
    count = (
        store.data_home().warehouse().rows("SELECT count(*) FROM documents WHERE index_version = ?", [version])[0][0]
    )
    assert count == 12

    second = register_version(instance, store, settings, created_by="test")
    assert second != version
    result = materialize_version(second, ["source_pages", "documents"], instance, store, settings)
    reused = result.asset_materializations_for_node("documents")[0].metadata["reused_parses"].value
    assert reused >= 10  # unchanged bytes are not parsed again
    assert _docs(store, second).keys() == _docs(store, version).keys()


def test_version_records_its_configuration(pipeline_env):
    instance, store, settings = pipeline_env
    version = register_version(instance, store, settings, created_by="test")
    config = store.data_home().warehouse().version_config(version)
    assert {s["name"] for s in config["sources"]} >= {"kubernetes", "cncf-whitepapers"}
    assert all(s["fingerprint"] for s in config["sources"])
    assert config["model_id"] == "all-MiniLM-L6-v2" and config["parsers"]["pdf_files"].startswith("pdf@")
