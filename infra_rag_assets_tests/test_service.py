"""The HTTP service in-process (FastAPI TestClient, lifespan on) over a real built fixture index:
strict inputs with exact status codes, error bodies, OpenAPI, health/versions/release, traces."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from infra_rag_assets.rag.operate import releases
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.operate.traces import read_traces
from infra_rag_assets.service import ServiceSettings, create_app

pytestmark = pytest.mark.build


@pytest.fixture
def client(fresh_home, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = DataHome.at(fresh_home)
    with TestClient(create_app(home, ServiceSettings(poll_s=0.2))) as http:
        yield http, home


def test_search_answer_and_traces(client):
    http, home = client
    reply = http.post("/v1/search", json={"question": "How does maxSurge work?", "k": 4})
    assert reply.status_code == 200
    body = reply.json()
    assert len(body["hits"]) == 4 and body["hits"][0]["doc_id"].startswith("kubernetes:")
    filtered = http.post(
        "/v1/search",
        json={
            "question": "What is the target state of an application?",
            "k": 3,
            "project": "argocd",
            "mode": "lexical",
        },
    ).json()
    assert filtered["hits"] and {h["project"] for h in filtered["hits"]} == {"argocd"}
    assert filtered["config"] == "lexical"
    answer = http.post("/v1/answer", json={"question": "What does maxSurge control in a Deployment?", "offline": True})
    assert answer.status_code == 200 and answer.json()["method"] == "extractive" and answer.json()["citations"]
    http.app.state.serving.sink.flush()
    traces = read_traces(home.traces_dir())
    assert set(traces["trace_id"]) == {body["trace_id"], filtered["trace_id"], answer.json()["trace_id"]}
    assert set(traces["origin"]) == {"service"}


# (payload or raw body, status, error type, field) — the contract for bad input.
BAD_INPUTS = [
    ({"question": ""}, 422, "invalid_request", "question"),
    ({"question": "   \n\t "}, 422, "invalid_request", "question"),
    ({"question": "x" * 2001}, 422, "invalid_request", "question"),
    ({"question": "\ud800"}, 422, "invalid_request", "question"),
    ({"question": "a\x00b"}, 422, "invalid_request", "question"),
    ({"question": 42}, 422, "invalid_request", "question"),
    ({"question": None}, 422, "invalid_request", "question"),
    ({}, 422, "invalid_request", "question"),
    ({"question": "ok", "k": 0}, 422, "invalid_request", "k"),
    ({"question": "ok", "k": 51}, 422, "invalid_request", "k"),
    ({"question": "ok", "k": "5"}, 422, "invalid_request", "k"),
    ({"question": "ok", "k": True}, 422, "invalid_request", "k"),
    ({"question": "ok", "k": 5.0}, 422, "invalid_request", "k"),
    ({"question": "ok", "mode": "bogus"}, 422, "invalid_request", "mode"),
    ({"question": "ok", "config": "nope"}, 422, "invalid_request", "config"),
    ({"question": "ok", "project": "nomad"}, 422, "invalid_request", "project"),
    ({"question": "ok", "version": "../../etc"}, 422, "invalid_request", "version"),
    ({"question": "ok", "extra": 1}, 422, "invalid_request", "extra"),
    ({"question": "ok", "offline": 0}, 422, "invalid_request", "offline"),
    (["question", "ok"], 422, "invalid_request", None),
    (b'{"question": "ok"', 400, "invalid_json", None),
    (b'{"question": "\xff\xfe"}', 400, "invalid_json", None),
    (b"x" * (64 * 1024 + 1), 413, "body_too_large", None),
]


@pytest.mark.parametrize("prefix", ["/v1", ""], ids=["v1", "deprecated-alias"])
@pytest.mark.parametrize("payload, status, error_type, field", BAD_INPUTS)
def test_bad_inputs_get_exact_status_and_a_safe_error_body(client, payload, status, error_type, field, prefix):
    http, _ = client
    path = prefix + ("/answer" if isinstance(payload, dict) and "offline" in payload else "/search")
    if isinstance(payload, bytes):
        reply = http.post(path, content=payload, headers={"content-type": "application/json"})
    else:
        reply = http.post(path, content=json.dumps(payload), headers={"content-type": "application/json"})
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["type"] == error_type and len(error["trace_id"]) == 32 and error["message"]
    if field:
        assert error["field"] == field and error["message"].startswith(field)
    assert "Traceback" not in reply.text and "/" not in error["message"].replace(" / ", "")
    # the connection and the service stay usable after every bad request
    assert http.post("/v1/search", json={"question": "What is a Pod?", "k": 1}).status_code == 200


def test_a_chunked_body_over_the_limit_is_413_not_a_json_error(client):
    http, _ = client

    def chunks(total: int):
        piece = b'{"question": "' + b"x" * 8192
        yield piece
        for _ in range(total // 8192):
            yield b"x" * 8192

    reply = http.post("/v1/search", content=chunks(80 * 1024), headers={"content-type": "application/json"})
    assert reply.status_code == 413 and reply.json()["error"]["type"] == "body_too_large"
    small = http.post(
        "/v1/search",
        content=iter([b'{"question": "What is a Pod?",', b' "k": 1}']),
        headers={"content-type": "application/json"},
    )
    assert small.status_code == 200 and len(small.json()["hits"]) == 1  # a chunked body under the limit is read whole


def test_unknown_version_is_404_and_traced(client):
    http, home = client
    missing = http.post("/v1/search", json={"question": "ok", "version": "nope"})
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "version_not_found"
    http.app.state.serving.sink.flush()
    traced = read_traces(home.traces_dir())
    assert traced.filter(traced["trace_id"] == missing.json()["error"]["trace_id"])["outcome"].to_list() == [
        "client_error"
    ]  # a 4xx: never a health error


@pytest.mark.parametrize("name", ["release.json", "release.json.tmp", "nope", "a.b", "x" * 100])
def test_any_name_that_is_not_a_built_version_is_404(client, name):
    """Names of other files under serving/ (the release pointer) are not versions either."""
    http, home = client
    (home.serving_root() / "release.json.tmp").write_text("{}")
    for route in ("/v1/search", "/v1/answer"):
        reply = http.post(route, json={"question": "What is a Pod?", "version": name})
        assert reply.status_code == 404 and reply.json()["error"]["type"] == "version_not_found", reply.text
        assert "Traceback" not in reply.text and str(home.root) not in reply.text


def test_liveness_never_needs_an_index_and_readiness_needs_a_warm_version(client, tmp_path):
    http, _ = client
    assert http.get("/v1/livez").json() == {"ok": True, "version": None, "detail": ""}
    ready = http.get("/v1/readyz")
    assert ready.status_code == 200 and ready.json()["ok"] and ready.json()["version"]
    assert ready.json()["version"] == http.app.state.serving.current.version
    with TestClient(create_app(DataHome.at(tmp_path / "empty"), ServiceSettings(poll_s=0.2))) as empty:
        assert empty.get("/v1/livez").status_code == 200  # a pod without a release is alive: no restart loop
        not_ready = empty.get("/v1/readyz")
        assert not_ready.status_code == 503 and not_ready.json()["ok"] is False
        assert "no built index version" in not_ready.json()["detail"]
        assert empty.get("/v1/health").status_code == 503


def test_health_shows_no_filesystem_path(client, monkeypatch):
    """/health is unauthenticated: an adapted model (a directory under the home) is named
    relative to the data home, never by its absolute path."""
    http, home = client
    engine = http.app.state.serving.current
    monkeypatch.setattr(engine, "model_id", str(home.root / "models" / "0123abcd" / "model"))
    reply = http.get("/v1/health")
    assert str(home.root) not in reply.text and "/tmp" not in reply.text
    assert reply.json()["checks"]["model"]["model_id"] == "models/0123abcd/model"


def test_unexpected_errors_are_500_logged_with_traceback(client, caplog, monkeypatch):
    http, _ = client
    engine = http.app.state.serving.current

    def broken(*_, **__):
        raise RuntimeError("secret internal path /var/lib/x")

    monkeypatch.setattr(engine, "search", broken)
    with caplog.at_level("ERROR", logger="infra_rag_assets.service"):
        reply = http.post("/v1/search", json={"question": "What is a Pod?"})
    assert reply.status_code == 500 and reply.json()["error"]["type"] == "internal"
    assert "secret" not in reply.text
    assert any(r.exc_info and "secret internal path" in str(r.exc_info[1]) for r in caplog.records)


def test_openapi_lists_response_models(client):
    http, _ = client
    schema = http.get("/openapi.json").json()
    search = schema["paths"]["/v1/search"]["post"]["responses"]
    assert (
        schema["paths"]["/search"]["post"]["deprecated"] is True
        and "deprecated" not in schema["paths"]["/v1/search"]["post"]
    )
    assert search["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/SearchResponse")
    assert search["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")
    assert "AnswerResponse" in schema["components"]["schemas"]


def test_health_versions_release(client, built_index):
    http, home = client
    health = http.get("/v1/health")
    assert health.status_code == 503  # index and model fine, but nothing released yet
    checks = health.json()["checks"]
    assert checks["index"]["ok"] and checks["model"]["ok"] and not checks["release"]["ok"]
    assert checks["index"]["page_index"] is True and checks["traces"]["ok"] and checks["load"]["rejected"] == 0
    releases.record(home.warehouse(), built_index["version"], "release")
    assert http.get("/v1/health").status_code == 200
    release = http.get("/v1/release").json()
    assert release["current"] == release["serving"] == built_index["version"]
    assert [v["index_version"] for v in http.get("/v1/versions").json()] == [built_index["version"]]


def test_the_request_path_never_opens_the_warehouse(client, monkeypatch):
    http, _ = client
    from infra_rag_assets.rag.operate.warehouse import Warehouse

    def forbidden(*_, **__):
        raise AssertionError("the request path opened the build warehouse")

    monkeypatch.setattr(Warehouse, "connect", forbidden)
    for path, body in (
        ("/v1/search", {"question": "What is a Pod?"}),
        ("/v1/answer", {"question": "What is a Pod?", "offline": True}),
    ):
        assert http.post(path, json=body).status_code == 200
    for path in ("/v1/health", "/v1/versions", "/v1/release"):
        assert http.get(path).status_code in (200, 503)


def test_without_lifespan_events_the_release_opens_on_first_use(fresh_home):
    app = create_app(DataHome.at(fresh_home))
    http = TestClient(app)  # no `with`: the lifespan (and its watcher) never runs
    try:
        assert http.post("/v1/search", json={"question": "What is a Pod?", "k": 2}).status_code == 200
    finally:
        app.state.serving.sink.close()
