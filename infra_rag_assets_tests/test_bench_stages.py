"""eval.bench_stages runs where only torch, transformers, sentence-transformers and numpy are:
the GPU machine that runs it has no Dagster, DuckDB, LanceDB, polars or Tantivy."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from infra_rag_assets.rag.index.embedding import Embedder

pytestmark = pytest.mark.build

ROOT = Path(__file__).resolve().parents[1]
# Runs the benchmark with the packages the GPU machine lacks made unimportable.
BLOCKED_RUN = """
import importlib.machinery
import sys
BLOCKED = {"dagster", "duckdb", "polars", "lancedb", "tantivy", "pyarrow"}
class Blocker:  # finds the blocked packages with a loader that refuses to import them
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            return importlib.machinery.ModuleSpec(name, self)
    def create_module(self, spec):
        raise ImportError(f"{spec.name} is not installed on the GPU machine")
    def exec_module(self, module):
        pass
sys.meta_path.insert(0, Blocker())
sys.argv = ["bench_stages", *sys.argv[1:]]
from eval import bench_stages
bench_stages.main()
"""


def _inputs(folder: Path) -> None:
    texts = [
        f"Prometheus › Storage\nBlock {i} of the TSDB keeps two hours of samples for series {i}." for i in range(24)
    ]
    triplets = [
        {"question": f"how long does block {i} keep samples", "positive": texts[i], "negative": texts[(i + 7) % 24]}
        for i in range(12)
    ]
    folder.mkdir()
    for name, rows in (("chunks", [{"text": t} for t in texts]), ("triplets", triplets)):
        with gzip.open(folder / f"{name}.jsonl.gz", "wt") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    cpu = Embedder(device="cpu")
    np.savez_compressed(
        folder / "reference.npz",
        chunks=cpu.encode(texts[:10]),
        questions=cpu.encode([t["question"] for t in triplets[:6]]),
        positives=cpu.encode([t["positive"] for t in triplets[:6]]),
    )
    manifest = {
        "index_version": "fixture",
        "chunks": len(texts),
        "triplets": len(triplets),
        "made": "now",
        "adapt_recipe": {"batch_size": 4, "max_seq_length": 32, "lr": 2e-5, "seed": 0},
        "judge_recipe": {"max_seq_length": 64, "layers": 1, "batch_size": 4},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_the_stage_bench_runs_without_the_platform_packages(tmp_path):
    _inputs(tmp_path / "inputs")
    out = tmp_path / "bench.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    args = ["--inputs", str(tmp_path / "inputs"), "--device", "cpu", "--pairs", "8", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert (report["device"], report["precision"]) == ("cpu", "fp32")
    assert report["torch_version"] and report["threads"] >= 1 and len(report["load_average_start"]) == 3
    assert report["embed"]["chunks"] == 24 and report["embed"]["chunks_per_s"] > 0
    assert report["finetune"]["triplets"] == 12 and report["finetune"]["triplets_per_s"] > 0
    assert report["pairs"]["pairs"] == 8 and report["pairs"]["pairs_per_s"] > 0
    same = report["embed"]["vs_cpu_reference"]
    assert same["texts"] == 22 and same["cosine_min"] > 0.9999  # the CPU against itself
    assert same["mrr_at_10_cpu_vectors"] == same["mrr_at_10_this_device"]
