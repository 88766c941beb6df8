"""Chunk-size experiment on the eval split, lexical side (cheap: no re-embedding).

Re-chunks the documents of a built version at several token budgets, builds a Tantivy index
for each in a temp dir, and scores page-level MRR@10 / hit@5 on the covered k8s eval
questions and our own labelled set. Dense scores need a full re-embed per size (~15 min each
on 2 cores) and are reported separately when run with --dense.

    INFRA_RAG_HOME=... python -m eval.tune_chunks [--version V] [--sizes 128,192,256]

Writes eval/results/chunk_sizes_lexical.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from infra_rag_assets.rag.evaluate.benchmarks import coverage, load_benchmark
from infra_rag_assets.rag.evaluate.metrics import rank_of_first_relevant, reciprocal_rank
from infra_rag_assets.rag.index.config import ChunkSettings
from infra_rag_assets.rag.index.corpus_chunks import chunk_documents
from infra_rag_assets.rag.index.embedding import DEFAULT_MODEL, resolve_model_path
from infra_rag_assets.rag.index.lexical_store import LexicalDoc, LexicalSearcher, build_index
from infra_rag_assets.rag.index.tokens import HFTokenCounter
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.engine import resolve_version

ROOT = Path(__file__).resolve().parents[1]


def score(searcher: LexicalSearcher, doc_of: dict, records) -> dict:
    rr, h5 = [], []
    for record in records:
        ranked = [doc_of[c] for c, _ in searcher.search(record.question, 10)]
        rank = rank_of_first_relevant(ranked, set(record.relevant))
        rr.append(reciprocal_rank(rank, 10))
        h5.append(rank is not None and rank <= 5)
    return {"mrr@10": round(float(np.mean(rr)), 4), "hit@5": round(float(np.mean(h5)), 4), "n": len(rr)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version")
    parser.add_argument("--sizes", default="128,192,256")
    parser.add_argument("--context", choices=["on", "off", "both"], default="on")
    args = parser.parse_args()
    home = DataHome.at()
    version = resolve_version(home, args.version)
    docs = home.warehouse().documents_of(version).to_dicts()
    known = {d["doc_id"] for d in docs}
    k8s = coverage(load_benchmark("k8s_bench_eval").records, known)[0]
    own = [r for r in load_benchmark("own_labelled").records if r.relevant]
    counter = HFTokenCounter.from_model_path(resolve_model_path(DEFAULT_MODEL))
    results = []
    contexts = {"on": [True], "off": [False], "both": [True, False]}[args.context]
    for size in map(int, args.sizes.split(",")):
        for context in contexts:
            started = time.perf_counter()
            frame = chunk_documents(
                docs, counter, ChunkSettings(target_tokens=size, max_tokens=size, context_line=context)
            )
            with tempfile.TemporaryDirectory() as tmp:
                target = Path(tmp) / "idx"
                build_index(
                    target,
                    (
                        LexicalDoc(
                            r["chunk_id"],
                            r["doc_id"],
                            r["project"],
                            r["source"],
                            r["page_kind"],
                            r["section_path"],
                            r["title"] if context else "",
                            r["text"],
                            list(r["pages"]),
                        )
                        for r in frame.iter_rows(named=True)
                    ),
                )
                searcher = LexicalSearcher.open(target)
                doc_of = dict(zip(frame["chunk_id"], frame["doc_id"]))
                row = {
                    "max_tokens": size,
                    "context_line": context,
                    "chunks": len(frame),
                    "k8s": score(searcher, doc_of, k8s),
                    "own": score(searcher, doc_of, own),
                    "seconds": round(time.perf_counter() - started, 1),
                }
            print(json.dumps(row), flush=True)
            results.append(row)
    out = ROOT / "eval" / "results" / "chunk_sizes_lexical.json"
    out.write_text(json.dumps({"version": version, "results": results}, indent=2))


if __name__ == "__main__":
    main()
