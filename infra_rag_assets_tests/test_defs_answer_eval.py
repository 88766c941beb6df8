"""Answers in the eval run, judged by a support judge trained on the fixture corpus, and the
critical answer gates refusing broken answerers (in-process, real components)."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from infra_rag_assets.control.builds import materialize_version
from infra_rag_assets.defs.resources import BuildResource, DataHomeResource, EmbedderResource
from infra_rag_assets.rag.operate import releases

pytestmark = pytest.mark.build

QUESTIONS = [
    ("q-maxsurge", "What is the default value of maxSurge for a Deployment?",
     ["kubernetes:concepts_workloads_controllers_deployment"], "The default value of maxSurge is 25%."),
    ("q-endpointslice", "How many endpoints does an EndpointSlice hold by default?",
     ["kubernetes:concepts_services-networking_endpoint-slices"],
     "By default, the control plane creates and manages EndpointSlices to have no more than 100 endpoints each."),
    ("q-basic-auth", "How do I protect the Prometheus web UI with a bcrypt password?",
     ["prometheus-site:guides_basic-auth"],
     "Keep the username and a bcrypt-hashed password in a web.yml file and start Prometheus with the flag "
     "that makes it use those credentials."),
    ("q-argocd-app", "In Argo CD, what is an Application?", ["argocd:core_concepts"],
     "A group of Kubernetes resources as defined by a manifest."),
    ("q-off-1", "What is the boiling point of olive oil in Kelvin?", [], ""),
]  # fmt: skip

GATES = """
gates:
  - {name: citations, metric: citation_validity, regime: serving, slice: "tiny/overall", comparison: floor,
     threshold: 0.99, severity: critical}
  - {name: adherence, metric: answer_adherent, regime: serving, slice: "tiny/overall", comparison: floor,
     threshold: 0.8, severity: critical}
  - {name: refusals, metric: gap_named_recall, regime: serving, slice: "tiny/overall", comparison: floor,
     threshold: 1.0, severity: critical}
"""


@pytest.fixture
def env(fresh_home, built_index, tmp_path, monkeypatch):
    """A copy of the built fixture index without a judge."""
    yield from _env(fresh_home, built_index, tmp_path, monkeypatch)


@pytest.fixture
def judged_env(judged_index, fresh_judged_home, tmp_path, monkeypatch):
    """A copy of the fixture index whose support judge the session trained (judged_index)."""
    yield from _env(fresh_judged_home, judged_index, tmp_path, monkeypatch)


def _env(home, index, tmp_path, monkeypatch):
    bench = tmp_path / "tiny.jsonl"
    bench.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    "question": q,
                    "relevant": r,
                    "reference_answer": a,
                    "category": "smoke" if r else "unanswerable",
                    "why": "answer eval test",
                }
            )
            + "\n"
            for i, q, r, a in QUESTIONS
        )  # fmt: skip
    )
    gates = tmp_path / "gates.yaml"
    gates.write_text(GATES)
    monkeypatch.setenv("INFRA_RAG_GATES", str(gates))
    store = DataHomeResource(home=str(home))
    settings = BuildResource(sources_file=str(index["sources"]))
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("index_version", [index["version"]])
        yield instance, store, settings, index["version"], str(bench)


def _evaluate(instance, store, settings, version, bench, stages=("eval_run", "release"), **config):
    config = {"benchmarks": [bench], "regimes": ["lexical"], "answer_benchmarks": [bench], **config}
    run_config = {"ops": {"eval_run": {"config": config}}} if "eval_run" in stages else None
    return materialize_version(
        version, list(stages), instance, store, settings, EmbedderResource(batch_size=16), run_config=run_config
    )


def _checks(result) -> dict:
    return {e.asset_check_key.name: e for e in result.get_asset_check_evaluations()}


def test_answers_are_scored_and_broken_answerers_are_refused(judged_env):
    instance, store, settings, version, bench = judged_env
    # The session trained this judge (judged_index); materializing it again finds it by its content key.
    judged = _evaluate(instance, store, settings, version, bench, stages=("support_judge",))
    meta = judged.asset_materializations_for_node("support_judge")[0].metadata
    assert meta["reused_existing"].value is True and meta["support_auroc"].value > 0.5

    for fault, failing in (("no-citations", "citations"), ("unsupported-sentence", "adherence")):
        result = _evaluate(instance, store, settings, version, bench, answer_fault=fault)
        critical = _checks(result)["critical_gates"]
        assert critical.passed is False, fault
        assert failing in critical.metadata["failed"].value, (fault, critical.metadata["failed"].value)
        assert not result.asset_materializations_for_node("release")
    assert releases.current_release(store.data_home().warehouse()) is None

    # the opposite drill: reworded reference answers, citing their page's passages in the
    # context (each answer's content is in those passages: a reference naming what the context
    # lacks is rightly judged unsupported), pass the same answer gates (production's 0.80
    # adherence floor) at the judge's DEV-fitted threshold; the release stage is left out so
    # the plain run below still releases
    drill = _evaluate(instance, store, settings, version, bench, stages=("eval_run",), answer_fault="reference-answers")
    assert _checks(drill)["critical_gates"].passed, _checks(drill)["critical_gates"].metadata["gates"].value
    drilled = {
        r["question_id"]: r
        for r in store.data_home().warehouse()
        .frame("SELECT * FROM answer_results WHERE index_version = ?", [version]).to_dicts()
    }  # fmt: skip
    assert drilled["q-maxsurge"]["adherent"] and drilled["q-maxsurge"]["answer"].startswith(
        "The default value of maxSurge"
    )

    result = _evaluate(instance, store, settings, version, bench)
    assert _checks(result)["critical_gates"].passed, _checks(result)["critical_gates"].metadata["gates"].value
    assert result.asset_materializations_for_node("release")  # approved: the gates passed
    rows = {
        r["question_id"]: r
        for r in store.data_home()
        .warehouse()
        .frame("SELECT * FROM answer_results WHERE index_version = ?", [version])
        .to_dicts()
    }
    assert rows["q-off-1"]["gap_named"] and rows["q-off-1"]["outcome"] == "abstained"
    surge = rows["q-maxsurge"]
    assert surge["outcome"] == "answered" and surge["citation_valid"] and surge["adherent"]
    assert "kubernetes:concepts_workloads_controllers_deployment" in surge["cited_doc_ids"]
    assert 0 < surge["utilization"] <= 1 and surge["correctness_recall"] > 0.5
    eval_meta = result.asset_materializations_for_node("eval_run")[0].metadata
    assert "answer_adherent" in eval_meta["answer_scorecard"].value
    assert eval_meta["tiny/citation_validity"].value == 1.0
    assert _checks(result)["critical_gates"].metadata["citations"].value == 1.0  # gate values plot
    # question -> cited page -> the sha256 of the bytes this version read
    sha = dict(
        store.data_home()
        .warehouse()
        .rows("SELECT doc_id, bytes_hash FROM source_pages WHERE index_version = ?", [version])
    )
    deployment = "kubernetes:concepts_workloads_controllers_deployment"
    questions = eval_meta["questions"].value
    assert "maxSurge" in questions and f"[{deployment}](" in questions and f"`{sha[deployment][:12]}…`" in questions
    assert "http://" not in questions and sha[deployment] in eval_meta["cited_pages"].value
    lines = [line for line in questions.splitlines() if line.startswith("| tiny")]
    adherence = [float(line.split("|")[6]) for line in lines if line.split("|")[6].strip()]
    assert adherence == sorted(adherence)  # worst first

    again = _evaluate(instance, store, settings, version, bench, stages=("eval_run",), reuse_identical=False)
    assert "5 answers" in again.asset_materializations_for_node("eval_run")[0].metadata["answer_cache_hits"].value


def test_without_a_judge_the_answer_gates_are_unmeasured_and_block(env):
    instance, store, settings, version, bench = env
    result = _evaluate(instance, store, settings, version, bench)
    critical = _checks(result)["critical_gates"]
    assert critical.passed is False and "adherence" in critical.metadata["failed"].value
    assert "no support judge" in result.asset_materializations_for_node("eval_run")[0].metadata["judge"].value
    assert not result.asset_materializations_for_node("release")
