"""Every command's ``--json`` output parses as JSON, on the built and judged fixture index.

``release`` and ``rollback`` need an eval run and two releases: their ``--json`` is parsed in
test_defs_release.py (test_cli_release_and_rollback_are_serving_release_materializations).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_cli_conventions import commands
from test_cli_health import FIXTURE_CANARIES

from infra_rag_assets.cli import main

pytestmark = pytest.mark.build

PARSED_ELSEWHERE = {"release", "rollback", "sources sync"}  # sources sync: test_upstream_sync.py
JSON_LINES = {"search", "judge"}  # one JSON object per question or id


@pytest.fixture
def run(judged_index, fresh_judged_home, tmp_path, monkeypatch):
    home = fresh_judged_home
    monkeypatch.setenv("INFRA_RAG_HOME", str(home))
    monkeypatch.setenv("INFRA_RAG_SOURCES", str(judged_index["sources"]))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    (tmp_path / "canary.yaml").write_text(FIXTURE_CANARIES)
    batch = {"id": "a", "question": "What is maxSurge?", "passages": [{"id": "p1", "text": "maxSurge is 25%."}]}
    (tmp_path / "judge.jsonl").write_text(json.dumps({**batch, "answer": "maxSurge is 25%. [1]"}) + "\n")
    runner = CliRunner()
    return lambda *args: runner.invoke(main, list(args), catch_exceptions=False)


def test_every_json_output_parses(run, judged_index, tmp_path):
    version = judged_index["version"]
    arguments = {
        "versions": [],
        "search": ["What does maxSurge control?"],
        "answer": ["--offline", "What does maxSurge control?"],
        "traces": [],
        "judge": ["--batch", str(tmp_path / "judge.jsonl")],
        "judge-labels": ["--backend", "claude"],  # no key here: {"status": "not run: ..."}
        "lineage": [version],
        "snapshot": ["--index-version", version],
        "health": [],  # no release in the fixture home: exit 1, still a JSON report
        "canary": ["--file", str(tmp_path / "canary.yaml")],
        "build": ["--through", "source_pages", "--in-process"],
    }
    with_json = {" ".join(p) for p, c in commands().items() if any("--json" in q.opts for q in c.params)}
    assert with_json - PARSED_ELSEWHERE == set(arguments)
    for name, args in arguments.items():
        done = run(*name.split(), *args, "--json")
        assert done.exit_code in (0, 1), (name, done.output)
        documents = done.stdout.splitlines() if name in JSON_LINES else [done.stdout]
        parsed = [json.loads(document) for document in documents]
        assert parsed and all(isinstance(p, dict | list) for p in parsed), name
    assert json.loads(run("versions", "--json").stdout)[0]["index_version"] == version
    assert json.loads(run("lineage", version, "--json").stdout)["index_version"]["index_version"] == version
