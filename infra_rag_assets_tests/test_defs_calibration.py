"""abstention_calibration on the fixture corpus: written into the serving snapshot, then used by
the query path (the engine resolves the calibrated floor; a version without one keeps 0.35)."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from infra_rag_assets.control.builds import materialize_version
from infra_rag_assets.defs.evaluate.eval_run import EvalRunConfig, experiment_configs
from infra_rag_assets.defs.resources import BuildResource, DataHomeResource, EmbedderResource
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.engine import QueryEngine
from infra_rag_assets.rag.search.retrieval_settings import DEFAULT_FLOOR

pytestmark = pytest.mark.build

ANSWERABLE = [
    (
        "a1",
        "What does maxSurge limit during a rolling update of a Deployment?",
        "kubernetes:concepts_workloads_controllers_deployment",
    ),
    (
        "a2",
        "How does Kubernetes track network endpoints of a Service at scale?",
        "kubernetes:concepts_services-networking_endpoint-slices",
    ),
    ("a3", "How do I protect the Prometheus web UI with a bcrypt password?", "prometheus-site:guides_basic-auth"),
    ("a4", "In Argo CD, what is an Application and what is its target state?", "argocd:core_concepts"),
]
OFF_TOPIC = [
    "What is the boiling point of olive oil in Kelvin?",
    "Which football club won the 1998 World Cup final?",
    "How long should I rest a steak after grilling it?",
]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_calibration_is_written_with_the_version_and_used_by_the_query_path(fresh_home, built_index, tmp_path):
    version = built_index["version"]
    answerable = _write(
        tmp_path / "answerable.jsonl",
        [{"id": i, "question": q, "relevant": [d], "category": "smoke"} for i, q, d in ANSWERABLE],
    )
    off_topic = _write(
        tmp_path / "off.jsonl",
        [{"id": f"o{n}", "question": q, "relevant": [], "category": "unanswerable"} for n, q in enumerate(OFF_TOPIC)],
    )
    store = DataHomeResource(home=str(fresh_home))
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("index_version", [version])
        config = {"off_topic": off_topic, "answerable": answerable, "min_questions": 2}
        result = materialize_version(
            version,
            ["abstention_calibration"],
            instance,
            store,
            BuildResource(sources_file=str(built_index["sources"])),
            EmbedderResource(batch_size=16),
            run_config={"ops": {"abstention_calibration": {"config": config}}},
        )
    assert result.success
    meta = result.asset_materializations_for_node("abstention_calibration")[0].metadata
    path = fresh_home / "serving" / version / "calibration.json"
    written = json.loads(path.read_text())
    assert meta["calibrated"].value is True and meta["floor"].value == written["floor"]
    assert written["off_topic"]["n"] == 3 and written["answerable"]["n"] == 4
    quantile = written["off_topic"]["quantiles"]["p99"], written["answerable"]["quantiles"]["p01"]
    assert written["floor"] == min(quantile)
    assert "best_cosine_quantiles" in meta

    engine = QueryEngine.open(DataHome.at(fresh_home), version)
    assert written["model_hash"] == engine.embedder.weights_hash  # the weights that made the cosines
    floor = written["floor"]
    assert engine.calibration.floor == floor and engine.resolve("hybrid-page").floor == floor
    assert engine.resolve("lexical").floor is None  # no floor asked for, none given
    refused = []
    for question in OFF_TOPIC:  # the floor is their p99: the lower ones are refused by it
        off = engine.search(question, config="hybrid-page")
        below = off.dense_ranking[0][1] < floor
        assert off.abstained == below or "occur nowhere" in off.abstain_reason
        refused += [off] if below else []
        assert off.config_hash == engine.resolve("hybrid-page").config_hash()  # the floor used is in the hash
    assert refused and all(f"< floor {floor:.3f}" in r.abstain_reason for r in refused)
    on = engine.search(ANSWERABLE[0][1], config="hybrid-page")
    assert not on.abstained and on.hits[0].doc_id == ANSWERABLE[0][2]

    path.unlink()  # a version without calibration (built before it existed) keeps the fixed floor
    old = QueryEngine.open(DataHome.at(fresh_home), version)
    assert old.calibration is None and old.resolve("hybrid-page").floor == DEFAULT_FLOOR


def test_an_experiment_floor_is_used_as_given_not_calibrated():
    fixed, calibrated = experiment_configs(
        EvalRunConfig(
            experiments={
                "floor-0.45": {"base": "hybrid-page", "floor": 0.45},
                "alpha": {"base": "hybrid-page", "alpha": 0.4},
            }
        )
    )
    assert (fixed.floor, fixed.calibrated_floor) == (0.45, False)
    assert calibrated.calibrated_floor and calibrated.answerability


def test_the_run_config_defaults_are_the_library_plans():
    import dataclasses

    from infra_rag_assets.rag.evaluate.eval_plan import EvalPlan

    plan, library = EvalRunConfig().plan(), EvalPlan()

    def plain(value):
        return list(value) if isinstance(value, list | tuple) else value

    for field in dataclasses.fields(EvalPlan):
        assert plain(getattr(plan, field.name)) == plain(getattr(library, field.name)), field.name
