"""One evaluation of an index version: which benchmarks, regimes and experiments (no Dagster).

Every benchmark is scored under every regime, or read back when an earlier version scored it
from identical inputs and code (``reuse.py``): the inputs are the upstream content hashes, the
build configuration, the known page ids, the resolved regimes, k and the serving config.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..index.config import stable_hash
from ..operate.home import DataHome
from ..search.retrieval_settings import DEFAULT_CONFIG
from .answers.answer_plan import SAFETY_BENCHMARK
from .benchmarks import Benchmark, load_benchmark
from .evaluation import REGIMES, BenchmarkRun, label, run_benchmark
from .reuse import content_key, degraded_regimes, load_run, probe_degraded, save_run

ASKED = "this run"  # ``measured_in`` of a benchmark scored now, not read back
DEFAULT_BENCHMARKS = ("k8s_bench_eval", "own_labelled", "off_topic", "near_miss_blind")
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class EvalPlan:
    benchmarks: Sequence[str] = DEFAULT_BENCHMARKS
    regimes: Sequence[str] = REGIMES
    k: int = 10
    serving_config: str = DEFAULT_CONFIG  # what the release would serve; gates judge regime "serving"
    serving_k: int = 10
    experiments: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    reuse_identical: bool = True
    # Benchmarks answered by the serving answerer and judged (answer_plan.py); None: the
    # retrieval benchmarks plus the safety set; empty: no answers.
    answer_benchmarks: Sequence[str] | None = None
    answer_fault: str = ""  # a gate fire drill: answer_faults.FAULTS

    def all_regimes(self) -> list:
        """The named regimes, then each experiment's own config (labelled with its name)."""
        return [*self.regimes, *experiment_configs(self.experiments)]

    def answer_names(self) -> list[str]:
        if self.answer_benchmarks is not None:
            return list(self.answer_benchmarks)
        return list(dict.fromkeys([*self.benchmarks, SAFETY_BENCHMARK]))

    @property
    def serving(self) -> tuple[str, int]:
        return self.serving_config, self.serving_k


@dataclass
class EvalOutcome:
    runs: list[BenchmarkRun]
    measured_in: dict[str, str]  # benchmark -> ASKED, or the version whose scoring was read back

    @property
    def reused_rows(self) -> int:
        return sum(len(r.rows) for r in self.runs if self.measured_in[r.benchmark] != ASKED)


def experiment_configs(experiments: Mapping[str, Mapping[str, Any]]) -> list:
    """Each experiment = a named config with overrides, labelled with the experiment's name. An
    explicit ``floor`` is used as given, not replaced by the version's calibrated floor."""
    from ..search.engine import named_config
    from ..search.retrieval import RetrievalSettings

    out = []
    for name, given in experiments.items():
        overrides = dict(given)
        if "floor" in overrides:
            overrides.setdefault("calibrated_floor", False)
        base = named_config(overrides.pop("base", "hybrid-weighted"))
        out.append(RetrievalSettings.from_dict({**base.to_dict(), **overrides, "name": name}))
    return out


def missing_indexes(home: DataHome, version: str) -> list[str]:
    """Which of this version's indexes are not on disk (checked in the data, not an event log)."""
    from ..index.vector_store import table_exists

    missing = [] if table_exists(home.vectors_uri(), version) else ["vectors"]
    return missing + ([] if home.version(version).tantivy.is_dir() else ["lexical_index"])


def shared_inputs(
    plan: EvalPlan, engine, known: set[str], upstream: Mapping[str, str], build_config: dict | None
) -> dict:
    """What every benchmark's scores depend on besides its own questions (content, not names);
    ``upstream`` maps each upstream asset to its data version."""
    regimes = plan.all_regimes()
    return {
        "upstream": dict(upstream),
        "build_config": build_config,
        "known_doc_ids": stable_hash(sorted(known), 32),
        "regimes": [engine.resolve(r).to_dict() for r in regimes],
        "labels": [label(r) for r in regimes],
        "serving": engine.resolve(plan.serving_config).to_dict(),
        "k": plan.k,
        "serving_k": plan.serving_k,
    }


def score_or_reuse(
    plan: EvalPlan,
    engine,
    known: set[str],
    inputs: dict,
    *,
    cache_root: Path,
    version: str,
    log: Callable[[str], None],
    progress_for: Callable[[str], Progress | None],
) -> EvalOutcome:
    """Each benchmark scored, or read back from an identical earlier scoring (``cache_root``)."""
    outcome = EvalOutcome([], {})
    regimes = plan.all_regimes()
    for name in plan.benchmarks:
        bench = load_benchmark(name)
        # No reuse without a content address for every upstream (e.g. an index built outside Dagster).
        addressed = plan.reuse_identical and all(inputs["upstream"].values())
        key = content_key("eval_run", {**inputs, "benchmark": bench.version_hash})
        stored = load_run(cache_root, key) if addressed else None
        if stored is not None and degraded_regimes(stored[0]) != _degraded_now(engine, plan, regimes, bench):
            log(f"{bench.name}: a regime degrades differently than when {stored[1]} scored it")
            stored = None
        if stored is not None:
            log(f"{bench.name}: reused the scoring of {stored[1]} (identical inputs and code)")
            outcome.runs.append(stored[0])
            outcome.measured_in[bench.name] = stored[1]
            continue
        log(f"{bench.name}: {len(bench.records)} questions × {len(plan.regimes)} regimes")
        run = run_benchmark(
            engine, bench, known, regimes, plan.k, serving=plan.serving, progress=progress_for(bench.name)
        )
        if addressed:
            save_run(cache_root, key, run, version)
        outcome.runs.append(run)
        outcome.measured_in[bench.name] = ASKED
    return outcome


def _degraded_now(engine, plan: EvalPlan, regimes: list, bench: Benchmark) -> dict[str, bool]:
    question = next((r.question for r in bench.records), "")
    return probe_degraded(engine, question, regimes, plan.serving, plan.k)
