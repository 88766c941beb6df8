"""Release gates: declarative quality bars an index version must meet before it is released.

Why a YAML file: the bars are product decisions (how good is good enough, how much regression
is tolerable), so they live next to the benchmarks, are reviewed like code, and are evaluated
by one pure function that the Dagster checks, the CLI and the tests all share.

Metric tables are plain dicts keyed ``(regime, slice, metric)``. ``regime`` is the label the
eval run scores under: a retrieval config name (``hybrid-weighted``, ``dense``, ...) or an
alias such as ``serving`` that the caller resolves; gates only match it. ``slice`` is ``overall`` or
``<column>=<value>`` (what ``metrics.summarize`` emits) for the primary benchmark
(``k8s_bench_eval``), and ``<benchmark>/<slice>`` for any other benchmark, e.g.
``own_labelled/category=argocd``. ``metric_table`` builds such a dict from summaries.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from .answers.answer_rows import ANSWER_METRICS
from .metrics import LOWER_IS_BETTER, METRIC_NAMES

PRIMARY_BENCHMARK = "k8s_bench_eval"
COMPARISONS = ("floor", "ceiling", "vs_release")
SEVERITIES = ("critical", "warning")
_REQUIRED = ("name", "metric", "regime", "comparison", "severity")
_ALLOWED = frozenset((*_REQUIRED, "slice", "threshold", "tolerance", "description", "project"))
_EPS = 1e-9  # 0.7 computed as 0.6999999999 must still meet a 0.70 floor

MetricKey = tuple[str, str, str]


class GateConfigError(ValueError):
    """gates.yaml is unreadable or a gate is malformed (message is one line)."""


@dataclass(frozen=True)
class Gate:
    name: str
    metric: str
    regime: str
    comparison: str
    severity: str
    slice: str = "overall"
    threshold: float | None = None
    tolerance: float | None = None
    description: str = ""
    # The docs project the bar is about (its benchmark's pages): a version built without any
    # source of that project (``infra-rag build --source``) cannot be measured on it, and the
    # gate does not apply there; "" applies to every build.
    project: str = ""

    @property
    def key(self) -> MetricKey:
        return (self.regime, self.slice, self.metric)

    @property
    def lower_is_better(self) -> bool:
        return self.metric in LOWER_IS_BETTER


@dataclass(frozen=True)
class GateOutcome:
    gate: Gate
    value: float | None
    baseline: float | None
    passed: bool
    message: str

    @property
    def blocking(self) -> bool:
        """A failed critical gate blocks a release; a failed warning only reports."""
        return not self.passed and self.gate.severity == "critical"


# --- loading -------------------------------------------------------------------------------


def load_gates(path: Path | str) -> list[Gate]:
    """Parse and validate a gates file (a list, or a mapping with a ``gates:`` list)."""
    path = Path(path)
    if not path.is_file():
        raise GateConfigError(f"gates file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise GateConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    entries = raw.get("gates") if isinstance(raw, dict) else raw
    if not isinstance(entries, list) or not entries:
        raise GateConfigError(f"{path}: expected a non-empty list of gates (or a 'gates:' list)")
    gates: list[Gate] = []
    for index, entry in enumerate(entries):
        try:
            gates.append(_gate_from_entry(entry))
        except GateConfigError as exc:
            label = entry.get("name") if isinstance(entry, dict) else None
            raise GateConfigError(f"{path}: gate #{index + 1}{f' ({label})' if label else ''}: {exc}") from None
    _check_unique([g.name for g in gates], path)
    return gates


def _check_unique(names: list[str], path: Path) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise GateConfigError(f"{path}: duplicate gate name {name!r}")
        seen.add(name)


def _gate_from_entry(entry: object) -> Gate:
    """One validated Gate; raises GateConfigError with the reason only (caller adds where)."""
    if not isinstance(entry, dict):
        raise GateConfigError("expected a mapping")
    missing = [k for k in _REQUIRED if not entry.get(k)]
    if missing:
        raise GateConfigError(f"missing {', '.join(missing)}")
    unknown = sorted(set(entry) - _ALLOWED)
    if unknown:
        raise GateConfigError(f"unknown key(s) {', '.join(unknown)}")
    _check_choice(entry, "comparison", COMPARISONS)
    _check_choice(entry, "severity", SEVERITIES)
    if entry["metric"] not in (*METRIC_NAMES, *ANSWER_METRICS):
        raise GateConfigError(f"unknown metric {entry['metric']!r}")
    bound = "tolerance" if entry["comparison"] == "vs_release" else "threshold"
    number = entry.get(bound)
    if isinstance(number, bool) or not isinstance(number, (int, float)) or number < 0:
        raise GateConfigError(f"{entry['comparison']} needs a non-negative number '{bound}'")
    return Gate(
        name=str(entry["name"]),
        metric=entry["metric"],
        regime=str(entry["regime"]),
        comparison=entry["comparison"],
        severity=entry["severity"],
        slice=str(entry.get("slice") or "overall"),
        threshold=float(entry["threshold"]) if bound == "threshold" else None,
        tolerance=float(entry["tolerance"]) if bound == "tolerance" else None,
        description=str(entry.get("description") or "").strip(),
        project=str(entry.get("project") or ""),
    )


def _check_choice(entry: dict, key: str, choices: tuple[str, ...]) -> None:
    if entry[key] not in choices:
        raise GateConfigError(f"{key} must be one of {', '.join(choices)} (got {entry[key]!r})")


# --- evaluation ----------------------------------------------------------------------------


def evaluate_gates(
    gates: list[Gate],
    candidate: Mapping[MetricKey, float | None],
    release: Mapping[MetricKey, float | None] | None,
    projects: Collection[str] | None = None,
) -> list[GateOutcome]:
    """Judge a candidate's metric table against every gate (and the released version's).
    ``projects``: the docs projects the candidate was built from (None: every gate applies); a
    gate about another project passes as not applicable, and says so."""
    return [
        _not_applicable(gate) if projects is not None and gate.project and gate.project not in projects
        else _evaluate(gate, candidate, release)
        for gate in gates
    ]  # fmt: skip


def _not_applicable(gate: Gate) -> GateOutcome:
    return GateOutcome(gate, None, None, True, f"not applicable: this build has no {gate.project} source")


def _number(table: Mapping[MetricKey, float | None] | None, key: MetricKey) -> float | None:
    """The metric as a float, or None when absent, None or NaN (all mean "not measured")."""
    value = None if table is None else table.get(key)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def _evaluate(gate: Gate, candidate: Mapping, release: Mapping | None) -> GateOutcome:
    value = _number(candidate, gate.key)
    label = f"{gate.metric} [{gate.regime}, {gate.slice}]"
    if value is None:
        why = "undefined (None/NaN)" if gate.key in candidate else "missing from candidate"
        return GateOutcome(gate, None, None, False, f"{label}: metric {why}")
    if gate.comparison == "floor":
        assert gate.threshold is not None  # load_gates sets the bound each comparison needs
        ok = value >= gate.threshold - _EPS
        return GateOutcome(gate, value, None, ok, f"{label} = {value:.4g}, floor {gate.threshold:g}")
    if gate.comparison == "ceiling":
        assert gate.threshold is not None
        ok = value <= gate.threshold + _EPS
        return GateOutcome(gate, value, None, ok, f"{label} = {value:.4g}, ceiling {gate.threshold:g}")
    return _vs_release(gate, value, release, label)


def _vs_release(gate: Gate, value: float, release: Mapping | None, label: str) -> GateOutcome:
    """Regression check: the candidate may be worse than the release by at most ``tolerance``."""
    if release is None:
        return GateOutcome(gate, value, None, True, "no release to compare")
    baseline = _number(release, gate.key)
    if baseline is None:
        return GateOutcome(gate, value, None, True, f"{label}: release has no value to compare")
    assert gate.tolerance is not None  # load_gates sets it on every vs_release gate
    change = value - baseline
    regression = change if gate.lower_is_better else -change
    ok = regression <= gate.tolerance + _EPS
    return GateOutcome(
        gate,
        value,
        baseline,
        ok,
        f"{label} = {value:.4g} vs release {baseline:.4g} (change {change:+.4g}, tolerance {gate.tolerance:g})",
    )


# --- metric tables -------------------------------------------------------------------------


def slice_key(benchmark: str, slice_name: str) -> str:
    """The slice string gates use: bare for the primary benchmark, prefixed otherwise."""
    return slice_name if benchmark == PRIMARY_BENCHMARK else f"{benchmark}/{slice_name}"


def metric_table(summaries: Mapping[tuple[str, str], list[dict]]) -> dict[MetricKey, float | None]:
    """``{(benchmark, regime): summarize(...) output}`` -> ``{(regime, slice, metric): value}``."""
    table: dict[MetricKey, float | None] = {}
    for (benchmark, regime), rows in summaries.items():
        for row in rows:
            for metric in METRIC_NAMES:
                if metric in row:
                    table[(regime, slice_key(benchmark, row["slice"]), metric)] = row[metric]
    return table


def blocking(outcomes: list[GateOutcome]) -> list[GateOutcome]:
    """The failed critical gates: empty means the candidate may be released."""
    return [o for o in outcomes if o.blocking]
