"""Peer benchmark: our retrieval configs vs bm25s and LanceDB native FTS / hybrid / dense.

Why: "hybrid beats lexical beats dense" (README "Retrieval quality") only says we beat our own
baselines. This runs off-the-shelf peers on the SAME chunk rows and the SAME questions, in one
process, so a reader can tell whether our analyzer/fusion work earns its keep, and what it costs
in latency (product target: our hybrid p50 within 2x of LanceDB native hybrid p50).

What each system indexes (all 19k-ish chunk rows of one index version):
* ours-*: the built Tantivy index (title, section, body + identifier field, our Porter2 analyzer,
  title/section boosts) and the built LanceDB vectors (MiniLM of context line + chunk text).
* bm25s: title + section + text per chunk (the text our Tantivy fields see), its default regex
  tokenizer + English stop words; PyStemmer stemming only if installed (else none; recorded).
* lancedb-*: a temp COPY of the version's LanceDB table with ``text`` replaced by the same
  title + section + text; native inverted FTS index (lancedb 0.40 removed tantivy FTS); the
  copied vectors for hybrid (default RRF reranker) and plain vector search (no floor).
Metrics are page-level (chunks collapsed to pages) from ``infra_rag_assets.rag.evaluate.metrics``.

    INFRA_RAG_HOME=/tmp/rh python -m eval.bench_peers [--version V] [--limit N]

Writes eval/results/peers.json (``--out`` elsewhere for a ``--limit`` trial, so it does not replace the current run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import bm25s
import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS

from infra_rag_assets.rag.evaluate.benchmarks import coverage, load_benchmark
from infra_rag_assets.rag.evaluate.metrics import ndcg_at, rank_of_first_relevant, summarize
from infra_rag_assets.rag.index.embedding import Embedder
from infra_rag_assets.rag.index.vector_store import table_name
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.engine import DEFAULT_CONFIG, QueryEngine, resolve_version, single_thread_queries
from infra_rag_assets.rag.search.fusion import cap_per_page

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VERSION = ""  # the current release
SERVING_RATIO_TARGET = 0.5  # issue 38: served p50 at most half of LanceDB native hybrid's, same run
OUR_CONFIGS = ("dense", "lexical", "hybrid-rrf", "hybrid-weighted", "hybrid-page", "hybrid-learned")
K = 10  # chunks asked of every system; metrics then collapse them to pages
METRICS = ("hit@1", "hit@5", "hit@10", "mrr@10", "ndcg@10", "latency_p50_ms", "latency_p95_ms")
Search = Callable[[str], list[str]]  # question -> doc ids of the top-K chunks, best first


# --- data ------------------------------------------------------------------------------------


def lexical_text(row: dict) -> str:
    """Title + section + chunk text: the three text fields our Tantivy index analyses, so peers
    see the same words (our extra ``ident`` field is derived from these too)."""
    return "\n".join(part for part in (row["title"], row["section_path"], row["text"]) if part)


def load_chunks(home: DataHome, version: str) -> list[dict]:
    """The version's chunk rows in a stable order (the exact rows our indexes were built from)."""
    return home.warehouse().chunks_of(version, ("chunk_id", "doc_id", "title", "section_path", "text")).to_dicts()


def load_questions(home: DataHome, version: str, limit: int | None) -> tuple[dict[str, list], dict[str, int]]:
    """Covered k8s eval-split questions and our answerable own questions, scored separately.

    Coverage is by the version's page records (``documents``), as ``eval_run`` does, so n
    matches the README (557): a page that parsed to no content has no chunk and is a scored
    miss for every system alike. Uncovered questions (page not in the 2023-11 snapshot) are
    counted, not scored. Unanswerable own questions have no rank at all."""
    pages = home.warehouse().doc_ids(version)
    covered, uncovered = coverage(load_benchmark("k8s_bench_eval").records, pages)
    own_all = load_benchmark("own_labelled").records
    own = [r for r in own_all if r.relevant]
    sets = {"k8s_eval": covered[:limit] if limit else covered, "own_answerable": own[:limit] if limit else own}
    return sets, {"k8s_uncovered": len(uncovered), "own_unanswerable_skipped": len(own_all) - len(own)}


# --- systems ---------------------------------------------------------------------------------


def ours(engine: QueryEngine, config: str) -> Search:
    """One named config through QueryEngine.search, exactly as the CLI/API call it."""

    def search(question: str) -> list[str]:
        return [hit.doc_id for hit in engine.search(question, config=config, k=K).hits]

    return search


def bm25s_stemmer() -> tuple[Callable | None, str]:
    """bm25s stems through PyStemmer; without it (no new deps allowed) run unstemmed."""
    try:
        import Stemmer  # PyStemmer
    except ImportError:
        return None, "none (PyStemmer not installed)"
    return Stemmer.Stemmer("english").stemWords, "PyStemmer english"


def bm25s_system(chunks: list[dict], stemmer: Callable | None) -> Search:
    """BM25 (bm25s defaults: lucene idf, k1=1.5, b=0.75) over the same chunk texts."""
    tokens = bm25s.tokenize([lexical_text(c) for c in chunks], stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    doc_ids = np.array([c["doc_id"] for c in chunks], dtype=object)

    def search(question: str) -> list[str]:
        query = bm25s.tokenize([question], stopwords="en", stemmer=stemmer, show_progress=False)
        idx, _scores = retriever.retrieve(query, k=K, show_progress=False, n_threads=0)
        return doc_ids[idx[0]].tolist()

    return search


def lance_copy(home: DataHome, version: str, chunks: list[dict], tmp: str) -> lancedb.table.Table:
    """Copy of the version's vectors table in ``tmp`` (never touching the home) with ``text``
    set to the lexical text, plus a native FTS index with LanceDB's default English analyzer
    (simple tokenizer, lowercase, stop words, stemming, ascii folding)."""
    source = lancedb.connect(home.vectors_uri()).open_table(table_name(version))
    data = source.to_arrow().select(["chunk_id", "doc_id", "vector"])
    text_of = {c["chunk_id"]: lexical_text(c) for c in chunks}
    data = data.append_column("text", pa.array([text_of[c] for c in data["chunk_id"].to_pylist()]))
    table = lancedb.connect(tmp).create_table("chunks", data)
    # create_fts_index() is a deprecated wrapper over this in 0.40; use_tantivy=True now raises.
    table.create_index("text", config=FTS())
    return table


def lance_fts(table) -> Search:
    """Native BM25 full-text search (a match query: OR of the analysed terms)."""

    def search(question: str) -> list[str]:
        hits = table.search(question, query_type="fts").select(["doc_id", "_score"]).limit(K).to_arrow()
        return hits["doc_id"].to_pylist()

    return search


def lance_hybrid(table, embedder: Embedder, *, cap: int = 0, depth: int = 50) -> Search:
    """Native hybrid: vector + FTS legs of K each, fused by the default RRFReranker(K=60).
    ``cap`` > 0: ask for ``depth`` hits and apply our per-page cap (``fusion.cap_per_page``)
    before cutting to K, so the peer gets the same page diversity as ``ours-hybrid-page``."""
    limit = depth if cap else K

    def search(question: str) -> list[str]:
        vector = embedder.encode([question])[0]
        # No select(): a projection without _distance/_score logs a Lance WARN per leg.
        hits = table.search(query_type="hybrid").vector(vector).text(question).limit(limit).to_arrow()
        return cap_per_page(hits["doc_id"].to_pylist(), lambda doc: doc, cap)[:K]

    return search


def lance_dense(table, embedder: Embedder) -> Search:
    """Plain flat cosine search on the copied vectors: our dense side minus the floor."""

    def search(question: str) -> list[str]:
        vector = embedder.encode([question])[0]
        hits = table.search(vector).distance_type("cosine").select(["doc_id", "_distance"]).limit(K).to_arrow()
        return hits["doc_id"].to_pylist()

    return search


# --- scoring ---------------------------------------------------------------------------------


def score(search: Search, record) -> dict:
    """One timed query (wall time of the search call only) and its page-level rank/nDCG."""
    started = time.perf_counter()
    ranked = search(record.question)
    ms = (time.perf_counter() - started) * 1000.0
    relevant = set(record.relevant)
    return {
        "rank": rank_of_first_relevant(ranked, relevant),
        "ndcg": ndcg_at(ranked, relevant, 10),
        "latency_ms": ms,
        "should_abstain": False,
        "abstained": not ranked,
    }


def run_all(systems: dict[str, Search], sets: dict[str, list]) -> dict[str, dict[str, list[dict]]]:
    """One warmup query per system, then question by question, every system in turn.

    Interleaved (and the system order rotated per question) rather than system after system:
    on a shared 2-core box the background load drifts over minutes, and this spreads the drift
    evenly over all systems instead of penalising whichever ran in the busy stretch."""
    names = list(systems)
    first = next(iter(sets.values()))[0].question
    for search in systems.values():
        search(first)
    rows = {name: {qset: [] for qset in sets} for name in names}
    for qset, records in sets.items():
        for i, record in enumerate(records):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                rows[name][qset].append(score(systems[name], record))
    return rows


def aggregate(rows: dict[str, list[dict]]) -> dict[str, dict]:
    """Project metrics per question set, plus latency over all questions ("all")."""
    out = {}
    for name, group in {**rows, "all": [r for g in rows.values() for r in g]}.items():
        summary = summarize(group)[0]
        out[name] = {m: None if summary[m] is None else round(summary[m], 4) for m in METRICS}
        out[name].update(n=len(group), empty_results=sum(r["abstained"] for r in group))
    return out


def margins(results: dict[str, dict], qset: str) -> dict[str, dict]:
    """Best ours minus best peer, per metric (each side picks its own best system)."""
    out = {}
    for metric in ("mrr@10", "hit@5"):

        def best(prefix_ours: bool, metric: str = metric):
            pool = {s: r[qset][metric] for s, r in results.items() if s.startswith("ours-") == prefix_ours}
            return max(pool.items(), key=lambda kv: kv[1])

        (o_name, o_val), (p_name, p_val) = best(True), best(False)
        out[metric] = {
            "ours": o_name,
            "ours_value": o_val,
            "peer": p_name,
            "peer_value": p_val,
            "margin": round(o_val - p_val, 4),
        }
    return out


def markdown(report: dict) -> str:
    """Tables for the README: one per question set, rows = systems, columns = metrics."""
    lines = []
    for qset in ("k8s_eval", "own_answerable"):
        n = next(iter(report["systems"].values()))[qset]["n"]
        lines += [
            "",
            f"**{qset}** (n={n})",
            "",
            "| system | hit@1 | hit@5 | hit@10 | MRR@10 | nDCG@10 | p50 ms | p95 ms | empty |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for system, res in report["systems"].items():
            r = res[qset]
            cells = [f"{r[m]:.3f}" if "@" in m else f"{r[m]:.1f}" for m in METRICS]
            lines.append(f"| {system} | {' | '.join(cells)} | {r['empty_results']} |")
        lines.append("")
        for metric, m in report["margins"][qset].items():
            lines.append(
                f"- best ours vs best peer, {metric}: {m['ours']} {m['ours_value']:.3f} vs "
                f"{m['peer']} {m['peer_value']:.3f} → margin {m['margin']:+.3f}"
            )
    lines.append("")
    for name, ratio in report["latency_vs_lancedb_hybrid"].items():
        lines.append(f"- {name} p50 / lancedb-hybrid p50 (all questions, same run): {ratio:.2f}×")
    if "serving_p50_vs_lancedb_hybrid" in report:
        w = report["serving_p50_vs_lancedb_hybrid"]
        lines.append(
            f"- **serving ({w['config']}) p50 {w['ours_p50_ms']:.1f} ms / lancedb-hybrid "
            f"{w['lancedb_hybrid_p50_ms']:.1f} ms = {w['ratio']:.2f}×** (target ≤ {w['target']}×)"
        )
    return "\n".join(lines)


def build_systems(engine: QueryEngine, home: DataHome, chunks: list[dict], tmp: str) -> tuple[dict, dict]:
    """Every system as a search callable, plus a note of what it indexes and how it tokenizes."""
    stemmer, stem_note = bm25s_stemmer()
    table, embedder = lance_copy(home, engine.version, chunks, tmp), Embedder(engine.build_config.model_id)
    systems = {f"ours-{c}": ours(engine, c) for c in OUR_CONFIGS}
    systems |= {
        "bm25s": bm25s_system(chunks, stemmer),
        "lancedb-fts": lance_fts(table),
        "lancedb-hybrid": lance_hybrid(table, embedder),
        "lancedb-dense": lance_dense(table, embedder),
        "lancedb-hybrid-cap2": lance_hybrid(table, embedder, cap=2),
    }
    lex = "title+section+text per chunk"
    notes = {
        "ours-*": "Tantivy (title/section/body/ident fields, Porter2 + identifier splitting, boosts) "
        "+ LanceDB vectors of context line + text; named RetrievalSettings (dense/hybrid: floor 0.35)",
        "bm25s": f"{lex}; regex \\w\\w+ tokenizer, lowercase, English stop words; stemmer: {stem_note}",
        "lancedb-fts": f"{lex}; native FTS, simple tokenizer, lowercase, English stop words + stemming",
        "lancedb-hybrid": "native FTS above + copied vectors (L2 on unit vectors = cosine order), RRF k=60",
        "lancedb-dense": "copied vectors, flat cosine search, no floor",
        "lancedb-hybrid-cap2": "lancedb-hybrid, 50 hits, then our cap of 2 chunks per page, first 10",
    }
    return systems, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default=DEFAULT_VERSION, help="index version ('' = current release)")
    parser.add_argument("--limit", type=int, help="first N questions of each set (quick trials)")
    parser.add_argument("--out", default=str(ROOT / "eval" / "results" / "peers.json"))
    args = parser.parse_args()
    started = time.perf_counter()
    single_thread_queries()
    home = DataHome.at()
    version = resolve_version(home, args.version or None)
    chunks = load_chunks(home, version)
    sets, skipped = load_questions(home, version, args.limit)
    chunked = {c["doc_id"] for c in chunks}
    skipped["k8s_scored_page_has_no_chunks"] = sum(not chunked & set(r.relevant) for r in sets["k8s_eval"])
    engine = QueryEngine(home, version)
    report = {
        "version": version,
        "chunks": len(chunks),
        "k": K,
        "questions": {k: len(v) for k, v in sets.items()},
        **skipped,
        "env": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "lancedb": lancedb.__version__,
            "bm25s": bm25s.__version__,
            "load_avg_1m_start": round(os.getloadavg()[0], 1),
        },
    }
    with tempfile.TemporaryDirectory(prefix="bench_peers_") as tmp:
        t0 = time.perf_counter()
        systems, report["indexes"] = build_systems(engine, home, chunks, tmp)
        report["seconds_building_peers"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        report["systems"] = {name: aggregate(rows) for name, rows in run_all(systems, sets).items()}
        report["seconds_querying"] = round(time.perf_counter() - t0, 1)
    results = report["systems"]
    lance_p50 = results["lancedb-hybrid"]["all"]["latency_p50_ms"]
    hybrids = ("ours-hybrid-rrf", "ours-hybrid-weighted", "ours-hybrid-page", "ours-hybrid-learned")
    report["latency_vs_lancedb_hybrid"] = {
        s: round(results[s]["all"]["latency_p50_ms"] / lance_p50, 2) for s in hybrids
    }
    # the number to watch (issue 38): the served config's p50 over the peer's, both in this run
    report["serving_p50_vs_lancedb_hybrid"] = {
        "config": DEFAULT_CONFIG,
        "ours_p50_ms": results[f"ours-{DEFAULT_CONFIG}"]["all"]["latency_p50_ms"],
        "lancedb_hybrid_p50_ms": lance_p50,
        "ratio": report["latency_vs_lancedb_hybrid"][f"ours-{DEFAULT_CONFIG}"],
        "target": SERVING_RATIO_TARGET,
    }
    report["margins"] = {q: margins(results, q) for q in sets}
    report["env"]["load_avg_1m_end"] = round(os.getloadavg()[0], 1)  # latency is only as quiet as the box
    report["seconds_total"] = round(time.perf_counter() - started, 1)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(report))
    print(f"\nwrote {args.out} in {report['seconds_total']} s")


if __name__ == "__main__":
    main()
