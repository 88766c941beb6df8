"""Time ``infra-rag judge --batch``'s scoring: 100 hand-labelled answers (their passages, ~1,500
characters and more each) judged by a trained judge folder, model load timed apart.

    python -m eval.judge_speed JUDGE_DIR [--answers 100] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from infra_rag_assets.package_data import benchmarks_dir
from infra_rag_assets.rag.judge.batch import Item, judge_items
from infra_rag_assets.rag.judge.support_judge import SupportJudge


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("judge")
    ap.add_argument("--answers", type=int, default=100)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    rows = [json.loads(line) for line in (benchmarks_dir() / "answer_labels.jsonl").read_text().splitlines() if line]
    items = [
        Item(
            str(r["id"]), r["question"], tuple((str(i), p["text"]) for i, p in enumerate(r["passages"], 1)), r["answer"]
        )
        for r in rows[: args.answers]
    ]
    started = time.perf_counter()
    judge = SupportJudge.load(args.judge, args.device)
    loaded = time.perf_counter()
    results = judge_items(judge, items)
    done = time.perf_counter()
    chars = [sum(len(t) for _, t in i.passages) for i in items]
    print(json.dumps({
        "answers": len(items), "mean_passage_chars": round(sum(chars) / len(chars)),
        "seconds_load": round(loaded - started, 1), "seconds_scoring": round(done - loaded, 1),
        "adherent": sum(bool(r.get("adherent")) for r in results), "torch_threads": torch.get_num_threads(),
        "load_average": os.getloadavg(), "device": args.device,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
