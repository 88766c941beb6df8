"""eval_run's answer tables as a reader meets them in the UI: from a score to the bytes of every
cited page, narrow tables with the point first, and names that match what they measure."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest
import yaml

from infra_rag_assets.defs.evaluate.answer_report import (
    SCORECARD_METRICS,
    SCORECARD_TABLES,
    _scorecard,
    lineage_tables,
    worst_answers,
)
from infra_rag_assets.package_data import default_gates_file
from infra_rag_assets.rag.evaluate.answers.answer_rows import ANSWER_METRICS

pytestmark = pytest.mark.unit

LONG = "How do I make sure that a rolling update of a Deployment never takes more than one Pod away at a time?"


def _answers(n: int) -> pl.DataFrame:
    """``n`` answered questions, each citing its own page and one shared page (real column names)."""
    sentences = [json.dumps([{"text": f"Claim {i}.", "supported": 0.6, "passage": [1]}]) for i in range(n)]
    return pl.DataFrame(
        {
            "benchmark": ["k8s"] * n,
            "question_id": [f"q{i:03d}" for i in range(n)],
            "question": [f"{LONG} ({i})" for i in range(n)],
            "outcome": ["answered"] * n,
            "adherence": [0.49 + i / (4 * n) for i in range(n)],
            "relevance": [0.9] * n,
            "utilization": [0.5] * n,
            "completeness": [0.7] * n,
            "correctness_f1": [0.4] * n,
            "cited_doc_ids": [[f"page-{i:03d}", "page-shared"] for i in range(n)],
            "unsupported_json": ["[]"] * n,  # nothing under the threshold, yet adherence < 1
            "sentences_json": sentences,
        }
    )


def _pages(n: int) -> pl.DataFrame:
    ids = [f"page-{i:03d}" for i in range(n)] + ["page-shared"]
    hashes, urls = [f"{i:064x}" for i in range(len(ids))], [f"https://docs.example/{d}/" for d in ids]
    return pl.DataFrame({"doc_id": ids, "bytes_hash": hashes, "url": urls})


def test_every_cited_page_of_every_listed_question_reaches_its_sha256_and_url():
    answers, pages = _answers(80), _pages(80)
    tables = lineage_tables(answers, pl.DataFrame(), pages, "/assets/source_pages?partition=v1")
    questions, cited = tables["questions"].value, tables["cited_pages"].value
    header = questions.splitlines()[0]
    assert "| id |" in header or header.startswith("| benchmark | id |"), header
    listed = re.findall(r"\| (q\d{3}) \|", questions)
    assert len(listed) == 50
    sha = dict(zip(pages["doc_id"], pages["bytes_hash"]))
    for qid in listed:
        for page in (f"page-{int(qid[1:]):03d}", "page-shared"):
            assert f"[{page}](https://docs.example/{page}/)" in questions  # the URL: one click
            assert re.search(rf"\| {page} \| {sha[page]} \|", cited), page  # full sha256, same page
    assert "[source_pages](/assets/source_pages?partition=v1)" in cited
    assert "…" in questions and LONG[:40] in questions  # cut, and says so


def test_worst_answers_name_the_question_and_the_least_supported_sentence():
    worst = worst_answers(_answers(20))
    assert {"id", "question", "least supported"} <= set(worst.columns)
    assert all(cell.startswith("0.60: Claim") for cell in worst["least supported"])
    assert all(cell.endswith("…") and len(cell) <= 90 for cell in worst["question"])


def test_scorecards_are_narrow_and_every_answer_gate_names_a_metric_shown():
    metrics = pl.DataFrame({"benchmark": "k8s", "slice": "overall", "metric": list(SCORECARD_METRICS), "value": 0.5})
    for name, wanted in SCORECARD_TABLES.items():
        table = _scorecard(metrics, wanted)
        assert table.columns[0] == "benchmark" and len(table.columns) <= 7, (name, table.columns)
    gates = yaml.safe_load(default_gates_file().read_text())["gates"]
    for gate in gates:
        if gate["metric"].startswith("answer_") and gate["metric"] in ANSWER_METRICS:
            assert gate["metric"] in SCORECARD_METRICS, gate
            assert gate["metric"].replace("_", "-") in gate["name"], gate  # the name says what is measured
