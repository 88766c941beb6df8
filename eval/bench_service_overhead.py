"""What the service's conventions cost: one /metrics scrape at 10,000 recorded requests, and
search p95 at concurrency 16 with metrics + an API key against the service without them.

    python -m eval.bench_service_overhead --home H --baseline-commit d9c7303

The scrape is timed in multiprocess mode as `infra-rag serve` runs it (two recording processes'
files, the scrape in a third) and in single-process mode. The latency comparison starts both
servers in the same run: the baseline from ``git archive <commit>`` (the code before /v1,
metrics, keys and the header bounds), the current tree with ``--api-key-file``; rounds of
POST /search alternate between them so drift on shared cores hits both. Loopback only; every
loop is bounded by its request count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

from eval.bench_serving import questions, stop, workload
from eval.loadgen import run_load
from infra_rag_assets import settings

ROOT = Path(__file__).resolve().parents[1]
# (route, method, status, share of the recorded requests)
TRAFFIC = [
    ("/v1/search", "POST", 200, 70),
    ("/v1/answer", "POST", 200, 10),
    ("/v1/search", "POST", 422, 5),
    ("/v1/search", "POST", 503, 5),
    ("/v1/health", "GET", 200, 5),
    ("/nothing", "GET", 404, 5),
]


def record(metrics, count: int) -> float:
    """Send ``count`` requests through RecordMetrics over a no-op app; returns µs per request."""
    from infra_rag_assets.service.metrics import RecordMetrics

    metrics.switched(None, "bench-version")
    state = SimpleNamespace(sink=SimpleNamespace(queued=lambda: 0))
    statuses = {}

    async def app(scope, _receive, send):
        await send({"type": "http.response.start", "status": statuses[scope["path"], scope["method"]]})
        await send({"type": "http.response.body", "body": b""})

    routes = frozenset(r for r, *_ in TRAFFIC if r != "/nothing")
    middleware = RecordMetrics(app, metrics, state, routes)

    async def noop(_message):
        return None

    async def run() -> float:
        plan = [t for t in TRAFFIC for _ in range(t[3])]
        started = time.perf_counter()
        for i in range(count):
            route, method, status, _ = plan[i % len(plan)]
            statuses[route, method] = status
            await middleware({"type": "http", "path": route, "method": method}, None, noop)
        return (time.perf_counter() - started) / count * 1e6

    return asyncio.run(run())


def scrape_ms(metrics, repeat: int = 200) -> dict:
    metrics.scrape()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        body = metrics.scrape()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"median_ms": round(statistics.median(times), 3), "p95_ms": round(times[int(0.95 * len(times))], 3),
            "bytes": len(body)}  # fmt: skip


def scrape_cost(total: int) -> dict:
    """Multiprocess: two processes record total/2 each into one directory, a third scrapes."""
    directory = tempfile.mkdtemp(prefix="bench-metrics-")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": directory}
    me = [sys.executable, "-m", "eval.bench_service_overhead"]
    per_request = [json.loads(_child(me + ["--record", str(total // 2)], env))["us_per_request"] for _ in range(2)]
    multi = json.loads(_child(me + ["--scrape"], env))
    single_env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    single = json.loads(_child(me + ["--record", str(total), "--scrape"], single_env))
    return {"requests": total, "multiprocess": {**multi, "record_us_per_request": per_request},
            "single_process": single}  # fmt: skip


def _child(command: list[str], env: dict) -> str:
    return subprocess.run(command, env=env, cwd=ROOT, check=True, capture_output=True, text=True).stdout


def start(source: Path, home: str, port: int, extra: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "INFRA_RAG_HOME": home, "PYTHONPATH": str(source)}
    env.pop("ANTHROPIC_API_KEY", None)
    command = [sys.executable, "-m", "infra_rag_assets", "serve", "--port", str(port), *extra]
    proc = subprocess.Popen(command, env=env, cwd=source, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5).read()
            return proc
        except OSError:
            time.sleep(0.5)
    sys.exit("server did not come up in 300 s")


def latency(args, qs: list[str]) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    baseline = tmp / "baseline"
    baseline.mkdir()
    archive = subprocess.run(["git", "archive", args.baseline_commit], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive.stdout, check=True)
    keys = tmp / "keys"
    keys.write_text("bench-key\n")
    servers = {
        "before": (start(baseline, args.home, args.port, [], tmp / "before.log"), {}, "/search"),
        "after": (start(ROOT, args.home, args.port + 1, ["--api-key-file", str(keys)], tmp / "after.log"),
                  {"authorization": "Bearer bench-key"}, "/v1/search"),
    }  # fmt: skip
    latencies: dict[str, list[float]] = {name: [] for name in servers}
    rounds: dict[str, list] = {name: [] for name in servers}
    try:
        for name, (_, headers, path) in servers.items():  # warm both
            run_load(_url(args, name), _on(path, workload(qs, 20, 0)), 2, headers=headers)
        for r in range(args.rounds):
            for name, (_, headers, path) in servers.items():
                result = run_load(_url(args, name), _on(path, workload(qs, args.requests, 0, r * 31)), 16,
                                  headers=headers)  # fmt: skip
                latencies[name] += [x.latency_ms for x in result.replies if x.status == 200]
                rounds[name].append(result.summary())
                print(name, json.dumps(result.summary()), flush=True)
    finally:
        for proc, _, _ in servers.values():
            stop(proc)
    report = {name: {"ok": len(v), "p50_ms": _pct(v, 0.5), "p95_ms": _pct(v, 0.95),
                     "round_p95_ms": [s["p95_ms"] for s in rounds[name]]} for name, v in latencies.items()}  # fmt: skip
    report["p95_change_pct"] = round((report["after"]["p95_ms"] / report["before"]["p95_ms"] - 1) * 100, 1)
    return {"baseline_commit": args.baseline_commit, "concurrency": 16, "rounds": args.rounds,
            "requests_per_round": args.requests, **report}  # fmt: skip


def _url(args, name: str) -> str:
    return f"http://127.0.0.1:{args.port + (name == 'after')}"


def _on(path: str, work: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    return [(path, body) for _, body in work]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=settings.home())
    parser.add_argument("--baseline-commit", default="d9c7303")
    parser.add_argument("--port", type=int, default=8775)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=200, help="POST /search per round and server")
    parser.add_argument("--scrape-requests", type=int, default=10_000)
    parser.add_argument("--record", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--scrape", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(ROOT / "eval" / "results" / "service_overhead.json"))
    args = parser.parse_args()
    if args.record or args.scrape:  # a child of scrape_cost
        from infra_rag_assets.service.metrics import ServiceMetrics

        metrics = ServiceMetrics()
        result = {"us_per_request": round(record(metrics, args.record), 2)} if args.record else {}
        print(json.dumps({**result, **(scrape_ms(metrics) if args.scrape else {})}))
        return
    args.home = str(Path(args.home).resolve())
    report = {"cpus": os.cpu_count(), "scrape": scrape_cost(args.scrape_requests)}
    print(json.dumps(report["scrape"]), flush=True)
    report["latency"] = latency(args, questions())
    print(json.dumps(report["latency"]), flush=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
