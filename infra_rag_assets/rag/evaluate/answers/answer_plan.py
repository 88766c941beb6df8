"""Which benchmarks get answers in an eval run, and reuse of an identical earlier answer run.

An answer run is read back when everything that decides its rows is identical: the retrieval
inputs of the eval run (upstream content hashes, configuration, regimes), the benchmark's
content, the judge, the generator (method, model, prompt hash) and the fault drill. Else each
answer and judgement is still looked up in its own cache (``answer_eval.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...answer.answerers import resolve_answerer
from ...answer.generate import generator_identity
from ...operate.home import DataHome
from ...operate.warehouse import Warehouse
from ..benchmarks import benchmark_path, coverage, load_benchmark
from ..reuse import content_key, load_run, save_run
from .answer_eval import AnswerRun, Judge, answer_benchmark
from .answer_metrics import ChunkRecord

SAFETY_BENCHMARK = "adversarial"
ASKED = "this run"


@dataclass
class AnswerOutcome:
    runs: list[AnswerRun]
    measured_in: dict[str, str]
    uncovered: dict[str, int]

    @property
    def generation_hits(self) -> int:
        return sum(r.generation_hits for r in self.runs)

    @property
    def judging_hits(self) -> int:
        return sum(r.judging_hits for r in self.runs)


def citation_lookup(warehouse: Warehouse, version: str) -> tuple[dict[str, ChunkRecord], dict[str, str]]:
    """The version's chunks and page texts, which every citation must resolve into."""
    chunks = warehouse.chunks_of(version, ("chunk_id", "doc_id", "url", "text", "start_char"))
    docs = warehouse.documents_of(version, ("doc_id", "text"))
    return (
        {c: ChunkRecord(d, u, t, s) for c, d, u, t, s in chunks.iter_rows()},
        {d: t or "" for d, t in docs.iter_rows()},
    )


def answer_or_reuse(
    engine,
    home: DataHome,
    version: str,
    known: set[str],
    retrieval_inputs: dict,
    judge: Judge | None,
    *,
    benchmarks: Sequence[str],
    serving_config: str,
    fault: str,
    log: Callable[[str], None],
    progress_for: Callable[[str], Callable[[int, int], None] | None],
) -> AnswerOutcome:
    """Every answer benchmark answered and judged, or read back from an identical earlier run."""
    chunks, docs = citation_lookup(home.warehouse(), version)
    outcome = AnswerOutcome([], {}, {})
    cache_root = home.cache("eval_run").root
    jobs = [(name, a) for name in benchmarks for a in eval_answerers(engine)]
    for name, answerer in jobs:
        bench = load_benchmark(name)
        covered, uncovered = coverage(bench.records, known)
        run_name = bench.name if answerer == jobs[0][1] else f"{bench.name}[{answerer}]"
        outcome.uncovered[run_name] = len(uncovered)
        key = content_key(
            "answer_run",
            {
                **retrieval_inputs,
                "benchmark": bench.version_hash,
                "judge": judge.identity if judge else None,
                "generator": generator_identity(**engine.answerer_args(answerer)),
                "answerer": answerer,
                "serving": serving_config,
                "fault": fault,
            },
        )
        addressed = judge is not None and all(retrieval_inputs["upstream"].values())
        stored = load_run(cache_root, key, AnswerRun) if addressed else None
        if stored is not None:
            log(f"{run_name}: answers reused from the run of {stored[1]} (identical inputs, judge and code)")
            outcome.runs.append(stored[0])
            outcome.measured_in[run_name] = stored[1]
            continue
        log(f"{run_name}: answering {len(covered)} questions ({len(uncovered)} not in corpus)")
        run = answer_benchmark(
            engine,
            run_name,
            bench.version_hash,
            covered,
            judge=judge,
            chunks=chunks,
            docs=docs,
            serving_config=serving_config,
            generations=home.cache("generation"),
            judgings=home.cache("judging"),
            fault=fault,
            safety=_safety_cases(bench.name),
            progress=progress_for(f"{run_name} answers"),
            answerer=answerer,
        )
        log(
            f"{run_name}: {run.generation_hits} answers and {run.judging_hits} judgements from cache, "
            f"judge {run.judge_seconds:.1f}s"
            + (
                f", judge calls ${run.judge_cost_usd:.4f}, {run.judge_errors} failed"
                if run.judge_cost_usd or run.judge_errors
                else ""
            )
        )
        if addressed and not run.judge_errors:  # answers the judge failed on are asked again next run
            save_run(cache_root, key, run, version)
        outcome.runs.append(run)
        outcome.measured_in[run_name] = ASKED
    return outcome


def eval_answerers(engine) -> list[str]:
    """Who answers the benchmarks: the serving answerer first (its rows carry the benchmark's
    name and feed the gates), then the reader and the extractive answerer for comparison (rows
    named ``bench[answerer]``); the reader only where the version has one, learnt or not."""
    serving = resolve_answerer(None)
    if serving == "reader" and engine.answerer_args()["reader"] is None:
        serving = "extractive"  # no reader, or one that did not learn: the default answers extractively
    others = [a for a in ("reader", "extractive") if a != serving and (a != "reader" or engine.reader() is not None)]
    return [serving, *others]


def _safety_cases(name: str) -> dict | None:
    if name != SAFETY_BENCHMARK:
        return None
    from ..safety import load_cases

    return {case.id: case for case in load_cases(benchmark_path(name))}
