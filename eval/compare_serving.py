"""Service throughput of several checkouts on one data home, in one session: `infra-rag serve
--workers W` of each checkout in turn (its own code on PYTHONPATH), the same loopback load.

Loads, each at ``--concurrency``: ``search`` (POST /search only), ``mixed`` (bench_serving's
workload: 10 % offline POST /answer, by each checkout's default offline answerer) and, for
checkouts whose /answer takes an ``answerer``, ``mixed-extractive`` (the same answers by the
quoting answerer, so old and new answer alike). Rounds alternate the checkouts, so drift in the
machine's speed falls on both.

    python -m eval.compare_serving --home H --tree 118898b=/tmp/old --tree HEAD=. [--requests 1200]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from eval.bench_serving import questions, start_server, stop, worker_rss_mb, workload
from eval.loadgen import run_load

ROOT = Path(__file__).resolve().parents[1]


def takes_answerer(base_url: str) -> bool:
    """Whether the running server's /answer body has an ``answerer`` field (its OpenAPI schema)."""
    try:
        with urllib.request.urlopen(f"{base_url}/openapi.json", timeout=10) as reply:
            schemas = json.loads(reply.read()).get("components", {}).get("schemas", {})
    except (OSError, ValueError):
        return False
    return any("answerer" in (schema.get("properties") or {}) for schema in schemas.values())


def loads(qs: list[str], requests: int, answerer_field: bool) -> list[tuple[str, list]]:
    mixed = workload(qs, requests, requests // 10, offset=16)
    chosen = [("search", workload(qs, requests, 0, offset=16)), ("mixed", mixed)]
    if answerer_field:
        quoting = [(p, {**b, "answerer": "extractive"}) if p == "/answer" else (p, b) for p, b in mixed]
        chosen.append(("mixed-extractive", quoting))
    return chosen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", required=True)
    ap.add_argument("--tree", action="append", required=True, help="NAME=CHECKOUT (repeat)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--requests", type=int, default=1200, help="POST /search per load (+10%% /answer when mixed)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--max-inflight", type=int, default=32)
    ap.add_argument("--port", type=int, default=8781)
    ap.add_argument("--out", default=str(ROOT / "eval" / "results" / "serving_compare.json"))
    args = ap.parse_args()
    trees = {name: Path(path).resolve() for name, path in (t.split("=", 1) for t in args.tree)}
    qs, rows = questions(), []
    base = f"http://127.0.0.1:{args.port}"
    for round_ in range(args.rounds):
        for name, checkout in trees.items():
            log = Path(tempfile.mkdtemp()) / "server.log"
            proc = start_server(args.home, args.port, args.workers, args.max_inflight, log, checkout)
            try:
                run_load(base, workload(qs, 40, 0), 4)  # warm both workers
                for load, work in loads(qs, args.requests, takes_answerer(base)):
                    summary = run_load(base, work, args.concurrency).summary()
                    row = {"tree": name, "round": round_, "load": load, **summary, "rss_mb": worker_rss_mb(proc),
                           "load_average": round(os.getloadavg()[0], 2)}  # fmt: skip
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            finally:
                stop(proc)
    result = {
        "command": "python -m eval.compare_serving " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "trees": {k: str(v) for k, v in trees.items()},
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
