"""The HTTP service through FastAPI's TestClient on a real built fixture index."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from infra_rag_assets.rag import releases
from infra_rag_assets.rag.home import DataHome
from infra_rag_assets.service import create_app


@pytest.fixture
def client(fresh_home, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = DataHome.at(fresh_home)
    return TestClient(create_app(home)), home


def test_search_answer_and_traces(client):
    http, home = client
    reply = http.post("/search", json={"question": "How does maxSurge work?", "k": 4})
    assert reply.status_code == 200
    body = reply.json()
    assert len(body["hits"]) == 4 and body["hits"][0]["doc_id"].startswith("kubernetes:")
    filtered = http.post("/search", json={"question": "What is the target state of an application?", "k": 3,
                                          "project": "argocd"}).json()
    assert filtered["hits"] and {h["project"] for h in filtered["hits"]} == {"argocd"}
    answer = http.post("/answer", json={"question": "What does maxSurge control in a Deployment?", "offline": True})
    assert answer.status_code == 200 and answer.json()["method"] == "extractive" and answer.json()["citations"]
    assert home.warehouse().rows("SELECT count(*) FROM traces WHERE origin = 'service'")[0][0] == 3


@pytest.mark.parametrize("payload", [
    {"question": ""}, {"question": "x" * 2001}, {"question": "ok", "k": 0}, {"question": "ok", "k": 51},
    {"question": "ok", "project": "nomad"},
])
def test_input_limits_are_4xx(client, payload):
    http, _ = client
    assert http.post("/search", json=payload).status_code == 422


def test_unknown_version_and_config_are_typed_errors(client):
    http, _ = client
    missing = http.post("/search", json={"question": "ok", "version": "nope"})
    assert missing.status_code == 404 and missing.json()["error_type"] == "version_not_found"
    bad = http.post("/search", json={"question": "ok", "config": "nope"})
    assert bad.status_code == 422 and bad.json()["error_type"] == "bad_config"


def test_health_versions_release(client, built_index):
    http, home = client
    health = http.get("/health")
    assert health.status_code == 503  # index and model fine, but nothing released yet
    checks = health.json()["checks"]
    assert checks["index"]["ok"] and checks["model"]["ok"] and not checks["release"]["ok"]
    assert checks["index"]["page_index"] is True and checks["index"]["detail"] == ""
    releases.record(home.warehouse(), built_index["version"], "release")
    assert http.get("/health").status_code == 200
    assert http.get("/release").json()["current"] == built_index["version"]
    assert [v["index_version"] for v in http.get("/versions").json()] == [built_index["version"]]


def test_model_mismatch_is_typed_not_500(client, built_index, tmp_path):
    """Point the version at a real copy of the model with one weight changed: refused, typed."""
    import json
    import shutil

    from infra_rag_assets.rag.embedding import resolve_model_path

    http, home = client
    model = tmp_path / "altered-model"
    shutil.copytree(resolve_model_path("all-MiniLM-L6-v2"), model)
    weights = model / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # last byte of the last tensor: a different model by its weights hash
    weights.write_bytes(bytes(data))
    warehouse = home.warehouse()
    config = warehouse.version_config(built_index["version"]) | {"model_id": str(model)}
    warehouse.execute("UPDATE index_versions SET config_json = ? WHERE index_version = ?",
                      [json.dumps(config), built_index["version"]])
    reply = http.post("/search", json={"question": "ok"})
    assert reply.status_code == 503 and reply.json()["error_type"] == "model_unavailable"
    assert "built with" in reply.json()["error"]
    assert http.get("/health").json()["checks"]["model"]["ok"] is False


def test_version_without_page_index_serves_degraded_and_health_says_why(client, built_index):
    """A version built before page indexes existed: answers still come, marked degraded."""
    import shutil

    from infra_rag_assets.rag.lexical_store import page_index_dir

    http, home = client
    shutil.rmtree(page_index_dir(home.tantivy_root() / built_index["version"]))
    index = http.get("/health").json()["checks"]["index"]
    assert index["ok"] and index["page_index"] is False and "page term skipped" in index["detail"]
    reply = http.post("/search", json={"question": "How do I roll back a Deployment?", "k": 3})
    assert reply.status_code == 200 and len(reply.json()["hits"]) == 3
    assert reply.json()["degraded"] is True
