"""The Definitions' jobs: derived from the asset graph, one place for the stage order."""

from __future__ import annotations

import dagster as dg
import pytest

from infra_rag_assets.control.stages import job_for, stage_order, stages_for
from infra_rag_assets.definitions import defs

pytestmark = pytest.mark.unit


def test_the_code_location_loads():
    dg.Definitions.validate_loadable(defs)


def test_stage_order_is_the_graphs_topological_order():
    order = stage_order()
    assert order[0] == "source_pages" and order[-2:] == ["eval_run", "release"]
    graph = defs.resolve_asset_graph()
    for stage in order:  # every parent of a stage comes before it
        parents = {k.to_user_string() for k in graph.get(dg.AssetKey(stage)).parent_keys}
        assert all(order.index(p) < order.index(stage) for p in parents)


@pytest.mark.parametrize(
    "through, start, expected, job",
    [
        ("documents", None, ["source_pages", "documents"], "build_documents"),
        (
            "indexes",
            None,
            ["source_pages", "documents", "chunks", "domain_model", "lexical_index", "vectors"],
            "build_indexes",
        ),
        (
            "release",
            "chunks",
            [
                "chunks",
                "answer_reader",
                "domain_model",
                "lexical_index",
                "support_judge",
                "vectors",
                "abstention_calibration",
                "page_ranker",
                "eval_run",
                "release",
            ],
            "reindex",
        ),
        ("vectors", None, ["source_pages", "documents", "chunks", "domain_model", "vectors"], "build_vectors"),
        ("lexical_index", None, ["source_pages", "documents", "chunks", "lexical_index"], "build_lexical_index"),
    ],
)
def test_selections_come_from_upstream_and_downstream(through, start, expected, job):
    stages = stages_for(through, start)
    assert stages == expected
    name, subset = job_for(stages)
    assert name == job and (subset is None) == (start is None)
    selected = {k.to_user_string() for k in defs.resolve_job_def(name).asset_layer.selected_asset_keys}
    assert set(stages) <= selected


def test_serving_stays_out_of_build_jobs_and_adaptation_is_in_them():
    graph = defs.resolve_asset_graph()
    build_jobs = [j for j in defs.jobs if j.name.startswith("build_") or j.name == "reindex"]
    assert len(build_jobs) == 13  # stages: domain_model, support_judge, answer_reader, abstention_calibration, ...
    for job in build_jobs:
        keys = {k.to_user_string() for k in defs.resolve_job_def(job.name).asset_layer.selected_asset_keys}
        assert "serving_release" not in keys
        assert ("domain_model" in keys) == ("vectors" in keys or job.name in ("reindex", "build_domain_model"))
    assert dg.AssetKey("domain_model") in graph.get(dg.AssetKey("vectors")).parent_keys
    for name in ("release_version", "rollback"):  # the canary runs on its own clock, not in a promotion
        assert sorted(n.name for n in defs.resolve_job_def(name).graph.nodes) == ["serving_release"]
    assert sorted(n.name for n in defs.resolve_job_def("canary").graph.nodes) == ["release_canary"]


def test_unknown_stages_are_one_line_errors():
    with pytest.raises(ValueError, match="unknown stage 'nope'"):
        stages_for("nope")
    with pytest.raises(ValueError, match="--from eval_run is not a stage before --through documents"):
        stages_for("documents", "eval_run")
