"""`infra-rag search/answer/traces` against a real built fixture index."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from infra_rag_assets.cli import main


@pytest.fixture
def run(fresh_home, monkeypatch):
    monkeypatch.setenv("INFRA_RAG_HOME", str(fresh_home))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(main, list(args), catch_exceptions=False)


def test_batch_contract(run, tmp_path, built_index):
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in [
        {"id": "a", "question": "How does maxSurge limit pods during a Deployment rollout?"},
        {"id": "b", "question": "How do I protect the Prometheus UI with basic auth?"},
    ]) + "\n")
    result = run("search", "--batch", str(questions), "--k", "5", "--mode", "hybrid")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in lines] == ["a", "b"]
    for record in lines:
        assert set(record) == {"id", "hits", "abstained", "latency_ms"} and len(record["hits"]) == 5
        assert set(record["hits"][0]) == {"chunk_id", "doc_id", "project", "page_id", "url", "section", "score", "text"}
    assert lines[0]["hits"][0]["page_id"] == "concepts_workloads_controllers_deployment"
    assert lines[0]["hits"][0]["url"].startswith("https://kubernetes.io/docs/concepts/workloads/controllers/deployment/")
    assert lines[1]["hits"][0]["doc_id"] == "prometheus-site:guides_basic-auth"

    traces = run("traces", "--last", "5")
    assert traces.exit_code == 0 and traces.stdout.count("cli-batch") == 2


@pytest.mark.parametrize("mode", ["dense", "lexical"])
def test_single_modes_and_version(run, built_index, mode):
    result = run("search", "What is a Pod?", "--mode", mode, "--k", "3", "--json",
                 "--version", built_index["version"])
    record = json.loads(result.stdout)
    assert result.exit_code == 0 and len(record["hits"]) == 3


def test_offline_answer_cites_passages(run):
    result = run("answer", "What does the maxSurge field of a Deployment control?", "--json")
    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout)
    assert reply["method"] == "extractive" and reply["outcome"] == "answered"
    assert reply["text"].startswith("Extractive answer") and reply["citations"]
    assert any("deployment" in c["doc_id"] for c in reply["citations"])


@pytest.mark.parametrize("args, message", [
    (["search"], "give either a QUESTION or --batch FILE"),
    (["search", "x", "--config", "nope"], "unknown retrieval config 'nope'"),
    (["search", "x", "--version", "missing"], "has no chunks"),
])
def test_bad_input_is_one_line(run, args, message):
    result = run(*args)
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_bad_batch_line(run, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "ok"}\nnot json\n')
    result = run("search", "--batch", str(bad))
    assert result.exit_code == 2 and "bad.jsonl:2: not a JSON object" in result.output
