"""Cost growth (issue 38): per-stage seconds and peak RSS on nested samples of the real corpus.

For each fraction (default 25 %, 50 %, 100 % of every source's pages, one seeded order per
source so each sample holds the smaller ones; the PDFs are always in) the script builds a new
version in a data home and Dagster home of its own, one stage per process
(`infra-rag build --in-process --from S --through S`), so each stage's peak RSS is the
high-water mark of a process that ran only that stage (read with ``os.wait4``), and its seconds
are Dagster's step stats of that run (the asset's step and its checks, without the start-up).
It fits each stage's growth exponent b in seconds ~ pages^b (least squares on log-log),
extrapolates to 10x and 100x the full corpus's pages and writes
eval/results/scale_benchmark.json and an SVG plot beside it; the table printed is the one in
docs/results.md.

The build is the quick one (INFRA_RAG_ADAPT=0: the base model, no domain adaptation): the
adaptation's cost is set by its triplet budget, measured by eval.bench_stages.

    python -m eval.bench_scale [--fractions 0.25 0.5 1] [--through release] [--work /tmp/infra_rag_scale] [--resume]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg

from infra_rag_assets import settings
from infra_rag_assets.control.stages import stages_for

from .bench_build import vectors_metadata
from .scale_report import fit, table, write_plot

ROOT = Path(__file__).resolve().parents[1]
PAGE_SUFFIXES = (".md", ".markdown", ".html", ".htm")


def sample_corpus(source: Path, target: Path, fraction: float, seed: int) -> int:
    """Copy ``fraction`` of each top-level source folder's pages (a seeded order per folder, so a
    smaller sample is a subset of a larger one) and every other file; returns the pages copied."""
    shutil.rmtree(target, ignore_errors=True)
    copied = 0
    for folder in sorted(p for p in source.iterdir() if p.is_dir()):
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        pages = [p for p in files if p.suffix.lower() in PAGE_SUFFIXES]
        random.Random(f"{seed}:{folder.name}").shuffle(pages)
        keep = set(pages[: math.ceil(len(pages) * fraction)]) | {p for p in files if p not in set(pages)}
        for path in keep:
            dest = target / path.relative_to(source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
        copied += len(keep)
    for path in source.iterdir():
        if path.is_file():
            shutil.copyfile(path, target / path.name)
    return copied


def run_stage(env: dict, args: list[str], log: Path) -> dict:
    """One `infra-rag build ... --in-process --json` process: its JSON, exit code, wall seconds and
    peak RSS (MiB, that process alone)."""
    started = time.perf_counter()
    with open(log, "ab") as err, open(log.with_suffix(".out"), "w+b") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "infra_rag_assets", "build", "--in-process", "--json", *args],
            env=env,
            stdout=out,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        printed = out.read().decode(errors="replace").strip()
    try:
        result = json.loads(printed[printed.index("{") :]) if "{" in printed else {}
    except ValueError:
        result = {}
    return {
        **result,
        "exit_code": proc.returncode,
        "process_seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mib": usage.ru_maxrss // 1024,
    }


def baseline_rss_mib(env: dict) -> int:
    """Peak RSS of a process that only imports the code location (what every stage process pays)."""
    proc = subprocess.Popen([sys.executable, "-c", "import infra_rag_assets.definitions"], env=env)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return usage.ru_maxrss // 1024


def step_seconds(dagster_home: Path, run_id: str) -> dict[str, float]:
    """Seconds of each step of one run (the asset's step and its checks), from Dagster's stats."""
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        return {
            stat.step_key: round(stat.end_time - stat.start_time, 2)
            for stat in instance.get_run_step_stats(run_id)
            if stat.start_time and stat.end_time
        }


def build_sample(corpus: Path, work: Path, fraction: float, seed: int, through: str, resume: bool) -> dict:
    """A new version of the ``fraction`` sample, one stage per process; per-stage figures. With
    ``resume``, a sample an earlier run left part-built goes on from its next stage."""
    base = sample_dir(work, fraction)
    progress = base / "progress.json"
    if resume and progress.is_file():
        sample = json.loads(progress.read_text())
    else:
        shutil.rmtree(base, ignore_errors=True)
        (base / "dagster").mkdir(parents=True)
        sample = {"fraction": fraction, "pages": sample_corpus(corpus, base / "corpus", fraction, seed)}
    env = {**os.environ, **sample_env(base)}
    sample.setdefault("baseline_rss_mib", baseline_rss_mib(env))
    rows = sample.setdefault("stages", {})
    for stage in (s for s in stages_for(through) if s not in rows):
        rows[stage] = measure_stage(base, env, stage, sample)
        progress.write_text(json.dumps(sample, indent=2))
        print(f"{fraction:.0%} {stage}: {rows[stage]}", flush=True)
    if "vectors" in rows:
        sample["chunks"] = vectors_metadata(base / "dagster", sample["index_version"]).get("dagster/row_count")
    (base / "sample.json").write_text(json.dumps(sample, indent=2))
    return sample


def measure_stage(base: Path, env: dict, stage: str, sample: dict) -> dict:
    """Run one stage of the sample's version (registering it on the first) in its own process."""
    version = sample.get("index_version", "")
    args = ["--through", stage] + (["--index-version", version, "--from", stage] if version else [])
    ran = run_stage(env, args, base / "build.log")
    sample["index_version"] = version = version or ran.get("index_version", "")
    # A failed build prints no JSON: its run is the version's newest (stages run one at a time).
    run_id = ran.get("run_id") or newest_run(base / "dagster", version)
    if not run_id:
        sys.exit(f"{stage} of {base.name}: no run (exit {ran['exit_code']}); see {base / 'build.log'}")
    steps = step_seconds(base / "dagster", run_id)
    return {
        "seconds": round(sum(steps.values()), 1),
        "asset_seconds": steps.get(stage),
        "checks_seconds": round(sum(v for k, v in steps.items() if k != stage), 1),
        "process_seconds": ran["process_seconds"],
        "peak_rss_mib": ran["peak_rss_mib"],
        "outcome": ran.get("outcome") or last_error(base / "build.log") or f"exit {ran['exit_code']}",
    }


# What a stage reuses from earlier runs in its data home: moved aside before a re-measurement.
STAGE_CACHES = {"vectors": ("embedding_cache",), "eval_run": ("eval_cache", "generations", "judgings")}


def remeasure(
    work: Path, fraction: float, stage: str, replace: bool, keep_caches: bool = False, name: str = ""
) -> dict:
    """``stage`` again on a finished sample with its caches moved aside (the first time; later
    re-measurements drop the caches the previous one made), under ``remeasured`` in sample.json;
    with ``replace`` it becomes the stage's row (the first one kept as ``replaced``): for a row
    whose run reused cached results."""
    base = sample_dir(work, fraction)
    sample = json.loads((base / "sample.json").read_text())
    for folder in () if keep_caches else STAGE_CACHES.get(stage, ()):
        cache, aside = base / "home" / folder, base / "home" / f"{folder}.before-remeasure"
        if aside.exists():
            shutil.rmtree(cache, ignore_errors=True)
        elif cache.exists():
            cache.rename(aside)
    env = {**os.environ, **sample_env(base)}
    row = measure_stage(base, env, stage, sample)
    row["code"] = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                                 text=True).stdout.strip()  # fmt: skip
    row["caches"] = "kept" if keep_caches else ("moved aside" if stage in STAGE_CACHES else "none")
    if replace:
        sample.setdefault("replaced", {})[stage] = sample["stages"][stage]
        sample["stages"][stage] = row
    else:
        sample.setdefault("remeasured", {})[name or stage] = row
    (base / "sample.json").write_text(json.dumps(sample, indent=2))
    print(f"{fraction:.0%} {stage} again: {row}", flush=True)
    return sample


def sample_env(base: Path) -> dict:
    return {
        "INFRA_RAG_HOME": str(base / "home"),
        "INFRA_RAG_CORPUS": str(base / "corpus"),
        "DAGSTER_HOME": str(base / "dagster"),
        "INFRA_RAG_ADAPT": "0",
    }


def newest_run(dagster_home: Path, version: str) -> str:
    if not version:
        return ""
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": version}), limit=1)
        return runs[0].run_id if runs else ""


def last_error(log: Path) -> str:
    """The CLI's last ``error:`` line (a failed gate, say), as the stage's outcome."""
    errors = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("error: ")]
    return errors[-1].removeprefix("error: ")[:300] if errors else ""


def sample_dir(work: Path, fraction: float) -> Path:
    return work / f"f{round(fraction * 100):03d}"


def measured_sample(corpus: Path, work: Path, fraction: float, args) -> dict:
    """The sample's figures: built now, or (``--resume``) those of an earlier run of this script."""
    done = sample_dir(work, fraction) / "sample.json"
    if args.resume and done.is_file():
        return json.loads(done.read_text())
    return build_sample(corpus, work, fraction, args.seed, args.through, args.resume)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(settings.corpus_dir()))
    parser.add_argument("--work", default="/tmp/infra_rag_scale")
    parser.add_argument("--fractions", nargs="+", type=float, default=[0.25, 0.5, 1.0])
    parser.add_argument("--through", default="release", help="last stage (as `infra-rag build --through`)")
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--resume", action="store_true", help="reuse samples an earlier run finished in --work")
    parser.add_argument("--out", default=str(ROOT / "eval" / "results" / "scale_benchmark.json"))
    parser.add_argument(
        "--remeasure", metavar="STAGE", help="run STAGE again on each finished sample, its caches moved aside"
    )
    parser.add_argument("--replace", action="store_true", help="the re-measurement replaces the stage's row")
    parser.add_argument("--keep-caches", action="store_true", help="re-measure with the stage's caches in place")
    parser.add_argument("--as", dest="name", default="", help="record the re-measurement under this name")
    args = parser.parse_args()
    work = Path(args.work)
    if args.remeasure:
        args.resume = True
        for fraction in sorted(args.fractions):
            remeasure(work, fraction, args.remeasure, args.replace, args.keep_caches, args.name)
    if args.remeasure:  # the report covers every finished sample, not only those re-measured
        samples = sorted((json.loads(p.read_text()) for p in work.glob("f*/sample.json")), key=lambda s: s["fraction"])
    else:
        samples = [measured_sample(Path(args.corpus), work, f, args) for f in sorted(args.fractions)]
    result = {
        "started_from": "quick build (INFRA_RAG_ADAPT=0), one stage per process",
        "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "samples": samples,
        "fits": fit(samples),
    }
    remeasured = {name for s in samples for name in s.get("remeasured", {})}
    for name in sorted(remeasured):
        if all(name in s.get("remeasured", {}) for s in samples):
            again = [{**s, "stages": {name: s["remeasured"][name]}} for s in samples]
            result.setdefault("fits_remeasured", {}).update(fit(again))
    out = Path(args.out)
    out.write_text(json.dumps(result, indent=2))
    write_plot(result, out.with_suffix(".svg"))
    print(table(result))


if __name__ == "__main__":
    main()
