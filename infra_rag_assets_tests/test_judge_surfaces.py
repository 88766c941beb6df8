"""The support judge where people use it: `infra-rag judge --batch`, `answer --explain`,
POST /judge and live traces, on the fixture index with a judge trained on it."""

from __future__ import annotations

import json

import dagster as dg
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from infra_rag_assets.cli import main
from infra_rag_assets.defs.operate.served_traces import served_traces
from infra_rag_assets.defs.resources import DataHomeResource
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.service import ServiceSettings, create_app

pytestmark = pytest.mark.build

PASSAGE = (
    "The default value of maxSurge is 25%. maxSurge is an optional field that specifies the maximum "
    "number of Pods that can be created over the desired number of Pods."
)
GOOD = {"id": "good", "question": "What is the default maxSurge?", "passages": [{"id": "p1", "text": PASSAGE}],
        "answer": "The default value of maxSurge is 25%. [1]"}  # fmt: skip
BAD = {**GOOD, "id": "bad", "answer": "The default value of maxSurge is 25%. [1] It was removed in release 1.12 "
       "and the fabricator controller retries every step 17 times. [1]"}  # fmt: skip


@pytest.fixture
def run(fresh_judged_home, monkeypatch):
    monkeypatch.setenv("INFRA_RAG_HOME", str(fresh_judged_home))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    runner = CliRunner()
    return lambda *args, input=None: runner.invoke(main, list(args), input=input, catch_exceptions=False)


def test_judge_batch_scores_every_id_and_handles_degenerate_items(run, tmp_path):
    many = {
        **GOOD,
        "id": "many",
        "passages": [{"id": str(i), "text": f"filler text number {i}."} for i in range(10_000)],
    }
    many["passages"].append({"id": "right", "text": PASSAGE})
    many["answer"] = "The default value of maxSurge is 25%."  # no marker: the best passage is found
    items = [GOOD, BAD, {**GOOD, "id": "empty", "answer": ""}, {**GOOD, "id": "nopassages", "passages": []}, many]
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps(i) + "\n" for i in items))
    result = run("judge", "--batch", str(batch), "--json")
    assert result.exit_code == 0, result.output
    out = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert set(out) == {"good", "bad", "empty", "nopassages", "many"}
    assert out["good"]["adherence"] > out["bad"]["adherence"]
    weakest = min(out["bad"]["sentences"], key=lambda s: s["supported"])
    assert "fabricator" in weakest["text"] and weakest["supported"] < 0.5
    assert out["empty"]["sentences"] == [] and out["empty"]["note"]
    assert out["nopassages"]["adherence"] == 0.0 and "no passages" in out["nopassages"]["note"]
    assert out["many"]["sentences"][0]["passage"] == "right" and "first 200" in out["many"]["note"]
    for r in out.values():
        assert set(r) >= {"id", "adherence", "relevance", "utilization", "completeness", "sentences"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "batch.jsonl:1: not valid JSON"),
        (json.dumps({**GOOD, "answer": 3}), "batch.jsonl:1: 'answer' must be a string"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "passages"}), "batch.jsonl:1: 'passages' must be a list"),
        (json.dumps({**GOOD, "passages": [{"id": "x"}]}), "batch.jsonl:1: passages[0] must be an object"),
    ],
)
def test_bad_batch_lines_are_one_line_errors(run, tmp_path, line, message):
    batch = tmp_path / "batch.jsonl"
    batch.write_text(line + "\n")
    result = run("judge", "--batch", str(batch))
    assert result.exit_code != 0 and message in result.output and "Traceback" not in result.output


def test_judge_without_a_judge_is_a_clear_error(fresh_home, monkeypatch, tmp_path):
    monkeypatch.setenv("INFRA_RAG_HOME", str(fresh_home))
    batch = tmp_path / "batch.jsonl"
    batch.write_text(json.dumps(GOOD) + "\n")
    result = CliRunner().invoke(main, ["judge", "--batch", str(batch)])
    assert result.exit_code != 0 and "no support judge" in result.output


def test_answer_explain_shows_relevant_used_and_unsupported(run):
    result = run("answer", "--offline", "--explain", "--json", "What does maxSurge control in a Deployment?")
    assert result.exit_code == 0, result.output
    explained = json.loads(result.stdout)["explain"]
    assert explained["context"] and any(c["used"] for c in explained["context"])
    assert explained["sentences"] and all(0 <= s["supported"] <= 1 for s in explained["sentences"])
    text = run("answer", "--offline", "--explain", "What does maxSurge control in a Deployment?").output
    assert "Answer sentences" in text and "Context" in text


def test_post_judge_and_its_bounds(fresh_judged_home, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with TestClient(create_app(DataHome.at(fresh_judged_home), ServiceSettings(poll_s=0.2))) as http:
        good = http.post("/judge", json=GOOD)
        assert good.status_code == 200, good.text
        assert good.json()["sentences"][0]["passage"] == "p1" and good.json()["version"]
        bad = http.post("/judge", json=BAD).json()
        assert bad["adherence"] < good.json()["adherence"]
        too_many = http.post("/judge", json={**GOOD, "passages": [{"id": str(i), "text": "x"} for i in range(201)]})
        assert too_many.status_code in (413, 422)
        assert http.post("/judge", json={**GOOD, "answer": 5}).status_code == 422
        assert http.post("/judge", json={**GOOD, "extra": 1}).status_code == 422
        assert http.post("/judge", json={**GOOD, "version": "release.json"}).status_code == 404


def test_served_traces_judge_live_answers(run, fresh_judged_home):
    assert run("answer", "--offline", "What does maxSurge control in a Deployment?").exit_code == 0
    store = DataHomeResource(home=str(fresh_judged_home))
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([served_traces], resources={"store": store}, instance=instance)
    meta = result.asset_materializations_for_node("served_traces")[0].metadata
    assert meta["newly_judged"].value == 1 and 0 <= meta["adherence_latest_day"].value <= 1
