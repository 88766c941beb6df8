"""answer_reader on the fixture corpus: trained with a tiny recipe (one layer, few examples),
reused by content key on a rebuild, and answering through the query engine (real components)."""

from __future__ import annotations

import dagster as dg
import pytest

from infra_rag_assets.control.builds import materialize_version
from infra_rag_assets.defs.resources import BuildResource, DataHomeResource, EmbedderResource
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.engine import QueryEngine

pytestmark = pytest.mark.build

TINY = {"ops": {"answer_reader": {"config": {"max_examples": 64}}}}


def test_answer_reader_trains_once_and_answers(fresh_home, built_index):
    store = DataHomeResource(home=str(fresh_home))
    settings = BuildResource(sources_file=str(built_index["sources"]))
    version = built_index["version"]
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("index_version", [version])

        def build():
            result = materialize_version(version, ["answer_reader"], instance, store, settings,
                                         EmbedderResource(batch_size=16), run_config=TINY)  # fmt: skip
            assert result.success
            return result.asset_materializations_for_node("answer_reader")[0].metadata

        first, second = build(), build()
    assert first["reused_existing"].value is False and second["reused_existing"].value is True
    assert first["key"].value == second["key"].value and first["train_examples"].value > 0
    # the fixture corpus has few pages with train answers: a dev split (and its F1) may be empty
    assert "dev_sentence_f1" not in first or 0.0 <= first["dev_sentence_f1"].value <= 1.0
    engine = QueryEngine(DataHome.at(fresh_home), version)
    outcome = engine.answer("What is the default value of maxSurge for a Deployment?", answerer="reader")
    reply = outcome.answer
    assert reply.method == "reader" and reply.model == f"reader-{first['key'].value}"
    assert reply.outcome in ("answered", "abstained") and reply.candidates
    if reply.outcome == "answered":
        assert reply.short_answer and reply.text.startswith(reply.short_answer)
        hits = [p.hit for p in outcome.packed.passages]
        for c in reply.citations:
            assert hits[c.passage_number - 1].text[c.chunk_start : c.chunk_end] == c.cited_text
    extractive = engine.answer("What is the default value of maxSurge for a Deployment?", answerer="extractive")
    assert extractive.answer.method == "extractive" and not extractive.answer.short_answer
