"""What outside probes found, in-process (TestClient, lifespan on) over the built fixture index:
health that clients cannot flip, health without paths, and bad inputs each refused as what
they are."""

from __future__ import annotations

import json
import shutil

import pytest
from fastapi.testclient import TestClient

from infra_rag_assets.rag.operate import releases
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.operate.traces import read_traces
from infra_rag_assets.rag.search.health import full_health
from infra_rag_assets.service import ServiceSettings, create_app

pytestmark = pytest.mark.build

SEARCH = {"question": "How does maxSurge limit pods during a Deployment rollout?", "k": 3}


@pytest.fixture
def http(fresh_home, built_index, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    releases.record(DataHome.at(fresh_home).warehouse(), built_index["version"], "release", reason="test")
    with TestClient(create_app(DataHome.at(fresh_home), ServiceSettings(poll_s=0.2))) as client:
        yield client


def _hostile_4xx(http: TestClient, rounds: int) -> list[int]:
    statuses = []
    for i in range(rounds):
        for method, path, kwargs in (
            ("POST", "/v1/search", {"json": {**SEARCH, "version": f"no-such-{i}"}}),  # traced, then 404
            ("POST", "/v1/answer", {"json": {**SEARCH, "version": f"gone-{i}", "offline": True}}),
            ("POST", "/v1/search", {"json": {**SEARCH, "k": 500}}),
            ("POST", "/v1/search", {"content": b"{not json"}),
            ("DELETE", "/v1/search", {}),
            ("POST", "/v1/search", {"content": b"x" * 70_000}),
        ):
            statuses.append(http.request(method, path, **kwargs).status_code)
    return statuses


def test_a_stream_of_client_errors_never_makes_health_unhealthy(http):
    home = http.app.state.serving.home
    assert http.post("/v1/search", json=SEARCH).status_code == 200
    statuses = _hostile_4xx(http, 25)
    assert set(statuses) <= {400, 404, 405, 413, 422} and statuses.count(404) == 50
    assert http.app.state.serving.sink.flush()
    traces = read_traces(home.traces_dir())
    assert (traces["outcome"] == "client_error").sum() == 50  # traced, as what they are
    assert (traces["outcome"] == "error").sum() == 0
    report = full_health(home)
    assert report["checks"]["traces"]["ok"] and report["checks"]["traces"]["errors"] == 0, report["checks"]["traces"]
    served = http.get("/v1/health")
    assert served.status_code == 200 and served.json()["checks"]["traces"]["ok"], served.text


def test_an_unusable_traces_folder_is_a_named_cause_without_paths(fresh_home, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = tmp_path / "copied"
    shutil.copytree(fresh_home, home)
    shutil.rmtree(home / "traces", ignore_errors=True)
    (home / "traces").write_text("a file where the traces folder should be")
    with TestClient(create_app(DataHome.at(home), ServiceSettings(poll_s=0.2))) as http:
        assert http.post("/v1/search", json=SEARCH).status_code == 200  # the answer is not lost
        http.app.state.serving.sink.flush()
        served = http.get("/v1/health")
    body = served.text
    assert served.status_code == 503, body
    traces = served.json()["checks"]["traces"]
    assert traces["cause"] == "traces_unwritable" and not traces["ok"], traces
    assert str(tmp_path) not in body and "/tmp" not in body and str(home) not in body, body
    cli = full_health(DataHome.at(home))["checks"]["traces"]
    assert cli["cause"] == "traces_unwritable" and not cli["ok"] and str(home) not in json.dumps(cli), cli


DEEP = b"[" * 30_000 + b"]" * 30_000  # 60 KB: under the body limit, past Python's recursion limit


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "says"),
    [
        ("GET", "/v1/health/", {"headers": {"Host": "evil.example"}}, 404, "not_found"),
        ("GET", "/v1/search/", {"headers": {"Host": "evil.example"}}, 404, "not_found"),
        ("POST", "/v1/search", {"content": DEEP, "headers": {"Content-Type": "application/json"}}, 400, "nested"),
        ("POST", "/v1/judge", {"content": DEEP, "headers": {"Content-Type": "application/json"}}, 400, "nested"),
        ("POST", "/v1/search", {"json": {"question": "\u200b\u200b\u200b"}}, 422, "blank"),
        ("POST", "/v1/search", {"json": {"question": " \ufeff\u2060\u200d\u200c "}}, 422, "blank"),
        ("POST", "/v1/answer", {"json": {"question": "\u3164\u2800\u00ad", "offline": True}}, 422, "blank"),
        ("POST", "/v1/search", {"json": {"question": "\u200bWhat is a Pod?"}}, 200, "hits"),
    ],
    ids=[
        "health-slash-host",
        "search-slash-host",
        "deep-search",
        "deep-judge",
        "zwsp",
        "bom-joiners",
        "fillers",
        "zwsp-prefix-ok",
    ],  # fmt: skip
)
def test_bad_inputs_are_refused_as_what_they_are(http, method, path, kwargs, status, says):
    reply = http.request(method, path, follow_redirects=False, **kwargs)
    assert reply.status_code == status, reply.text[:300]
    assert "evil.example" not in reply.headers.get("location", "") and says in reply.text, reply.text[:300]


@pytest.mark.parametrize("path", ["/v1/health", "/v1/livez", "/v1/readyz", "/v1/versions", "/v1/release", "/metrics"])
def test_head_is_answered_for_every_get_route(http, path):
    got, head = http.get(path), http.head(path)
    assert head.status_code == got.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    assert http.head("/v1/search").status_code == 405  # a POST route still says what it takes
