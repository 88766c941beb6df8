"""How much of each eval question's reference answer is on its relevant page *in this corpus
snapshot*, and the serving scores split by that.

Why: the benchmark's reference answers were written against newer Kubernetes docs than the
2023-11 snapshot in ../shared/corpus; a question whose answer is not on its page here cannot be
ranked first by any retriever except by luck. This script measures that ceiling instead of
guessing it: answer coverage = share of the reference answer's distinct content terms
(``analysis.prose_terms``: stemmed, stop words removed — as ``answer_support``) found anywhere
on the relevant page's indexed text (title + all chunks). It reads the eval split only, never
the held-out test split, and changes no score: it is a diagnostic slice of an existing eval_run.

    INFRA_RAG_HOME=/tmp/rh python -m eval.answer_coverage --version V [--regime serving]
"""

from __future__ import annotations

import argparse
import json

from infra_rag_assets.rag.evaluate.benchmarks import load_benchmark
from infra_rag_assets.rag.index.analysis import prose_terms
from infra_rag_assets.rag.operate.home import DataHome

BANDS = ((0.0, 0.5, "< 0.5"), (0.5, 0.75, "0.5-0.75"), (0.75, 1.01, ">= 0.75"))


def page_terms(home: DataHome, version: str) -> dict[str, set[str]]:
    texts: dict[str, list[str]] = {}
    rows = home.warehouse().chunks_of(version, ("doc_id", "title", "text"), order_by=("doc_id", "ordinal"))
    for doc_id, title, text in rows.iter_rows():
        texts.setdefault(doc_id, [title]).append(text)
    return {doc: set(prose_terms("\n".join(parts))) for doc, parts in texts.items()}


def coverage_of(answer: str, relevant: list[str], terms: dict[str, set[str]]) -> float:
    wanted = set(prose_terms(answer))
    if not wanted:
        return 0.0
    return max((len(wanted & terms.get(doc, set())) / len(wanted) for doc in relevant), default=0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", required=True)
    ap.add_argument("--regime", default="serving")
    args = ap.parse_args()
    home = DataHome.at()
    terms = page_terms(home, args.version)
    answers = {r.id: r.reference_answer for r in load_benchmark("k8s_bench_eval").records}
    rows = home.warehouse().largest_run_ranks(args.version, args.regime, "k8s_bench_eval")
    if not rows:
        raise SystemExit(f"no eval_results for {args.version} / {args.regime}: materialize its eval_run")
    out = {"version": args.version, "regime": args.regime, "n": len(rows), "bands": {}}
    for lo, hi, label in BANDS:
        band = [(rank) for qid, rel, rank in rows if lo <= coverage_of(answers[qid], list(rel), terms) < hi]
        if band:
            out["bands"][label] = {
                "n": len(band),
                "mrr@10": round(sum(1 / r for r in band if r and r <= 10) / len(band), 4),
                "hit@5": round(sum(1 for r in band if r and r <= 5) / len(band), 4),
            }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
