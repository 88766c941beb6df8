"""page_ranker on the fixture corpus: fitted on the version's own candidates of labelled train
questions, written into the serving snapshot, used by hybrid-learned through the query path,
reused (not refitted) by an unchanged rerun, kept by a rewritten snapshot of the same chunks; too
few questions fit nothing."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from infra_rag_assets.control.builds import materialize_version
from infra_rag_assets.defs.resources import BuildResource, DataHomeResource, EmbedderResource
from infra_rag_assets.rag.index.serving_snapshot import snapshot_from_warehouse
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.engine import QueryEngine

pytestmark = pytest.mark.build

TRAIN = [  # (question, relevant page of the fixture corpus)
    (
        "What does maxSurge limit during a rolling update of a Deployment?",
        "kubernetes:concepts_workloads_controllers_deployment",
    ),
    (
        "How many pods can be unavailable during a Deployment rollout?",
        "kubernetes:concepts_workloads_controllers_deployment",
    ),
    (
        "How does Kubernetes track network endpoints of a Service at scale?",
        "kubernetes:concepts_services-networking_endpoint-slices",
    ),
    ("What replaced the Endpoints API for large Services?", "kubernetes:concepts_services-networking_endpoint-slices"),
    ("How do I protect the Prometheus web UI with a bcrypt password?", "prometheus-site:guides_basic-auth"),
    ("In Argo CD, what is an Application and what is its target state?", "argocd:core_concepts"),
]


def _materialize(version, store, sources, config):
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("index_version", [version])
        result = materialize_version(
            version,
            ["page_ranker"],
            instance,
            store,
            BuildResource(sources_file=sources),
            EmbedderResource(batch_size=16),
            run_config={"ops": {"page_ranker": {"config": config}}},
        )
    assert result.success
    return {k: v.value for k, v in result.asset_materializations_for_node("page_ranker")[0].metadata.items()}


def test_page_ranker_is_fitted_per_version_used_by_hybrid_learned_and_reused(fresh_home, built_index, tmp_path):
    version, sources = built_index["version"], str(built_index["sources"])
    train = tmp_path / "train.jsonl"
    train.write_text(
        "".join(
            json.dumps({"id": f"t{i}", "question": q, "relevant": [d], "category": "train"}) + "\n"
            for i, (q, d) in enumerate(TRAIN)
        )
    )
    store = DataHomeResource(home=str(fresh_home))
    config = {"train": str(train), "min_questions": 3}

    first = _materialize(version, store, sources, config)
    path = fresh_home / "serving" / version / "ranker.json"
    assert first["fitted"] is True and first["reused_existing"] is False and first["train_questions"] == len(TRAIN)
    assert json.loads(path.read_text())["hash"] == first["ranker_hash"]
    assert "c_cos" in json.loads(path.read_text())["feature_names"]
    assert (path.parent / "page_vectors.npz").is_file()

    engine = QueryEngine.open(DataHome.at(fresh_home), version)
    pages = {r["doc_id"] for r in engine.catalog.values()}
    assert first["page_vectors"] == len(engine.page_vectors.pages) == len(pages)
    resolved = engine.resolve("hybrid-learned")
    assert resolved.fusion == "learned" and resolved.ranker == f"version:{first['ranker_hash']}"
    result = engine.search(TRAIN[0][0], config="hybrid-learned", k=5)
    assert result.hits[0].doc_id == TRAIN[0][1] and result.config_hash == resolved.config_hash()

    again = _materialize(version, store, sources, config)  # unchanged inputs: the same weights, not refitted
    assert again["reused_existing"] is True and again["ranker_hash"] == first["ranker_hash"]

    snapshot_from_warehouse(DataHome.at(fresh_home), version)  # `infra-rag snapshot`: the same chunks
    kept = QueryEngine.open(DataHome.at(fresh_home), version).resolve("hybrid-learned")
    assert kept.fusion == "learned" and kept.ranker == f"version:{first['ranker_hash']}"
    (path.parent / "page_vectors.npz").rename(tmp_path / "aside.npz")  # a ranker without its page vectors
    assert QueryEngine.open(DataHome.at(fresh_home), version).resolve("hybrid-learned").fusion == "weighted"
    (tmp_path / "aside.npz").rename(path.parent / "page_vectors.npz")

    too_few = _materialize(version, store, sources, {**config, "min_questions": 50})
    assert too_few["fitted"] is False and not path.exists()
    fallback = QueryEngine.open(DataHome.at(fresh_home), version).resolve("hybrid-learned")
    assert fallback.fusion == "weighted" and fallback.max_per_page == 2  # hybrid-page's order
