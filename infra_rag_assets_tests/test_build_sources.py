"""`infra-rag build --source NAME`: a version of some sources only, recorded as such, and held
to the gates about what it holds (a gate about a project it lacks passes as not applicable)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from infra_rag_assets.cli import main
from infra_rag_assets.defs.resources import BuildResource
from infra_rag_assets.rag.evaluate import eval_tables
from infra_rag_assets.rag.ingest.sources import SourceConfigError
from infra_rag_assets.rag.operate.home import DataHome

pytestmark = pytest.mark.unit


def test_only_the_named_sources_are_built_and_recorded(fixture_sources):
    chosen = BuildResource(sources_file=str(fixture_sources), only_sources=["prometheus-site", "alerting-html"])
    assert [s.name for s in chosen.sources()] == ["prometheus-site", "alerting-html"]
    config = chosen.build_config().to_dict()
    assert {s["name"] for s in config["sources"]} == {"prometheus-site", "alerting-html"}
    assert {s["project"] for s in config["sources"]} == {"prometheus"}
    with pytest.raises(SourceConfigError, match=r"unknown source\(s\) 'nope': .* has kubernetes, prometheus-site"):
        BuildResource(sources_file=str(fixture_sources), only_sources=["nope"]).sources()


def test_cli_refuses_an_unknown_source_and_a_source_with_a_given_version(fixture_sources, tmp_path):
    runner = CliRunner()
    base = ["--home", str(tmp_path / "home"), "--sources", str(fixture_sources), "build"]
    unknown = runner.invoke(main, [*base, "--source", "nope"])
    assert unknown.exit_code != 0 and "unknown source(s) 'nope'" in unknown.output, unknown.output
    both = runner.invoke(main, [*base, "--source", "argocd", "--index-version", "v1"])
    assert both.exit_code != 0 and "--index-version rebuilds an existing one" in both.output, both.output
    assert not (tmp_path / "home" / "warehouse.duckdb").exists()  # refused before touching anything


@pytest.mark.parametrize(
    ("projects", "k8s_gates_apply"),
    [({"prometheus"}, False), ({"prometheus", "kubernetes"}, True)],
)
def test_a_version_is_gated_on_the_projects_it_was_built_from(tmp_path, projects, k8s_gates_apply):
    warehouse = DataHome.at(tmp_path / "home").warehouse()
    sources = [{"name": f"{p}-docs", "project": p} for p in sorted(projects)]
    warehouse.record_version("v1", {"sources": sources}, "cfg", "fp", "test")
    outcomes = {o.gate.name: o for o in eval_tables.gate_outcomes(warehouse, "v1")}
    k8s = outcomes["k8s-mrr-floor"]  # nothing was scored: measured, it fails; not applicable, it passes
    assert k8s.passed is not k8s_gates_apply
    if not k8s_gates_apply:
        assert k8s.message == "not applicable: this build has no kubernetes source"
    own = outcomes["own-answer-adherent-floor"]  # about every project: always held
    assert not own.passed and "missing from candidate" in own.message
