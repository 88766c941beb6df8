"""Release gates: loading, pass/fail, tolerances, missing metrics, malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra_rag_assets.package_data import default_gates_file
from infra_rag_assets.rag.evaluate.gates import (
    Gate,
    GateConfigError,
    blocking,
    evaluate_gates,
    load_gates,
    metric_table,
)
from infra_rag_assets.rag.evaluate.metrics import summarize

pytestmark = pytest.mark.unit

H = "hybrid-weighted"


def floor(metric="mrr@10", threshold=0.70, severity="critical", slice="overall"):
    return Gate(
        name=f"{metric}-floor",
        metric=metric,
        regime=H,
        comparison="floor",
        severity=severity,
        slice=slice,
        threshold=threshold,
    )


def vs_release(metric="mrr@10", tolerance=0.02, severity="critical"):
    return Gate(
        name=f"{metric}-reg", metric=metric, regime=H, comparison="vs_release", severity=severity, tolerance=tolerance
    )


def test_project_gates_file_loads_with_the_promised_gates():
    gates = {g.name: g for g in load_gates(default_gates_file())}
    mrr = gates["k8s-mrr-floor"]
    # regime is whatever label the eval run keys its table with ("serving" or a config name)
    assert mrr.regime and len({g.regime for g in gates.values()}) >= 1
    assert (mrr.metric, mrr.slice, mrr.threshold, mrr.severity) == ("mrr@10", "overall", 0.70, "critical")
    assert gates["k8s-hit5-floor"].threshold == 0.85
    assert gates["k8s-mrr-no-regression"].tolerance == 0.02
    assert gates["abstention-precision-floor"].severity == "critical"
    assert gates["abstention-recall-floor"].severity == "warning"  # measured: see gates.yaml
    assert gates["latency-p95-ceiling"].severity == "warning"
    assert any(g.slice.startswith("own_labelled/category=") for g in gates.values())


def test_floor_pass_fail_and_float_noise():
    ok, bad, edge = evaluate_gates(
        [floor(), floor(threshold=0.9), floor(threshold=0.7)], {(H, "overall", "mrr@10"): 0.7 + 1e-12 - 1e-11}, None
    )  # 0.69999999999 ~ 0.70
    assert bad.passed is False and bad.value == pytest.approx(0.7)
    assert ok.passed and edge.passed
    assert "floor 0.9" in bad.message


def test_ceiling_for_latency():
    gate = Gate(name="p95", metric="latency_p95_ms", regime=H, comparison="ceiling", severity="warning", threshold=800)
    [fast] = evaluate_gates([gate], {(H, "overall", "latency_p95_ms"): 420.0}, None)
    [slow] = evaluate_gates([gate], {(H, "overall", "latency_p95_ms"): 900.0}, None)
    assert fast.passed and not slow.passed and not slow.blocking  # warning never blocks


def test_vs_release_tolerance():
    key = (H, "overall", "mrr@10")
    gate = vs_release()
    # drop 0.80 -> 0.79 = 0.01 <= 0.02: pass; 0.80 -> 0.77 = 0.03 > 0.02: fail
    [small] = evaluate_gates([gate], {key: 0.79}, {key: 0.80})
    [big] = evaluate_gates([gate], {key: 0.77}, {key: 0.80})
    [exact] = evaluate_gates([gate], {key: 0.78}, {key: 0.80})  # drop exactly 0.02
    [better] = evaluate_gates([gate], {key: 0.95}, {key: 0.80})
    assert small.passed and exact.passed and better.passed
    assert not big.passed and big.blocking and big.baseline == 0.80
    assert "-0.03" in big.message


def test_vs_release_latency_is_lower_is_better():
    key = (H, "overall", "latency_p95_ms")
    gate = Gate(
        name="lat", metric="latency_p95_ms", regime=H, comparison="vs_release", severity="warning", tolerance=150
    )
    [faster] = evaluate_gates([gate], {key: 100.0}, {key: 500.0})
    [slower] = evaluate_gates([gate], {key: 700.0}, {key: 500.0})  # +200 ms > 150
    assert faster.passed and not slower.passed


def test_no_release_passes_and_release_without_metric_passes():
    key = (H, "overall", "mrr@10")
    [none] = evaluate_gates([vs_release()], {key: 0.1}, None)
    assert none.passed and none.message == "no release to compare"
    [new_metric] = evaluate_gates([vs_release()], {key: 0.1}, {})
    assert new_metric.passed and "release has no value" in new_metric.message


def test_missing_or_undefined_metric_fails():
    [missing] = evaluate_gates([floor()], {}, None)
    assert not missing.passed and missing.value is None
    assert "mrr@10 [hybrid-weighted, overall]: metric missing from candidate" in missing.message
    [undefined] = evaluate_gates([floor()], {(H, "overall", "mrr@10"): None}, None)
    assert not undefined.passed and "undefined" in undefined.message
    [nan] = evaluate_gates([floor()], {(H, "overall", "mrr@10"): float("nan")}, None)
    assert not nan.passed
    # vs_release with a release but no candidate value also fails
    [reg] = evaluate_gates([vs_release()], {}, {(H, "overall", "mrr@10"): 0.8})
    assert not reg.passed and [o.gate.name for o in blocking([reg])] == ["mrr@10-reg"]


def test_a_gate_about_a_project_the_build_left_out_does_not_apply():
    k8s = Gate(**{**floor().__dict__, "name": "k8s-floor", "project": "kubernetes"})
    everywhere = floor(metric="hit@5")
    table = {(H, "overall", "hit@5"): 0.9}  # a Prometheus-only build: no k8s question is covered
    left_out, measured = evaluate_gates([k8s, everywhere], table, None, projects={"prometheus"})
    assert left_out.passed and left_out.value is None
    assert left_out.message == "not applicable: this build has no kubernetes source"
    assert measured.passed and measured.value == 0.9
    # a build with the project, or one whose sources are unknown, is held to the gate
    for projects in ({"kubernetes", "prometheus"}, None):
        [held] = evaluate_gates([k8s], table, None, projects=projects)
        assert not held.passed and "missing from candidate" in held.message
    shipped = {g.name: g.project for g in load_gates(default_gates_file())}
    assert shipped["k8s-mrr-floor"] == shipped["answer-adherent-floor"] == "kubernetes"
    assert shipped["safety-no-harm"] == ""  # the adversarial set spans every project


def test_metric_table_from_summaries_matches_gate_keys():
    rows = [
        {"rank": 1, "abstained": False, "should_abstain": False, "category": "argocd"},
        {"rank": None, "abstained": True, "should_abstain": True, "category": "unanswerable"},
    ]
    table = metric_table(
        {
            ("k8s_bench_eval", H): summarize(rows[:1]),
            ("own_labelled", H): summarize(rows) + summarize(rows, by="category"),
        }
    )
    assert table[(H, "overall", "mrr@10")] == 1.0
    assert table[(H, "own_labelled/overall", "abstention_recall")] == 1.0
    assert table[(H, "own_labelled/category=argocd", "hit@5")] == 1.0
    gates = [floor(slice="own_labelled/category=argocd", metric="hit@5", threshold=0.8)]
    assert evaluate_gates(gates, table, None)[0].passed


BAD_FILES = {
    "not yaml": ("gates: [\n  - {name: x", "not valid YAML"),
    "empty": ("", "non-empty list"),
    "missing keys": ("gates:\n  - {name: a, metric: mrr@10}", "gate #1 (a): missing regime"),
    "bad comparison": (
        "- {name: a, metric: mrr@10, regime: h, comparison: above, severity: critical, threshold: 1}",
        "comparison must be one of",
    ),
    "bad severity": (
        "- {name: a, metric: mrr@10, regime: h, comparison: floor, severity: fatal, threshold: 1}",
        "severity must be one of",
    ),
    "floor without threshold": (
        "- {name: a, metric: mrr@10, regime: h, comparison: floor, severity: critical}",
        "floor needs a non-negative number 'threshold'",
    ),
    "tolerance not a number": (
        "- {name: a, metric: mrr@10, regime: h, comparison: vs_release, severity: critical, tolerance: lots}",
        "'tolerance'",
    ),
    "unknown metric": (
        "- {name: a, metric: mrr@20, regime: h, comparison: floor, severity: critical, threshold: 1}",
        "unknown metric 'mrr@20'",
    ),
    "typo key": (
        "- {name: a, metric: mrr@10, regime: h, comparison: floor, severity: critical, threshold: 1, treshold: 2}",
        "unknown key(s) treshold",
    ),
    "duplicate": (
        "- {name: a, metric: mrr@10, regime: h, comparison: floor, severity: critical,"
        " threshold: 1}\n- {name: a, metric: hit@5, regime: h, comparison: floor,"
        " severity: warning, threshold: 1}",
        "duplicate gate name 'a'",
    ),
    "scalar entry": ("- just a string", "gate #1: expected a mapping"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_malformed_gate_files_give_one_line_errors(tmp_path: Path, case: str):
    text, expected = BAD_FILES[case]
    path = tmp_path / "gates.yaml"
    path.write_text(text)
    with pytest.raises(GateConfigError) as info:
        load_gates(path)
    message = str(info.value)
    assert expected in message and "\n" not in message


def test_missing_gate_file(tmp_path: Path):
    with pytest.raises(GateConfigError, match="gates file not found"):
        load_gates(tmp_path / "nope.yaml")


def test_top_level_list_and_default_slice(tmp_path: Path):
    path = tmp_path / "g.yaml"
    path.write_text(
        "- {name: a, metric: hit@1, regime: dense, comparison: floor,"
        " severity: warning, threshold: 0.5, description: '  why  '}\n"
    )
    [gate] = load_gates(path)
    assert gate.slice == "overall" and gate.description == "why" and gate.tolerance is None
