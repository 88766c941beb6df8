"""`infra-rag search/answer/traces` against a real built fixture index."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from infra_rag_assets.cli import main

pytestmark = pytest.mark.build


@pytest.fixture
def run(fresh_home, monkeypatch):
    monkeypatch.setenv("INFRA_RAG_HOME", str(fresh_home))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(main, list(args), catch_exceptions=False)


def test_batch_contract(run, tmp_path, built_index):
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "\n".join(
            json.dumps(q)
            for q in [
                {"id": "a", "question": "How does maxSurge limit pods during a Deployment rollout?"},
                {"id": "b", "question": "How do I protect the Prometheus UI with basic auth?"},
            ]
        )
        + "\n"
    )
    result = run("search", "--batch", str(questions), "--k", "5", "--mode", "hybrid")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in lines] == ["a", "b"]
    for record in lines:
        assert set(record) == {"id", "hits", "abstained", "latency_ms"} and len(record["hits"]) == 5
        assert set(record["hits"][0]) == {"chunk_id", "doc_id", "project", "page_id", "url", "section", "score", "text"}
    assert lines[0]["hits"][0]["page_id"] == "concepts_workloads_controllers_deployment"
    assert lines[0]["hits"][0]["url"].startswith(
        "https://kubernetes.io/docs/concepts/workloads/controllers/deployment/"
    )
    assert lines[1]["hits"][0]["doc_id"] == "prometheus-site:guides_basic-auth"

    traces = run("traces", "--last", "5")
    assert traces.exit_code == 0 and traces.stdout.count("cli-batch") == 2


@pytest.mark.parametrize("mode", ["dense", "lexical"])
def test_single_modes_and_version(run, built_index, mode):
    result = run("search", "What is a Pod?", "--mode", mode, "--k", "3", "--json", "--version", built_index["version"])
    record = json.loads(result.stdout)
    assert result.exit_code == 0 and len(record["hits"]) == 3


def test_offline_answer_cites_passages(run):
    result = run("answer", "What does the maxSurge field of a Deployment control?", "--json")
    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout)
    assert reply["method"] == "extractive" and reply["outcome"] == "answered"
    assert reply["text"].startswith("Extractive answer") and reply["citations"]
    assert any("deployment" in c["doc_id"] for c in reply["citations"])


@pytest.mark.parametrize(
    "args, message, code",
    [
        (["search"], "give either a QUESTION or --batch FILE", 2),
        (["search", "x", "--config", "nope"], "unknown retrieval config 'nope'", 2),
        (["search", "x", "--version", "missing"], "index version 'missing' is not servable", 1),
        (["search", "   "], "question is blank", 2),
        (["search", "x" * 2001], "question is 2001 characters; the limit is 2000", 2),
        (["answer", "y" * 2001], "question is 2001 characters; the limit is 2000", 2),
    ],
)
def test_bad_input_is_one_line(run, args, message, code):
    result = run(*args)
    assert result.exit_code == code and message in result.output and "Traceback" not in result.output


def test_bad_batch_line(run, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "ok"}\nnot json\n')
    result = run("search", "--batch", str(bad))
    assert result.exit_code == 2 and "bad.jsonl:2: not a JSON object" in result.output


@pytest.mark.parametrize(
    "content, message",
    [
        (
            b'{"id": "a", "question": "ok"}\n{"id": "a", "question": "again"}\n',
            "bad.jsonl:2: duplicate id 'a' (first on line 1)",
        ),
        (b'{"id": null, "question": "ok"}\n', "bad.jsonl:1: id must be a non-empty string or an integer, got null"),
        (b'{"id": [1], "question": "ok"}\n', "bad.jsonl:1: id must be a non-empty string or an integer, got a list"),
        (b'{"id": "a", "question": null}\n', "bad.jsonl:1: question must be a string, got null"),
        (b'{"id": "a", "question": "  "}\n', "bad.jsonl:1: question is blank"),
        (b'{"id": "a", "question": "\\ud800"}\n', "bad.jsonl:1: question is not valid Unicode"),
        (b'{"id": "a", "question": "' + b"x" * 2001 + b'"}\n', "bad.jsonl:1: question is 2001 characters"),
        (b'\xff\xfe{"id": 1}\n', "bad.jsonl:1: not UTF-8"),
        (b"\n\n", "bad.jsonl: no questions"),
    ],
)
def test_bad_batch_files_fail_before_the_model_loads(run, tmp_path, content, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    started = time.perf_counter()
    result = run("search", "--batch", str(bad))
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    assert time.perf_counter() - started < 5  # the model load alone takes longer


def test_batch_on_a_directory_and_a_bom_file(run, tmp_path):
    directory = run("search", "--batch", str(tmp_path))
    assert directory.exit_code == 2 and "is a directory" in directory.output
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b'\xef\xbb\xbf{"id": 7, "question": "What is a Pod?"}\n')
    result = run("search", "--batch", str(bom), "--k", "2")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0])["id"] == 7


def test_snapshot_rederives_serving_files_for_an_old_home(run, fresh_home, built_index):
    import shutil

    shutil.rmtree(fresh_home / "serving")  # a home built before serving snapshots existed
    refused = run("search", "What is a Pod?")
    assert refused.exit_code == 1 and "no built index version yet" in refused.output
    made = run("snapshot")
    assert made.exit_code == 0 and f"{built_index['version']}:" in made.stdout
    assert run("search", "What is a Pod?", "--json").exit_code == 0
