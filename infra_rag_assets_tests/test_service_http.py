"""HTTP conventions of the service in-process over the built fixture index: /v1 and its
deprecated aliases, X-Trace-Id, /metrics, API keys, header bounds, 405, the question schema,
draining. Streaming is in test_service_stream.py; real uvicorn processes in test_service_hostile.py."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.questions import MAX_QUESTION_CHARS, NON_BLANK_PATTERN
from infra_rag_assets.service import ServiceSettings, create_app
from infra_rag_assets.service.access import KeyFileError, load_api_keys

pytestmark = pytest.mark.build
POD = {"question": "What is a Pod?", "k": 2}


@pytest.fixture
def home(fresh_home, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    return DataHome.at(fresh_home)


@pytest.fixture
def http(home):
    with TestClient(create_app(home, ServiceSettings(poll_s=0.2))) as client:
        yield client


def samples(client: TestClient, name: str, key: str = "", **labels: str) -> float:
    """The value of one series of /metrics (0 when absent)."""
    text = client.get("/metrics", headers={"authorization": f"Bearer {key}"} if key else {}).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


def test_unversioned_paths_are_deprecated_aliases_of_v1(http):
    for path in ("/health", "/versions", "/release", "/livez", "/readyz"):
        old, new = http.get(path), http.get(f"/v1{path}")
        assert old.status_code == new.status_code
        assert (old.json().keys() == new.json().keys()) if path == "/health" else old.json() == new.json()
        assert old.headers["deprecation"] == "true" and old.headers["link"] == f'</v1{path}>; rel="successor-version"'
        assert "deprecation" not in new.headers
    old = http.post("/search", json=POD)
    assert old.status_code == 200 and old.headers["deprecation"] == "true" and len(old.json()["hits"]) == 2
    paths = http.get("/openapi.json").json()["paths"]
    assert {p for p in paths if not p.startswith("/v1")} == {"/search", "/answer", "/judge", "/health", "/versions",
                                                           "/release", "/livez", "/readyz", "/metrics"}  # fmt: skip
    assert all(op.get("deprecated") for p, ops in paths.items() if p != "/metrics" and not p.startswith("/v1")
               for op in ops.values())  # fmt: skip
    assert not any(op.get("deprecated") for p, ops in paths.items() if p.startswith("/v1") for op in ops.values())


def test_every_search_and_answer_response_carries_its_trace_id(http):
    replies = [
        http.post("/v1/search", json=POD),
        http.post("/v1/answer", json={**POD, "offline": True}),
        http.post("/v1/search", json={"question": ""}),  # 422
        http.post("/v1/answer", json={"question": "ok", "version": "nope"}),  # 404
        http.post("/v1/search", content=b"x" * (64 * 1024 + 1)),  # 413 from the middleware
    ]
    assert [r.status_code for r in replies] == [200, 200, 422, 404, 413]
    for reply in replies:
        body = reply.json()
        assert reply.headers["x-trace-id"] == (body.get("trace_id") or body["error"]["trace_id"])


def test_metrics_count_requests_by_route_template_and_status(http):
    for _ in range(5):
        assert http.post("/v1/search", json=POD).status_code == 200
    http.post("/v1/search", json={"question": "   "})
    http.post("/v1/search", content=b"x" * (64 * 1024 + 1))
    for n in range(3):  # hostile paths never become labels
        assert http.get(f"/v1/nothing-{n}").status_code == 404
    assert samples(http, "infra_rag_http_requests_total", route="/v1/search", status="200", method="POST") == 5
    assert samples(http, "infra_rag_http_requests_total", route="/v1/search", status="422") == 1
    assert samples(http, "infra_rag_http_rejections_total", route="/v1/search", reason="body_too_large") == 1
    assert samples(http, "infra_rag_http_requests_total", route="unmatched", status="404") == 3
    assert samples(http, "infra_rag_http_request_duration_seconds_count", route="/v1/search") == 7
    assert samples(http, "infra_rag_http_request_duration_seconds_count", route="unmatched") == 0
    version = http.app.state.serving.current.version
    assert samples(http, "infra_rag_release_served", version=version) == 1
    assert samples(http, "infra_rag_http_inflight_requests") == 1  # the scrape itself
    text = http.get("/metrics").text
    assert "infra_rag_trace_queue_depth" in text and http.get("/metrics").headers["content-type"].startswith(
        "text/plain; version="
    )
    assert not re.search(r'route="/v1/nothing', text)


def test_api_keys_guard_everything_but_the_probes(home, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("# ops team\nfirst-key\n\n  second-key  \n")
    with TestClient(create_app(home, ServiceSettings(api_keys=load_api_keys(str(keys))))) as http:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "Basic second-key"},
                        {"authorization": "Bearer "}, {"authorization": "Bearer first-key-and-more"}):  # fmt: skip
            reply = http.post("/v1/search", json=POD, headers=headers)
            assert reply.status_code == 401, headers
            assert reply.json()["error"]["type"] == "unauthorized" and reply.headers["www-authenticate"].startswith(
                "Bearer"
            )
        for path in ("/v1/health", "/metrics", "/openapi.json", "/search"):
            assert http.get(path).status_code == 401
        for path in ("/v1/livez", "/v1/readyz", "/livez", "/readyz"):
            assert http.get(path).status_code == 200
        good = http.post("/v1/search", json=POD, headers={"authorization": "Bearer second-key"})
        assert good.status_code == 200 and good.json()["hits"]
        assert http.get("/metrics", headers={"authorization": "bearer first-key"}).status_code == 200
        assert samples(http, "infra_rag_http_requests_total", "first-key", route="/v1/search", status="401") == 5


def test_key_sources_fail_closed(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.write_text("# nothing here\n\n")
    with pytest.raises(KeyFileError, match="holds no key"):
        load_api_keys(str(empty))
    with pytest.raises(KeyFileError, match="API key file"):
        load_api_keys(str(tmp_path / "missing"))
    assert load_api_keys("", "") == ()
    from infra_rag_assets import settings

    monkeypatch.setenv("INFRA_RAG_API_KEY", " from-secret ")
    assert load_api_keys("", settings.api_key()) == ("from-secret",)
    assert "from-secret" not in repr(ServiceSettings(api_keys=("from-secret",)))


def test_too_many_or_too_large_headers_are_431_and_others_still_served(http):
    limits = ServiceSettings()
    many = {f"x-h{i}": "v" for i in range(limits.max_header_count + 1)}
    large = {"x-big": "v" * (limits.max_header_bytes + 1)}
    for headers in (many, large):
        reply = http.post("/v1/search", json=POD, headers=headers)
        assert reply.status_code == 431 and reply.json()["error"]["type"] == "headers_too_large"
        assert reply.headers["x-trace-id"] == reply.json()["error"]["trace_id"]
    assert http.post("/v1/search", json=POD, headers={f"x-h{i}": "v" for i in range(20)}).status_code == 200


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH", "FOO"])
def test_a_method_a_route_does_not_take_is_405_in_the_envelope(http, method):
    reply = http.request(method, "/v1/search")
    assert reply.status_code == 405 and reply.json()["error"]["type"] == "method_not_allowed"
    assert "POST" in reply.headers["allow"]
    metric_method = method if method != "FOO" else "other"
    assert samples(http, "infra_rag_http_requests_total", route="/v1/search", method=metric_method) == 1


def test_the_schema_states_what_validation_refuses(http):
    schema = http.get("/openapi.json").json()["components"]["schemas"]
    for model in ("SearchRequest", "AnswerRequest", "JudgeRequest"):
        question = schema[model]["properties"]["question"]
        assert (question["minLength"], question["maxLength"]) == (1, MAX_QUESTION_CHARS)
        assert question["pattern"] == NON_BLANK_PATTERN
    pattern = re.compile(NON_BLANK_PATTERN)
    whitespace = [c for c in map(chr, range(0x110000)) if c.isspace()]
    assert not any(pattern.search(c) for c in whitespace) and pattern.search("\u200b")  # zero-width: not space
    # the boundaries the schema states are where validation answers 422, plus what a pattern cannot
    # state: a question of only invisible characters (zero-width space) is blank too
    cases = [("x" * MAX_QUESTION_CHARS, 200), (" " + "x" * MAX_QUESTION_CHARS, 422), ("\u3000\u2028", 422),
             ("\x1c", 422), ("\u200b", 422)]  # fmt: skip
    for question, status in cases:
        assert http.post("/v1/search", json={"question": question, "k": 1}).status_code == status, repr(question)


def test_a_draining_worker_is_not_ready_and_closes_connections(http):
    http.app.state.serving.draining = True
    ready = http.get("/v1/readyz")
    assert ready.status_code == 503 and ready.json()["detail"].startswith("draining")
    served = http.post("/v1/search", json=POD)
    assert served.status_code == 200 and served.headers["connection"] == "close"
