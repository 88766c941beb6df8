"""Serving benchmark: `infra-rag serve` under a bounded loopback load, on a built data home.

For each worker count, starts the real server (uvicorn processes), then for each concurrency
level sends a fixed number of requests (POST /search, with a share of offline POST /answer)
and records throughput, p50/p95 latency, errors by status and RSS per worker. The acceptance
run adds a CLI batch searching the same home during the load.

    python -m eval.bench_serving --home /path/to/home                      # the README table
    python -m eval.bench_serving --home H --acceptance                      # 400 + 40 at c=16 beside a batch

Loopback only; every loop is bounded by its request count and a per-request timeout. The run's
section (``sweep`` or ``acceptance``) and header replace those in eval/results/serving.json; the
other section stays.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from eval.loadgen import run_load
from infra_rag_assets import settings
from infra_rag_assets.package_data import benchmarks_dir

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = benchmarks_dir()


def questions(limit: int = 500) -> list[str]:
    """Real questions: our own labelled set plus the k8s eval split (never the held-out test split)."""
    found: list[str] = []
    own = QUESTIONS / "own_labelled.jsonl"
    bench = settings.bench_dir() / "k8s-docs-rag-bench"
    for path in (own, bench / "qa_eval.jsonl"):
        if path.is_file():
            found += [json.loads(line)["question"] for line in path.read_text().splitlines() if line.strip()]
    if not found:
        sys.exit("no question files found (the packaged own_labelled.jsonl, INFRA_RAG_BENCH)")
    return found[:limit]


def workload(qs: list[str], searches: int, answers: int, offset: int = 0) -> list[tuple[str, dict]]:
    work = [("/search", {"question": qs[(offset + i) % len(qs)], "k": 10}) for i in range(searches)]
    step = max(1, len(work) // max(answers, 1))
    for i in range(answers):
        work.insert(i * step + i, ("/answer", {"question": qs[(offset + 7 * i) % len(qs)], "offline": True}))
    return work


def start_server(
    home: str, port: int, workers: int, max_inflight: int, log: Path, checkout: Path | None = None
) -> subprocess.Popen:
    """`infra-rag serve` on ``home``, once it answers; ``checkout``: serve that checkout's code."""
    env = {**os.environ, "INFRA_RAG_HOME": home}
    env.pop("ANTHROPIC_API_KEY", None)
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "infra_rag_assets",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--max-inflight",
            str(max_inflight),
        ],
        env=env,
        cwd=checkout,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).read()
            return proc
        except urllib.error.HTTPError:
            return proc  # 503: up, not healthy (e.g. no release); still serves the newest build
        except OSError:
            time.sleep(0.5)
    sys.exit("server did not come up in 300 s")


def worker_rss_mb(proc: subprocess.Popen) -> list[float]:
    """RSS of the serving processes: the workers, or the single process when --workers 1."""
    import psutil

    parent = psutil.Process(proc.pid)
    # Workers hold the model (hundreds of MB); uvicorn's supervisor and helpers are small.
    serving = [c for c in parent.children(recursive=True) if c.memory_info().rss > 200e6] or [parent]
    return [round(p.memory_info().rss / 1e6) for p in serving]


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)


def sweep(args, qs: list[str]) -> list[dict]:
    rows = []
    for workers in args.workers:
        log = Path(tempfile.mkdtemp()) / "server.log"
        proc = start_server(args.home, args.port, workers, args.max_inflight, log)
        try:
            run_load(f"http://127.0.0.1:{args.port}", workload(qs, 20, 0), 2)  # warm every worker
            for concurrency in args.concurrency:
                result = run_load(
                    f"http://127.0.0.1:{args.port}",
                    workload(qs, args.requests, args.requests // 10, offset=concurrency),
                    concurrency,
                )
                row = {"workers": workers, **result.summary(), "rss_mb_per_worker": worker_rss_mb(proc)}
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            stop(proc)
    return rows


def acceptance(args, qs: list[str]) -> dict:
    """400 /search + 40 offline /answer at concurrency 16, beside a CLI batch on the same home."""
    tmp = Path(tempfile.mkdtemp())
    batch = tmp / "batch.jsonl"
    batch.write_text("".join(json.dumps({"id": i, "question": q}) + "\n" for i, q in enumerate(qs[:200])))
    proc = start_server(args.home, args.port, args.workers[0], args.max_inflight, tmp / "server.log")
    try:
        cli = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "infra_rag_assets",
                "--home",
                args.home,
                "search",
                "--batch",
                str(batch),
                "--k",
                "10",
                "-o",
                str(tmp / "out.jsonl"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        result = run_load(f"http://127.0.0.1:{args.port}", workload(qs, 400, 40), 16)
        cli_code = cli.wait(timeout=900)
        rss = worker_rss_mb(proc)
    finally:
        stop(proc)
    summary = {
        **result.summary(),
        "workers": args.workers[0],
        "rss_mb_per_worker": rss,
        "cli_batch_exit": cli_code,
        "cli_batch_lines": len((tmp / "out.jsonl").read_text().splitlines()) if cli_code == 0 else 0,
        "searches": sum(r.path == "/search" for r in result.replies),
        "answers": sum(r.path == "/answer" for r in result.replies),
    }
    print(json.dumps(summary), flush=True)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=settings.home())
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--requests", type=int, default=300, help="POST /search per level (+10%% /answer)")
    parser.add_argument("--max-inflight", type=int, default=32)
    parser.add_argument("--acceptance", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "eval" / "results" / "serving.json"))
    args = parser.parse_args()
    args.home = str(Path(args.home).resolve())
    qs = questions()
    report = {"home": args.home, "cpus": os.cpu_count(), "max_inflight": args.max_inflight}
    if args.acceptance:
        report["acceptance"] = acceptance(args, qs)
    else:
        report["sweep"] = sweep(args, qs)
    out = Path(args.out)
    previous = json.loads(out.read_text()) if out.is_file() else {}
    out.write_text(json.dumps({**previous, **report}, indent=1) + "\n")


if __name__ == "__main__":
    main()
