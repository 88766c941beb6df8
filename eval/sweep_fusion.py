"""Offline fusion sweep: cache each question's full dense scores and deep lexical list once,
then score many fusion formulas in seconds (no re-querying per formula).

Why: a formula change needs ~10 min through eval_run; here each costs ~1 s, so many can be
compared before the winner is implemented in ``rag.retrieval`` and confirmed by a real
eval_run. Eval split and our own set only (the held-out test split is never read).

    INFRA_RAG_HOME=/tmp/rh python eval/sweep_fusion.py cache --version V --out /tmp/rh/sweep.npz
    python eval/sweep_fusion.py sweep --cache /tmp/rh/sweep.npz
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sys
from pathlib import Path

import lancedb
import numpy as np

from infra_rag_assets.rag.benchmarks import coverage, load_benchmark
from infra_rag_assets.rag.bm25 import BM25
from infra_rag_assets.rag.engine import QueryEngine
from infra_rag_assets.rag.home import DataHome
from infra_rag_assets.rag.metrics import ndcg_at, rank_of_first_relevant
from infra_rag_assets.rag.retrieval import TUNED_BOOSTS
from infra_rag_assets.rag.vector_store import table_name

ROOT = Path(__file__).resolve().parents[1]
LEX_DEPTH = 300


def cache(home: DataHome, version: str, out: Path) -> None:
    engine = QueryEngine(home, version)
    vector, lexical = engine._searchers("hybrid")
    table = lancedb.connect(home.vectors_uri()).open_table(table_name(version)).to_arrow()
    ids = table["chunk_id"].to_pylist()
    mat = np.stack(table["vector"].to_numpy(zero_copy_only=False)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    rows = {c: engine.catalog[c] for c in ids}
    doc_of = [rows[c]["doc_id"] for c in ids]
    pages = sorted(set(doc_of))
    page_text = {p: [] for p in pages}
    for c in ids:
        r = rows[c]
        page_text[r["doc_id"]].append(r["text"])
    page_titles = {rows[c]["doc_id"]: rows[c]["title"] for c in ids}
    docs = {d for (d,) in home.warehouse().rows("SELECT doc_id FROM documents WHERE index_version = ?", [version])}
    sets = {}
    covered, _ = coverage(load_benchmark("k8s_bench_eval", ROOT).records, docs)
    sets["k8s_eval"] = covered
    sets["own"] = [r for r in load_benchmark("own_labelled", ROOT).records if r.relevant]
    boosts = dict(TUNED_BOOSTS)
    data = {"ids": ids, "doc_of": doc_of, "pages": pages, "page_text": page_text, "page_titles": page_titles,
            "sets": {}}
    for name, records in sets.items():
        qv = engine.embedder.encode([r.question for r in records])
        qv = np.asarray(qv, dtype=np.float32)
        qv /= np.linalg.norm(qv, axis=1, keepdims=True)
        dense = qv @ mat.T
        lex = [lexical.search(r.question, LEX_DEPTH, boosts=boosts) for r in records]
        data["sets"][name] = {"questions": [r.question for r in records],
                              "relevant": [list(r.relevant) for r in records],
                              "dense": dense.astype(np.float16), "lexical": lex}
        print(name, len(records), file=sys.stderr)
    out.write_bytes(pickle.dumps(data))


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cache")
    c.add_argument("--version", required=True)
    c.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.cmd == "cache":
        cache(DataHome.at(), args.version, args.out)


if __name__ == "__main__":
    main()
