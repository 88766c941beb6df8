"""Build benchmark (issue: chunks/vectors/lexical): cold build, unchanged rebuild, 1 % edit.

Runs `infra-rag build --through indexes` three times in a fresh data home over a private copy
of the corpus:
1. cold: every chunk embedded (reports chunks/s and peak RSS);
2. unchanged corpus: must re-embed 0 chunks and take <= 10 % of the cold build's time;
3. after appending a paragraph to 1 % of the pages: only those pages' chunks re-embedded.
Writes eval/results/build_benchmark.json and prints a Markdown table for the README.

``--main-job`` times the whole default `infra-rag build` instead (domain model, indexes,
calibration, ranker, eval_run, release), cold and unchanged, with each stage's wall time, into
eval/results/main_job_benchmark.json (the 1 % edit retrains the model: not run).

    python -m eval.bench_build [--corpus ../shared/corpus] [--work /tmp/infra_rag_bench] [--main-job]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg

from infra_rag_assets import settings

ROOT = Path(__file__).resolve().parents[1]


def run_build(env: dict, through: str = "indexes") -> tuple[str, float, int]:
    """One `infra-rag build`; returns (version, wall seconds, peak RSS in MiB of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "infra_rag_assets", "build", "--through", through],
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"build failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr else proc.returncode}")
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) // 1024
    return proc.stdout.strip().splitlines()[-1], seconds, peak


def vectors_metadata(dagster_home: Path, version: str) -> dict:
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    with dg.DagsterInstance.get() as instance:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("vectors"), asset_partitions=[version]), limit=1
        ).records
        meta = records[0].asset_materialization.metadata
        return {k: getattr(v, "value", v) for k, v in meta.items()}


def stage_seconds(dagster_home: Path, version: str) -> dict[str, float]:
    """Wall seconds of each step of the version's runs (from Dagster's step stats)."""
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    out: dict[str, float] = {}
    with dg.DagsterInstance.get() as instance:
        for run in instance.get_runs(dg.RunsFilter(tags={"dagster/partition": version})):
            for stat in instance.get_run_step_stats(run.run_id):
                if stat.start_time and stat.end_time:
                    out[stat.step_key] = round(out.get(stat.step_key, 0.0) + stat.end_time - stat.start_time, 1)
    return out


def chunks_of(home: Path, version: str, rel_paths: list[str]) -> int:
    """How many chunks the edited pages have in ``version`` (the most an edit may re-embed)."""
    if not rel_paths:
        return 0
    from infra_rag_assets.rag.ingest.sources import page_id_for
    from infra_rag_assets.rag.operate.warehouse import Warehouse

    doc_ids = [f"{p.split('/', 1)[0]}:{page_id_for(p.split('/', 1)[1])}" for p in rel_paths]
    return Warehouse(home / "warehouse.duckdb").chunk_count(version, doc_ids)


def edit_pages(corpus: Path, share: float, seed: int = 7) -> list[str]:
    pages = sorted((corpus / "kubernetes").rglob("*.md")) + sorted((corpus / "argocd").rglob("*.md"))
    chosen = random.Random(seed).sample(pages, max(1, round(len(pages) * share)))
    for page in chosen:
        page.write_text(
            page.read_text() + "\n\nBenchmark edit: this paragraph was appended to test "
            "incremental re-embedding of changed pages only.\n"
        )
    return [str(p.relative_to(corpus)) for p in chosen]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(settings.corpus_dir()))
    parser.add_argument("--work", default="/tmp/infra_rag_bench")
    parser.add_argument("--main-job", action="store_true", help="time the whole default build, cold + unchanged")
    parser.add_argument(
        "--warm-home",
        default="",
        help="skip the cold build: reuse this data home's cache (measures the unchanged and 1%% edit builds only)",
    )
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    corpus = work / "corpus"
    shutil.copytree(args.corpus, corpus)
    for path in corpus.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    home = Path(args.warm_home) if args.warm_home else work / "home"
    env = {
        **os.environ,
        "INFRA_RAG_HOME": str(home),
        "INFRA_RAG_CORPUS": str(corpus),
        "DAGSTER_HOME": str(work / "dagster"),
    }
    (work / "dagster").mkdir(parents=True)
    results = {}
    labels = ("unchanged", "edit_1pct") if args.warm_home else ("cold", "unchanged", "edit_1pct")
    for label in [lb for lb in labels if not (args.main_job and lb == "edit_1pct")]:
        edited = edit_pages(corpus, 0.01) if label == "edit_1pct" else []
        version, seconds, peak = run_build(env, "release" if args.main_job else "indexes")
        meta = vectors_metadata(work / "dagster", version)
        results[label] = {
            "version": version,
            "seconds": round(seconds, 1),
            "peak_rss_mib": peak,
            "chunks": meta["dagster/row_count"],
            "texts_embedded": meta["texts_embedded"],
            "cache_hit_rate": meta["cache_hit_rate"],
            "seconds_embedding": meta["seconds_embedding"],
            "chunks_per_second": meta["chunks_per_second"],
            "edited_pages": len(edited),
            "chunks_of_edited_pages": chunks_of(home, version, edited),
        }
        if args.main_job:
            results[label]["stage_seconds"] = stage_seconds(work / "dagster", version)
        print(label, results[label], flush=True)
    if "cold" in results:
        cold_s = results["cold"]["seconds"]
        results["unchanged"]["share_of_cold_time"] = round(results["unchanged"]["seconds"] / cold_s, 3)
    out = ROOT / "eval" / "results" / ("main_job_benchmark.json" if args.main_job else "build_benchmark.json")
    out.write_text(json.dumps(results, indent=2))
    print("\n| build | wall s | chunks | embedded | cache hit | chunks/s | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for label, r in results.items():
        print(
            f"| {label} | {r['seconds']} | {r['chunks']} | {r['texts_embedded']} | {r['cache_hit_rate']} "
            f"| {r['chunks_per_second']} | {r['peak_rss_mib']} |"
        )


if __name__ == "__main__":
    main()
