"""Train the learned ranker (``rag/search/ranking/ranker.py``) on the k8s TRAIN split of one index
version's candidates, and report it beside ``hybrid-page`` on the eval split and our own set.

Candidates are cached once per version (``eval.sweep_fusion.collect``: dense, lexical and page-index
lists at depth 100 from the serving searchers), then features, fit and every ablation replay
in seconds. Train questions fit the ranker; the eval split and own set only report. The
held-out test split of the benchmark is never read.

    INFRA_RAG_HOME=/work/home python -m eval.train_ranker --version V --cache /tmp/cands.pkl \
        [--out ranker.json] [--ablation]
"""

from __future__ import annotations

import argparse
import pickle
import time
from pathlib import Path

import duckdb

from eval.sweep_fusion import collect
from infra_rag_assets.rag.evaluate.benchmarks import TRAIN_BENCHMARK, coverage, load_benchmark
from infra_rag_assets.rag.evaluate.metrics import rank_of_first_relevant, reciprocal_rank
from infra_rag_assets.rag.index.serving_snapshot import read_catalog
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.fusion import cap_per_page, hybrid_page_scores
from infra_rag_assets.rag.search.page_vectors import PageVectors
from infra_rag_assets.rag.search.ranking.features import GROUPS
from infra_rag_assets.rag.search.ranking.ranker import FitSettings, Ranker, fit, rank_chunks
from infra_rag_assets.rag.search.ranking.training import DEPTH, PAGE_DEPTH, labelled_candidates
from infra_rag_assets.rag.search.retrieval_settings import HYBRID_PAGE


def known_doc_ids(home: DataHome, version: str) -> set[str]:
    """The version's page records (as eval_run's coverage), read without a write lock."""
    con = duckdb.connect(str(home.root / "warehouse.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT doc_id FROM documents WHERE index_version = ?", [version]).fetchall()
    finally:
        con.close()
    return {d for (d,) in rows}


def question_sets(home: DataHome, version: str) -> dict[str, list]:
    """train (fit only), k8s_eval (covered, report), own_answerable (report)."""
    known = known_doc_ids(home, version)
    train, _ = coverage(load_benchmark(TRAIN_BENCHMARK).records, known)
    evals, _ = coverage(load_benchmark("k8s_bench_eval").records, known)
    own = [r for r in load_benchmark("own_labelled").records if r.relevant]
    return {"train": [r for r in train if r.relevant], "k8s_eval": evals, "own_answerable": own}


def doc_query_sets(home: DataHome, version: str, per_set: int, seed: int = 1) -> dict[str, list]:
    """Label-free queries (``pairs.doc_pairs``: titles, headings, descriptions, identifiers) of
    every project, minus the ones the version's domain model was trained on (their cosines are
    inflated), project-balanced: ``doc_fit`` to fit with, ``doc_check`` to choose settings on
    without reading the own set."""
    from types import SimpleNamespace

    from infra_rag_assets.rag.adapt.pairs import balanced_sample, doc_pairs
    from infra_rag_assets.rag.adapt.training_set import CHUNK_FIELDS
    from infra_rag_assets.rag.index.config import AdaptRecipe

    con = duckdb.connect(str(home.root / "warehouse.duckdb"), read_only=True)
    try:
        cur = con.execute(f"SELECT {', '.join(CHUNK_FIELDS)} FROM chunks WHERE index_version = ?", [version])
        cols = [d[0] for d in cur.description]
        chunks = [dict(zip(cols, row)) for row in cur.fetchall()]
        descriptions = dict(
            con.execute(
                "SELECT doc_id, description FROM documents WHERE index_version = ? AND description IS NOT NULL",
                [version],
            ).fetchall()
        )
    finally:
        con.close()
    recipe = AdaptRecipe()
    pairs = doc_pairs(chunks, descriptions, seed=recipe.seed)
    trained = {p.query for p in balanced_sample(pairs, recipe.doc_examples, recipe.seed)}
    rest = [p for p in pairs if p.query not in trained]
    picked = balanced_sample(rest, 2 * per_set, seed)
    import random

    random.Random(seed).shuffle(picked)

    def as_record(n, p):
        return SimpleNamespace(
            id=f"doc:{p.project}:{p.kind}:{n}", question=p.query, relevant=[p.doc_id], project=p.project
        )

    records = [as_record(n, p) for n, p in enumerate(picked)]
    return {"doc_fit": records[:per_set], "doc_check": records[per_set:]}


def cached(home: DataHome, version: str, path: Path | None, doc_queries: int = 0) -> dict:
    if path and path.exists():
        data = pickle.loads(path.read_bytes())
        if doc_queries and "doc_fit" not in data["sets"]:
            extra = collect(home, version, doc_query_sets(home, version, doc_queries))
            data["sets"].update(extra["sets"])
            path.write_bytes(pickle.dumps(data))
        return data
    t0 = time.perf_counter()
    sets = question_sets(home, version)
    if doc_queries:
        sets.update(doc_query_sets(home, version, doc_queries))
    data = collect(home, version, sets)
    data["seconds_collect"] = round(time.perf_counter() - t0, 1)
    print(f"cached {sum(len(v) for v in data['sets'].values())} questions in {data['seconds_collect']} s")
    if path:
        path.write_bytes(pickle.dumps(data))
    return data


K = 10  # chunks returned
ABLATION = [
    ("base",),
    ("base", "dense", "lexical", "page"),
    ("base", "dense", "lexical", "page", "agree"),
    ("base", "dense", "lexical", "page", "agree", "intent"),
    ("base", "dense", "lexical", "page", "agree", "intent", "type"),
    ("base", "dense", "lexical", "page", "agree", "intent", "type", "project"),
    tuple(g for g in GROUPS if g != "centroid"),
    tuple(GROUPS),
]


def questions(data: dict, name: str, catalog: dict, page_vectors: PageVectors | None = None) -> list[dict]:
    """Per question: its candidate pages with features, labels, and the hybrid-page chunk order.
    The centroid features need ``page_vectors`` and a cache with the questions' vectors."""
    page_of = lambda cid: catalog[cid]["doc_id"] if cid in catalog else None  # noqa: E731
    out = []
    for q in data["sets"][name]:
        dense, lexical, pages = q["dense"][:DEPTH], q["lexical"][:DEPTH], q["pages"][:PAGE_DEPTH]
        cands, labels = labelled_candidates(q, catalog, page_vectors if "vector" in q else None)
        relevant = set(q["relevant"])
        baseline = [c for c, _ in hybrid_page_scores(dense, lexical, pages, page_of, HYBRID_PAGE.fusion_settings)]
        out.append(
            {
                "cands": cands,
                "labels": labels,
                "relevant": relevant,
                "id": q["id"],
                "baseline": cap_per_page(baseline, page_of, HYBRID_PAGE.max_per_page),
                "page_of": page_of,
            }
        )
    return out


def metrics(qs: list[dict], ranker: Ranker | None, max_per_page: int = 2) -> dict[str, float]:
    """Page-level MRR@10 / hit@1 / hit@5 / hit@10 of the top K chunks, as eval_run scores them."""
    ranks = []
    for q in qs:
        chunks = q["baseline"] if ranker is None else [c for c, _ in rank_chunks(q["cands"], ranker, max_per_page)]
        ranks.append(rank_of_first_relevant([q["page_of"](c) for c in chunks[:K]], q["relevant"]))
    n = len(ranks)
    return {
        "mrr@10": sum(reciprocal_rank(r, K) for r in ranks) / n,
        **{f"hit@{k}": sum(r is not None and r <= k for r in ranks) / n for k in (1, 5, 10)},
    }


def fit_groups(train: list[dict], names, settings: FitSettings | None = None) -> Ranker:
    return fit(
        [(q["cands"].features, q["labels"]) for q in train if len(q["labels"])], names, settings or FitSettings()
    )


REPORTED = ("k8s_eval", "own_answerable", "train")


def report(
    label: str,
    sets: dict[str, list[dict]],
    ranker: Ranker | None,
    max_per_page: int = 2,
    names: tuple[str, ...] = REPORTED,
) -> None:
    cells = []
    for name in names:
        m = metrics(sets[name], ranker, max_per_page)
        cells.append(f"{m['mrr@10']:.3f} / {m['hit@1']:.3f} / {m['hit@5']:.3f} / {m['hit@10']:.3f}")
    print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


def ablation(sets: dict[str, list[dict]], max_per_page: int) -> Ranker:
    """Fit one ranker per cumulative feature group set; print the table; return the last."""
    print("| ranker | k8s eval MRR@10 / hit@1 / hit@5 / hit@10 | own | train |\n|---|---|---|---|")
    report("hybrid-page (replayed)", sets, None)
    for groups in ABLATION:
        names = [n for g in groups for n in GROUPS[g]]
        t0 = time.perf_counter()
        ranker = fit_groups(sets["train"], names)
        report(f"{'+'.join(groups)} ({time.perf_counter() - t0:.1f} s fit)", sets, ranker, max_per_page)
    return ranker


def doc_experiment(sets: dict[str, list[dict]], max_per_page: int) -> None:
    """Does fitting on label-free queries of every project (beside the k8s train questions)
    keep the ranker's k8s gain without its loss on other projects? Chosen on ``doc_check``."""
    other = lambda qs: [q for q in qs if not q["id"].startswith("doc:kubernetes:")]  # noqa: E731
    sets = {**sets, "doc_check_other": other(sets["doc_check"])}
    names = ("k8s_eval", "own_answerable", "doc_check", "doc_check_other")
    print(f"| ranker ({len(sets['doc_fit'])} doc queries) | " + " | ".join(names) + " |\n|---|---|---|---|---|")
    report("hybrid-page (replayed)", sets, None, names=names)
    fits = {
        "k8s train only": sets["train"],
        "train + doc queries of every project": sets["train"] + sets["doc_fit"],
        "train + doc queries of other projects": sets["train"] + other(sets["doc_fit"]),
        "train + half the other-project doc queries": sets["train"] + other(sets["doc_fit"])[::2],
        "doc queries only": sets["doc_fit"],
    }
    for label, train in fits.items():
        report(f"{label} ({len(train)} q)", sets, fit_groups(train, GROUPS_ALL), max_per_page, names)


GROUPS_ALL = [n for g in GROUPS for n in GROUPS[g]]


def route_experiment(sets: dict[str, list[dict]], max_per_page: int) -> None:
    """The ranker is fitted on Kubernetes questions only: does serving its order only when
    hybrid-page's top page is a Kubernetes page (hybrid-page's order otherwise) keep the k8s
    gain without the loss elsewhere? Judged on ``doc_check`` (label-free), own set reported."""
    ranker = fit_groups(sets["train"], GROUPS_ALL)
    other = lambda qs: [q for q in qs if not q["id"].startswith("doc:kubernetes:")]  # noqa: E731
    sets = {**sets, "doc_check_other": other(sets["doc_check"])}
    names = ("k8s_eval", "own_answerable", "doc_check", "doc_check_other")
    routed = {name: [_routed(q, ranker, max_per_page) for q in sets[name]] for name in names}
    print("| order | " + " | ".join(names) + " |\n|---|---|---|---|---|")
    report("hybrid-page (replayed)", sets, None, names=names)
    report("learned (k8s train)", sets, ranker, max_per_page, names)
    report("learned when the top page is k8s, else hybrid-page", routed, None, names=names)
    share = {n: sum(q["routed"] for q in routed[n]) / len(routed[n]) for n in names}
    print("share served by the ranker: " + ", ".join(f"{n} {v:.3f}" for n, v in share.items()))


def _routed(q: dict, ranker: Ranker, max_per_page: int) -> dict:
    """The question with ``baseline`` replaced by the order routing would serve."""
    top = q["page_of"](q["baseline"][0]) if q["baseline"] else None
    use = top is not None and top.startswith("kubernetes:")
    order = [c for c, _ in rank_chunks(q["cands"], ranker, max_per_page)] if use else q["baseline"]
    return {**q, "baseline": order, "routed": use}


def confirm(home: DataHome, version: str, ranker_path: Path, max_per_page: int) -> None:
    """The real retriever path (QueryEngine.search, as eval_run and serving run it):
    hybrid-page vs the learned config with ``ranker_path`` on the eval split and own set."""
    import dataclasses

    from infra_rag_assets.rag.evaluate.evaluation import run_benchmark
    from infra_rag_assets.rag.search.engine import QueryEngine, single_thread_queries
    from infra_rag_assets.rag.search.retrieval_settings import NAMED_CONFIGS

    single_thread_queries()
    engine = QueryEngine(home, version)
    learned = dataclasses.replace(
        NAMED_CONFIGS["hybrid-learned"], name="learned", ranker=str(ranker_path.resolve()), max_per_page=max_per_page
    )
    known = known_doc_ids(home, version)
    for name in ("k8s_bench_eval", "own_labelled"):
        run = run_benchmark(engine, load_benchmark(name), known, ["hybrid-page", learned])
        for regime, summaries in run.summaries.items():
            o = summaries[0]
            print(
                f"confirm {name} {regime}: n={o['n_answerable']} MRR@10 {o['mrr@10']:.3f} hit@1 {o['hit@1']:.3f} "
                f"hit@5 {o['hit@5']:.3f} hit@10 {o['hit@10']:.3f} abst.recall {o.get('abstention_recall')} "
                f"p50 {o['latency_p50_ms']:.0f} ms"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", required=True)
    ap.add_argument("--cache", type=Path)
    ap.add_argument("--max-per-page", type=int, default=1, help="chunks per page before the next page (learned)")
    ap.add_argument("--out", type=Path, help="write the all-groups ranker's JSON here")
    ap.add_argument("--confirm", action="store_true", help="then score --out through QueryEngine (slow)")
    ap.add_argument("--route", action="store_true", help="ranker only under a k8s top page (needs --doc-queries)")
    ap.add_argument(
        "--doc-queries",
        type=int,
        default=0,
        help="also cache this many label-free doc queries to fit with (and as many to check on)",
    )
    args = ap.parse_args()
    home = DataHome.at()
    data = cached(home, args.version, args.cache, args.doc_queries)
    catalog = read_catalog(home.serving_root(), args.version)
    t0 = time.perf_counter()
    page_vectors = PageVectors.of_version(home.vectors_uri(), args.version, catalog)
    sets = {name: questions(data, name, catalog, page_vectors) for name in data["sets"]}
    print(f"features of {sum(map(len, sets.values()))} questions in {time.perf_counter() - t0:.1f} s")
    if args.doc_queries:
        (route_experiment if args.route else doc_experiment)(sets, args.max_per_page)
        return
    ranker = ablation(sets, args.max_per_page)
    if args.out:
        meta = {
            **ranker.meta,
            "index_version": args.version,
            "trained_on": TRAIN_BENCHMARK,
            "train_questions_with_candidates": sum(1 for q in sets["train"] if q["labels"].any()),
        }
        Ranker(ranker.feature_names, ranker.mean, ranker.scale, ranker.weights, meta=meta).save(args.out)
        if args.confirm:
            confirm(home, args.version, args.out, args.max_per_page)


if __name__ == "__main__":
    main()
