"""`infra-rag health | canary` and the release_canary check on the built fixture index."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner

from infra_rag_assets.cli import main
from infra_rag_assets.rag.evaluate.canary import load_canaries, run_canaries
from infra_rag_assets.rag.operate import releases
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.operate.traces import TraceSink, error_row, read_traces
from infra_rag_assets.rag.search.engine import DEFAULT_CONFIG, QueryEngine, named_config
from infra_rag_assets.rag.search.retrieval import RetrievalSettings

pytestmark = pytest.mark.build

FIXTURE_CANARIES = """
canaries:
  - id: maxsurge
    question: What does maxSurge control during a Deployment rolling update?
    expected_outcome: answered
    expected_doc: kubernetes:concepts_workloads_controllers_deployment
  - id: basic-auth
    question: How do I secure the Prometheus web UI with basic authentication?
    expected_outcome: answered
    expected_doc: prometheus-site:guides_basic-auth
  - id: argo-concepts
    question: What is an Application in Argo CD core concepts?
    expected_outcome: answered
    expected_doc: argocd:core_concepts
  - id: sourdough
    question: What is a good recipe for sourdough bread with a long cold proof?
    expected_outcome: abstained
"""


@pytest.fixture
def cli(fresh_home, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("INFRA_RAG_CANARY", raising=False)
    canaries = tmp_path / "canary.yaml"
    canaries.write_text(FIXTURE_CANARIES)

    def run(*args: str):
        return CliRunner().invoke(main, ["--home", str(fresh_home), *args], catch_exceptions=False)

    run.home, run.canaries = DataHome.at(fresh_home), canaries
    return run


def _release(home: DataHome) -> str:
    version = home.warehouse().rows("SELECT index_version FROM index_versions")[0][0]
    releases.record(home.warehouse(), version, "release", reason="test")
    return version


def test_health_fails_without_release_then_passes(cli):
    first = cli("health", "--json")
    assert first.exit_code == 1
    report = json.loads(first.stdout)
    assert set(report["checks"]) == {"index", "release", "model", "freshness", "traces"}
    assert not report["checks"]["release"]["ok"] and "no release yet" in report["checks"]["freshness"]["detail"]
    model = report["checks"]["model"]
    assert model["ok"] and Path(model["path"]).is_dir() and len(model["weights_hash"]) == 64
    _release(cli.home)
    second = cli("health")
    assert second.exit_code == 0, second.output
    assert "freshness" in second.stdout and "FAIL" not in second.stdout


def test_health_flags_stale_release_and_trace_errors(cli):
    version = _release(cli.home)
    cli.home.warehouse().execute("UPDATE releases SET occurred_at = occurred_at - INTERVAL 20 DAY")
    releases.publish_pointer(cli.home.warehouse())  # health reads the published pointer
    sink = TraceSink(cli.home.traces_dir())
    for _ in range(6):
        sink.submit(error_row(origin="service", version=version, config_name="x", question="q", error="boom"))
    sink.close()
    stale = cli("health", "--json")
    assert stale.exit_code == 1
    checks = json.loads(stale.stdout)["checks"]
    assert f"release {version} is 20.0 days old" in checks["freshness"]["detail"]
    assert checks["traces"]["errors"] == 6 and not checks["traces"]["ok"]
    assert "unhealthy: freshness, traces" in stale.stderr
    lenient = cli("health", "--max-age-days", "30", "--max-trace-errors", "6")
    assert lenient.exit_code == 0, lenient.output


def test_canary_passes_on_release_and_records_canary_traces(cli):
    version = _release(cli.home)
    result = cli("canary", "--file", str(cli.canaries), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["version"] == version and report["released"] and report["ok"]
    assert report["config"] == DEFAULT_CONFIG and named_config(DEFAULT_CONFIG).floor is not None
    by_id = {r["id"]: r for r in report["results"]}
    assert {i: r["status"] for i, r in by_id.items()} == {
        "maxsurge": "pass",
        "basic-auth": "pass",
        "argo-concepts": "pass",
        "sourdough": "pass",
    }
    assert by_id["sourdough"]["outcome"] == "abstained" and "< floor" in by_id["sourdough"]["detail"]
    assert all(by_id[i]["rank"] <= 5 for i in ("maxsurge", "basic-auth", "argo-concepts"))
    traces = read_traces(cli.home.traces_dir(), where="origin = 'canary'")
    assert sorted(traces["outcome"]) == ["abstained", "retrieved", "retrieved", "retrieved"]


def test_abstention_canary_is_skipped_without_a_floor(cli):
    engine = QueryEngine.open(cli.home)
    no_floor = RetrievalSettings(name="no-floor", alpha=0.5)
    results, traces = run_canaries(engine, load_canaries(cli.canaries), no_floor)
    statuses = {r.id: r.status for r in results}
    assert statuses == {"maxsurge": "pass", "basic-auth": "pass", "argo-concepts": "pass", "sourdough": "skipped"}
    assert results[-1].detail == "skipped: no floor or answerability in no-floor"
    assert len(traces) == 3 and {t["origin"] for t in traces} == {"canary"}  # a skipped canary is not asked


def test_shipped_canaries_fail_on_the_fixture_corpus_with_exit_1(cli):
    """The packaged canary.yaml targets the full corpus: its Argo CD sync waves and kube-apiserver pages
    are not in the fixture, so those canaries must fail (and the command exit 1)."""
    assert len(load_canaries()) == 5
    _release(cli.home)
    result = cli("canary")
    assert result.exit_code == 1
    assert "argocd-sync-wave-annotation" in result.stderr and "kube-apiserver-goaway-chance" in result.stderr
    assert "3 passed, 2 failed, 0 skipped" in result.stderr


@pytest.mark.parametrize(
    "args, message, code",
    [
        (["canary", "--version", "no-such-version"], "index version 'no-such-version' is not servable", 1),
        (["canary", "--file", "/nonexistent/canary.yaml"], "canary file not found", 2),
    ],
)
def test_canary_bad_input_is_one_line(cli, args, message, code):
    result = cli(*args)
    assert result.exit_code == code and message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_bad_canary_file_is_one_line(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("canaries:\n  - {id: x, question: q, expected_outcome: maybe}\n")
    result = cli("canary", "--file", str(bad))
    assert result.exit_code == 2 and "expected_outcome must be one of" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_release_canary_check_runs_in_the_canary_job(cli):
    from infra_rag_assets.definitions import defs
    from infra_rag_assets.defs.resources import DataHomeResource

    version = _release(cli.home)
    job = defs.resolve_job_def("canary")
    with dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(
            instance=instance,
            resources={"store": DataHomeResource(home=str(cli.home.root))},
            run_config={"ops": {"release_canary": {"config": {"canary_file": str(cli.canaries)}}}},
        )
    assert result.success
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.check_name == "release_canary" and evaluation.passed
    assert evaluation.metadata["serving_version"].value == version
    assert "4 passed, 0 failed, 0 skipped" in evaluation.metadata["summary"].value
