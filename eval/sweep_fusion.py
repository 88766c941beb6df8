"""Offline fusion sweep: query every searcher once per question, then score many fusion
settings in seconds with the library's own fusion functions.

Why: one setting through eval_run costs minutes (every regime re-embeds every question); here
the dense, lexical and page-index candidate lists are cached once (deeper than any setting
uses) and each setting is replayed with ``hybrid_page_scores`` + ``cap_per_page`` — the
functions serving runs — so a winner found here is then confirmed by a real eval_run
(README "Tuning log"). Eval split and our own set only; the held-out test split is
never read.

    pip install -e '.[bench]'   # its default question sets come from bench_peers.py (imports bm25s);
                                # eval.train_ranker passes its own sets and needs neither
    INFRA_RAG_HOME=/tmp/rh python -m eval.sweep_fusion --version V [--cache F] [--grid small|full]
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
from pathlib import Path

from infra_rag_assets.rag.evaluate.metrics import rank_of_first_relevant, reciprocal_rank
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.engine import QueryEngine
from infra_rag_assets.rag.search.fusion import FusionSettings, cap_per_page, hybrid_page_scores
from infra_rag_assets.rag.search.ranking.training import CACHE_DEPTH, candidate_lists

DEPTH = CACHE_DEPTH  # cached per side; settings use <= this
GRIDS = {
    "small": {
        "alpha": [0.3],
        "page_weight": [0.0, 0.3, 0.5, 0.7],
        "page_dense_weight": [0.0, 0.1],
        "max_per_page": [0, 2],
        "depth": [50],
    },
    "full": {
        "alpha": [0.2, 0.3, 0.4],
        "page_weight": [0.0, 0.3, 0.5, 0.7, 1.0],
        "page_dense_weight": [0.0, 0.1, 0.2, 0.3],
        "max_per_page": [0, 1, 2, 3],
        "depth": [30, 50, 100],
    },
}


def collect(home: DataHome, version: str, sets: dict[str, list] | None = None) -> dict:
    """Per question set (default: the peers benchmark's sets): relevant pages and the three
    candidate lists, from the same searchers and boosts serving's ``hybrid-page`` uses."""
    engine = QueryEngine(home, version)
    if sets is None:
        from eval.bench_peers import load_questions  # needs bm25s

        sets, _skipped = load_questions(home, version, None)
    out = {"version": version, "doc_of": {c: row["doc_id"] for c, row in engine.catalog.items()}, "sets": {}}
    try:
        for name, records in sets.items():
            out["sets"][name] = candidate_lists(engine, records, depth=DEPTH)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    return out


def score(data: dict, setting: dict) -> dict[str, dict]:
    page_of = data["doc_of"].get
    depth = setting["depth"]
    results: dict[str, dict] = {}
    fusion = FusionSettings(setting["alpha"], setting["page_weight"], setting["page_dense_weight"])
    for name, questions in data["sets"].items():
        rr, hit5 = [], []
        for q in questions:
            fused = hybrid_page_scores(q["dense"][:depth], q["lexical"][:depth], q["pages"], page_of, fusion)
            ranked = cap_per_page([c for c, _ in fused], page_of, setting["max_per_page"])[:10]
            rank = rank_of_first_relevant([page_of(c) for c in ranked], set(q["relevant"]))
            rr.append(reciprocal_rank(rank, 10))
            hit5.append(rank is not None and rank <= 5)
        results[name] = {"mrr@10": round(sum(rr) / len(rr), 4), "hit@5": round(sum(hit5) / len(hit5), 4), "n": len(rr)}
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", required=True)
    ap.add_argument("--cache", type=Path, help="pickle of the candidate lists (written if missing)")
    ap.add_argument("--grid", choices=sorted(GRIDS), default="small")
    args = ap.parse_args()
    if args.cache and args.cache.exists():
        data = pickle.loads(args.cache.read_bytes())
    else:
        data = collect(DataHome.at(), args.version)
        if args.cache:
            args.cache.write_bytes(pickle.dumps(data))
    grid = GRIDS[args.grid]
    rows = []
    for values in itertools.product(*grid.values()):
        setting = dict(zip(grid, values))
        rows.append(
            {**setting, **{f"{s}.{m}": v for s, r in score(data, setting).items() for m, v in r.items() if m != "n"}}
        )
    rows.sort(key=lambda r: -r["k8s_eval.mrr@10"])
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
