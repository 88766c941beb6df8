"""eval_run → gates → release → rollback, in-process on a real ephemeral Dagster instance."""

from __future__ import annotations

import json
from unittest.mock import ANY

import dagster as dg
import pytest

from infra_rag_assets.control.builds import change_serving, materialize_version, serve_if_approved
from infra_rag_assets.defs.resources import BuildResource, DataHomeResource, EmbedderResource
from infra_rag_assets.package_data import dagster_yaml_template
from infra_rag_assets.rag.operate import releases

pytestmark = pytest.mark.build

QUESTIONS = [
    (
        "q-maxsurge",
        "What does maxSurge limit during a rolling update of a Deployment?",
        ["kubernetes:concepts_workloads_controllers_deployment"],
    ),
    (
        "q-endpointslice",
        "How does Kubernetes track network endpoints of a Service at scale?",
        ["kubernetes:concepts_services-networking_endpoint-slices"],
    ),
    (
        "q-basic-auth",
        "How do I protect the Prometheus web UI with a bcrypt password?",
        ["prometheus-site:guides_basic-auth"],
    ),
    ("q-argocd-app", "In Argo CD, what is an Application and what is its target state?", ["argocd:core_concepts"]),
    ("q-off-1", "What is the boiling point of olive oil in Kelvin?", []),
    ("q-off-2", "Which football club won the 1998 World Cup final?", []),
]

GATES = """
gates:
  - {name: hit5-floor, metric: hit@5, regime: serving, slice: "tiny/overall", comparison: floor,
     threshold: 0.75, severity: critical}
  - {name: abstention-floor, metric: abstention_recall, regime: serving, slice: "tiny/overall",
     comparison: floor, threshold: 0.5, severity: critical}
  - {name: mrr-no-regression, metric: mrr@10, regime: serving, slice: "tiny/overall",
     comparison: vs_release, tolerance: 0.2, severity: critical}
  - {name: latency, metric: latency_p95_ms, regime: serving, slice: "tiny/overall", comparison: ceiling,
     threshold: 0.001, severity: warning}
"""


@pytest.fixture
def env(fresh_home, built_index, tmp_path, monkeypatch):
    bench = tmp_path / "tiny.jsonl"
    bench.write_text(
        "\n".join(
            json.dumps(
                {
                    "id": i,
                    "question": q,
                    "relevant": r,
                    "category": "smoke" if r else "unanswerable",
                    "reference_answer": "",
                    "why": "release test",
                }
            )
            for i, q, r in QUESTIONS
        )
        + "\n"
    )
    gates = tmp_path / "gates.yaml"
    gates.write_text(GATES)
    monkeypatch.setenv("INFRA_RAG_GATES", str(gates))
    store = DataHomeResource(home=str(fresh_home))
    settings = BuildResource(sources_file=str(built_index["sources"]))
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("index_version", [built_index["version"]])
        yield instance, store, settings, built_index["version"], str(bench)


def _evaluate_and_release(instance, store, settings, version, bench, **serving):
    """eval_run + release (approval) of the version, then the release_version job serves it."""
    config = {"benchmarks": [bench], "regimes": ["dense", "lexical", "hybrid-rrf", "hybrid-weighted"], **serving}
    result = materialize_version(
        version,
        ["eval_run", "release"],
        instance,
        store,
        settings,
        EmbedderResource(batch_size=16),
        run_config={"ops": {"eval_run": {"config": config}}},
    )
    if result.success and result.asset_materializations_for_node("release"):
        assert change_serving(instance, store, "release", version, reason="test release").success
    return result


def _serving_metadata(instance) -> dict:
    records = instance.fetch_materializations(dg.AssetKey("serving_release"), limit=1).records
    return dict(records[0].asset_materialization.metadata)


def test_passing_candidate_is_released_with_scorecard_and_lineage(env):
    instance, store, settings, version, bench = env
    result = _evaluate_and_release(instance, store, settings, version, bench)
    assert result.success
    checks = {e.asset_check_key.name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {"critical_gates": True, "warning_gates": False}  # the 1 µs latency warning fails
    meta = result.asset_materializations_for_node("eval_run")[0].metadata
    assert "hybrid-weighted" in meta["scorecard"].value and "tiny" in meta["scorecard"].value
    assert "vectors" in meta["upstream"].value
    assert releases.current_release(store.data_home().warehouse()) == version
    rows = (
        store.data_home()
        .warehouse()
        .frame(
            "SELECT regime, question_id, rank, abstained FROM eval_results "
            "WHERE index_version = ? AND regime = 'serving'",
            [version],
        )
    )
    by_id = {r["question_id"]: r for r in rows.to_dicts()}
    assert by_id["q-off-1"]["abstained"] and by_id["q-maxsurge"]["rank"] == 1


def test_releasing_what_already_serves_repairs_a_stale_pointer(env):
    """No new event, but the pointer the service reads is published again (e.g. after a crash
    between the history commit and the pointer write)."""
    instance, store, settings, version, bench = env
    assert _evaluate_and_release(instance, store, settings, version, bench).success
    pointer = store.data_home().release_pointer()
    pointer.unlink()
    assert change_serving(instance, store, "release", version, reason="again").success
    assert releases.read_pointer(pointer)["current"] == version
    assert len(releases.history(store.data_home().warehouse())) == 1


def test_tuning_experiments_are_recorded_as_eval_run_regimes(env):
    instance, store, settings, version, bench = env
    result = _evaluate_and_release(
        instance,
        store,
        settings,
        version,
        bench,
        experiments={
            "alpha-0.9": {"base": "hybrid-weighted", "alpha": 0.9},
            "lexical-no-ident": {"base": "lexical", "boosts": {"body": 1.0, "title": 0.3}},
        },
    )
    assert result.success
    hashes = dict(
        store.data_home()
        .warehouse()
        .rows("SELECT DISTINCT regime, retrieval_config_hash FROM eval_results WHERE index_version = ?", [version])
    )
    assert {"alpha-0.9", "lexical-no-ident", "hybrid-weighted"} <= set(hashes)
    assert hashes["alpha-0.9"] != hashes["hybrid-weighted"]
    scorecard = result.asset_materializations_for_node("eval_run")[0].metadata["scorecard"].value
    assert "alpha-0.9" in scorecard and "lexical-no-ident" in scorecard


def test_degraded_config_is_refused_by_a_blocking_gate(env):
    instance, store, settings, version, bench = env
    result = _evaluate_and_release(instance, store, settings, version, bench, serving_config="lexical", serving_k=1)
    checks = {e.asset_check_key.name: e for e in result.get_asset_check_evaluations()}
    assert checks["critical_gates"].passed is False
    assert "abstention-floor" in checks["critical_gates"].metadata["failed"].value
    assert not result.asset_materializations_for_node("release")  # blocked, never materialized
    assert releases.current_release(store.data_home().warehouse()) is None


def test_rollback_restores_previous_release(env):
    instance, store, settings, version, bench = env
    releases.record(store.data_home().warehouse(), "older-version", "release", reason="seeded")
    assert _evaluate_and_release(instance, store, settings, version, bench).success
    assert releases.current_release(store.data_home().warehouse()) == version
    released = _serving_metadata(instance)
    assert released["serving_version"].value == version and released["reason"].value == "test release"
    assert isinstance(released["tiny/mrr@10"], dg.FloatMetadataValue)
    assert isinstance(released["since"], dg.TimestampMetadataValue)
    assert released["release_run"].value.endswith("/runs/" + _last_run_id(instance, "release_version"))
    result = change_serving(instance, store, "rollback", reason="bad answers")  # the rollback job
    assert result.success and _last_run_id(instance, "rollback") == result.run_id
    assert releases.current_release(store.data_home().warehouse()) == "older-version"
    rolled = _serving_metadata(instance)
    assert (rolled["serving_version"].value, rolled["action"].value, rolled["reason"].value) == (
        "older-version",
        "rollback",
        "bad answers",
    )
    assert rolled["previous_version"].value == version and "rollback" in rolled["history"].value
    # release or rollback is visible without opening the event: its tags and its run's tags
    events = instance.fetch_materializations(dg.AssetKey("serving_release"), limit=2).records
    assert [e.asset_materialization.tags.get("infra_rag/action") for e in events] == ["rollback", "release"]
    assert instance.get_run_by_id(result.run_id).tags["infra_rag/action"] == "rollback"
    assert rolled["rolled_back"].value == 1.0


def _last_run_id(instance, job: str) -> str:
    return instance.get_runs(dg.RunsFilter(job_name=job), limit=1)[0].run_id


def test_eval_run_of_an_unbuilt_version_is_a_one_line_failure(env):
    instance, store, settings, _, bench = env
    instance.add_dynamic_partitions("index_version", ["never-built"])
    result = materialize_version(
        "never-built",
        ["eval_run"],
        instance,
        store,
        settings,
        run_config={"ops": {"eval_run": {"config": {"benchmarks": [bench]}}}},
    )
    [failure] = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert "never-built has no vectors or lexical_index yet" in message and "was not found" not in message


def test_daemon_run_reindex_is_served_by_the_run_status_sensor(env):
    """serve_approved_builds: a reindex run (not in-process) that approved its version → release_version."""
    from infra_rag_assets.defs.operate.automation import serve_approved_builds

    instance, store, settings, version, bench = env
    config = {"benchmarks": [bench], "regimes": ["dense", "lexical"]}
    result = materialize_version(
        version,
        ["eval_run", "release"],
        instance,
        store,
        settings,
        EmbedderResource(batch_size=16),
        run_config={"ops": {"eval_run": {"config": config}}},
    )
    assert (
        result.success and releases.current_release(store.data_home().warehouse()) is None
    )  # approved, not served yet
    run = instance.get_run_by_id(result.run_id)
    assert run.job_name == "reindex"
    success = next(
        e.dagster_event
        for e in instance.all_logs(run.run_id)
        if e.dagster_event and e.dagster_event.event_type == dg.DagsterEventType.RUN_SUCCESS
    )

    def evaluate(tags):
        context = dg.build_run_status_sensor_context(
            sensor_name="serve_approved_builds",
            dagster_event=success,
            dagster_instance=instance,
            dagster_run=run.with_tags(tags),
        )
        return serve_approved_builds(context)

    request = evaluate(run.tags)  # approved and not served yet: the sensor serves it
    assert isinstance(request, dg.RunRequest)
    assert request.run_config["ops"]["serving_release"]["config"]["version"] == version
    served = serve_if_approved(instance, store, result)  # the CLI, after the run it waited for: the same rule
    assert served is not None and served.success and releases.current_release(store.data_home().warehouse()) == version
    assert isinstance(evaluate(run.tags), dg.SkipReason)  # served once: the sensor does not serve it again
    assert serve_if_approved(instance, store, result) is None


def test_cli_release_and_rollback_are_serving_release_materializations(env, tmp_path, monkeypatch):
    """`infra-rag release` / `infra-rag rollback`: runs of release_version / rollback on the CLI's instance."""
    import shutil

    from click.testing import CliRunner

    from infra_rag_assets.cli import main

    instance, store, settings, version, bench = env
    releases.record(store.data_home().warehouse(), "older-version", "release", reason="seeded")
    config = {"benchmarks": [bench], "regimes": ["dense", "lexical"]}
    assert materialize_version(
        version,
        ["eval_run"],
        instance,
        store,
        settings,
        EmbedderResource(batch_size=16),
        run_config={"ops": {"eval_run": {"config": config}}},
    ).success
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    shutil.copyfile(dagster_yaml_template(), dagster_home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    with dg.DagsterInstance.get() as cli_instance:
        cli_instance.add_dynamic_partitions("index_version", [version])
    runner = CliRunner()
    done = runner.invoke(main, ["--home", store.home, "release", "--version", version, "--json"])
    assert done.exit_code == 0 and json.loads(done.stdout)["released"] == version, done.output
    assert releases.current_release(store.data_home().warehouse()) == version
    done = runner.invoke(main, ["--home", store.home, "rollback", "--reason", "canary failed", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {"rolled_back": version, "serving": "older-version", "run_id": ANY}
    assert releases.current_release(store.data_home().warehouse()) == "older-version"
    with dg.DagsterInstance.get() as cli_instance:
        events = cli_instance.fetch_materializations(dg.AssetKey("serving_release"), limit=5).records
        assert [e.asset_materialization.metadata["serving_version"].value for e in events] == ["older-version", version]
        assert events[0].asset_materialization.metadata["reason"].value == "canary failed"
        assert [cli_instance.get_run_by_id(e.run_id).job_name for e in events] == ["rollback", "release_version"]
