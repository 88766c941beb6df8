"""Lineage links in UI metadata: every upstream asset from the graph, relative links that work
on any UI host and port, and each materialization linked (not only its run)."""

from __future__ import annotations

import pytest

from infra_rag_assets.control.stages import asset_graph
from infra_rag_assets.defs.asset_lineage import lineage_table, materialization_path, upstream_of
from infra_rag_assets.defs.reporting import run_link

pytestmark = pytest.mark.unit


def test_upstream_comes_from_the_graph_with_every_stage():
    upstream = upstream_of(asset_graph(), "eval_run")
    assert {"source_pages", "chunks", "domain_model", "vectors", "lexical_index", "support_judge"} <= set(upstream)
    assert "eval_run" not in upstream and upstream.index("chunks") < upstream.index("domain_model")
    assert upstream_of(asset_graph(), "release")[-1] == "eval_run"


def test_links_are_relative_unless_a_ui_prefix_is_set(monkeypatch):
    monkeypatch.delenv("INFRA_RAG_DAGSTER_URL", raising=False)
    row = {"asset": "source_pages", "run_id": "abcdef0123456789", "data_version": "d" * 20,
           "at": "2026-12-04 01:00:00 UTC", "epoch": 1_780_000_000.5}  # fmt: skip
    table = lineage_table([row, {**row, "asset": "domain_model", "run_id": ""}], "2026-12-04T0100-abc")
    assert "http" not in table.value
    assert "](/runs/abcdef0123456789)" in table.value
    assert "](/assets/source_pages?view=events&partition=2026-12-04T0100-abc&time=1780000000500)" in table.value
    assert "| domain_model | not materialized |" in table.value
    assert run_link("abc").value == "/runs/abc"

    monkeypatch.setenv("INFRA_RAG_DAGSTER_URL", "https://ops.example/dagster/")
    assert materialization_path("chunks", "v1", 1.0).startswith("https://ops.example/dagster/assets/chunks?")


def test_question_table_is_worst_first_and_links_each_cited_page_to_its_bytes():
    import polars as pl

    from infra_rag_assets.defs.evaluate.answer_report import lineage_tables

    answers = pl.DataFrame(
        {
            "benchmark": ["b"] * 3,
            "question_id": ["good", "bad", "none"],
            "question": ["q good", "q bad", "q none"],
            "outcome": ["answered", "answered", "abstained"],
            "adherence": [0.9, 0.1, None],
            "relevance": [0.5, 0.4, None],
            "utilization": [0.2, 0.3, None],
            "completeness": [0.7, 0.2, None],
            "correctness_f1": [0.6, 0.1, None],
            "cited_doc_ids": [["d1", "d2"], ["d1"], []],
        }
    )
    results = pl.DataFrame({"benchmark": ["b", "b"], "question_id": ["good", "bad"],
                            "regime": ["serving", "lexical"], "rank": [2, 1]})  # fmt: skip
    pages = pl.DataFrame({"doc_id": ["d1", "d2"], "bytes_hash": ["a" * 64, "b" * 64], "url": ["u1", "u2"]})
    tables = lineage_tables(answers, results, pages, "/assets/source_pages?view=events&partition=v")
    rows = [line.split(" | ") for line in tables["questions"].value.splitlines()[2:]]
    assert [r[1] for r in rows] == ["q bad", "q good", "q none"]  # least adherent first, abstention last
    assert rows[1][3] == "2" and rows[0][3] == ""  # the serving regime's rank only
    assert "[d2](/assets/source_pages?view=events&partition=v) `bbbbbbbb`" in rows[1][-1]
    cited = tables["cited_pages"].value
    assert "| [d1](/assets/source_pages?view=events&partition=v) | " + "a" * 64 + " | 2 | u1 |" in cited
