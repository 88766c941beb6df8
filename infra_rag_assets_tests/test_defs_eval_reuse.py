"""An unchanged rebuild re-asks nothing: eval_run and abstention_calibration read back what an
identical earlier version measured, and anything changed asks again (real instance and stores)."""

from __future__ import annotations

import gzip
import json

import dagster as dg
import pytest

from infra_rag_assets.control.builds import materialize_version, register_version
from infra_rag_assets.control.stages import index_stages
from infra_rag_assets.defs.resources import BuildResource, DataHomeResource, EmbedderResource

pytestmark = pytest.mark.build

QUESTIONS = [
    (
        "q-maxsurge",
        "What does maxSurge limit during a rolling update of a Deployment?",
        ["kubernetes:concepts_workloads_controllers_deployment"],
    ),
    (
        "q-basic-auth",
        "How do I protect the Prometheus web UI with a bcrypt password?",
        ["prometheus-site:guides_basic-auth"],
    ),
    ("q-argocd-app", "In Argo CD, what is an Application and what is its target state?", ["argocd:core_concepts"]),
    ("q-off-1", "What is the boiling point of olive oil in Kelvin?", []),
    ("q-off-2", "Which football club won the 1998 World Cup final?", []),
    ("q-off-3", "How long should I rest a steak after grilling it?", []),
]
GATES = """
gates:
  - {name: hit5-floor, metric: hit@5, regime: serving, slice: "tiny/overall", comparison: floor,
     threshold: 0.5, severity: critical}
"""
STAGES = [*index_stages(), "abstention_calibration", "page_ranker", "eval_run"]


def _write(path, questions) -> str:
    path.write_text(
        "".join(
            json.dumps({"id": i, "question": q, "relevant": r, "category": "smoke" if r else "unanswerable"}) + "\n"
            for i, q, r in questions
        )
    )
    return str(path)


def _meta(result, asset: str) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node(asset)[0].metadata.items()}


def test_an_unchanged_rebuild_reuses_eval_rows_and_anything_changed_asks_again(tmp_path, fixture_sources, monkeypatch):
    (tmp_path / "gates.yaml").write_text(GATES)
    monkeypatch.setenv("INFRA_RAG_GATES", str(tmp_path / "gates.yaml"))
    bench = _write(tmp_path / "tiny.jsonl", QUESTIONS)
    answerable = _write(tmp_path / "answerable.jsonl", [q for q in QUESTIONS if q[2]])
    off_topic = _write(tmp_path / "off.jsonl", [q for q in QUESTIONS if not q[2]])
    store = DataHomeResource(home=str(tmp_path / "home"))
    settings = BuildResource(sources_file=str(fixture_sources), adapt=False)
    run_config = {
        "ops": {
            "eval_run": {
                "config": {"benchmarks": [bench], "regimes": ["dense", "lexical", "hybrid-page", "hybrid-rerank"]}
            },
            "abstention_calibration": {
                "config": {"off_topic": off_topic, "answerable": answerable, "min_questions": 2}
            },
            "page_ranker": {"config": {"train": answerable}},
        }
    }

    def build(stages=STAGES, version=None, config=run_config):
        with_version = version or register_version(instance, store, settings, created_by="test")
        result = materialize_version(
            with_version, stages, instance, store, settings, EmbedderResource(batch_size=16), run_config=config
        )
        assert result.success
        return with_version, result

    def rows(version):
        return (
            store.data_home()
            .warehouse()
            .frame(
                "SELECT regime, question_id, rank, abstained, ranked_chunk_ids FROM eval_results "
                "WHERE index_version = ? ORDER BY regime, question_id",
                [version],
            )
            .to_dicts()
        )

    with dg.DagsterInstance.ephemeral() as instance:
        first, measured = build()
        second, reused = build()
        assert _meta(measured, "eval_run")["reused_rows"] == 0
        assert _meta(measured, "abstention_calibration")["reused_from"] == "measured in this run"
        meta = _meta(reused, "eval_run")
        assert meta["reused_rows"] == len(rows(second)) == len(rows(first)) > 0
        assert first in meta["coverage"] and rows(second) == rows(first)
        # No cross-encoder here: hybrid-rerank degrades on every question, as it did when stored.
        degraded = (
            store.data_home()
            .warehouse()
            .rows("SELECT DISTINCT regime FROM eval_results WHERE index_version = ? AND degraded", [second])
        )
        assert degraded == [("hybrid-rerank",)]
        # ... and the run says why beside the scorecard, not only "degraded on N questions".
        why = _meta(measured, "eval_run")["degraded_reasons"]
        assert set(why) == {"hybrid-rerank"} and why["hybrid-rerank"] != "not degraded when asked again", why
        calibration = _meta(reused, "abstention_calibration")
        assert calibration["reused_from"] == first
        assert calibration["floor"] == _meta(measured, "abstention_calibration")["floor"]
        written = json.loads((tmp_path / "home" / "serving" / second / "calibration.json").read_text())
        assert written["version"] == second  # the copy names the version it serves

        # A changed benchmark file is asked again; so is a changed regime list.
        changed = _write(tmp_path / "tiny.jsonl", [*QUESTIONS, ("q-more", "What is a Pod disruption budget?", [])])
        again = {
            "ops": {"eval_run": {"config": {"benchmarks": [changed], "regimes": ["dense", "lexical", "hybrid-page"]}}}
        }
        _, asked = build(["eval_run"], second, again)
        assert _meta(asked, "eval_run")["reused_rows"] == 0
        fewer = {"ops": {"eval_run": {"config": {"benchmarks": [changed], "regimes": ["dense", "lexical"]}}}}
        _, asked = build(["eval_run"], second, fewer)
        assert _meta(asked, "eval_run")["reused_rows"] == 0
        _, read_back = build(["eval_run"], second, fewer)  # asked once: now identical
        assert _meta(read_back, "eval_run")["reused_rows"] == len(rows(second))
        # A stored run that degraded differently (here: dense, as if its index had been unreadable)
        # is not read back: degradation is a fact of the machine at the time, not of the inputs.
        for stored in (tmp_path / "home" / "eval_cache").glob("*.json.gz"):
            kept = json.loads(gzip.decompress(stored.read_bytes()))
            for row in kept["run"]["rows"]:
                row["degraded"] = row["degraded"] or row["regime"] == "dense"
            stored.write_bytes(gzip.compress(json.dumps(kept).encode()))
        _, reasked = build(["eval_run"], second, fewer)
        assert _meta(reasked, "eval_run")["reused_rows"] == 0
        off = {
            "ops": {
                "eval_run": {
                    "config": {"benchmarks": [changed], "regimes": ["dense", "lexical"], "reuse_identical": False}
                }
            }
        }
        _, forced = build(["eval_run"], second, off)
        assert _meta(forced, "eval_run")["reused_rows"] == 0
