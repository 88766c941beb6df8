"""Chunk the whole corpus through the library (no Dagster, no embedding) and print what the
ingestion bounds are chosen from: documents by status, chunk count, a hash of every chunk's
(doc_id, start, end, text), max characters per chunk, max chunks per document, max parse time.

Run before and after a change to ingestion: for normal pages the count and hash must not move.

    INFRA_RAG_CORPUS=../shared/corpus python -m eval.measure_ingest_bounds [--json [OUT]]

``--json`` alone writes eval/results/ingest_bounds.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from infra_rag_assets import settings

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", default=settings.sources_file())
    parser.add_argument(
        "--json",
        nargs="?",
        default="",
        const=str(ROOT / "eval" / "results" / "ingest_bounds.json"),
        help="also write the report to OUT (default eval/results/ingest_bounds.json)",
    )
    args = parser.parse_args()

    from infra_rag_assets.rag.index.config import ChunkSettings
    from infra_rag_assets.rag.index.corpus_chunks import chunk_documents
    from infra_rag_assets.rag.index.embedding import DEFAULT_MODEL, resolve_model_path
    from infra_rag_assets.rag.index.tokens import HFTokenCounter
    from infra_rag_assets.rag.ingest.blobs import BlobStore
    from infra_rag_assets.rag.ingest.pipeline import list_pages, parse_documents, snapshot_pages
    from infra_rag_assets.rag.ingest.sources import load_sources

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        blobs = BlobStore(Path(tmp) / "blobs")
        pages = snapshot_pages(list_pages(load_sources(args.sources)), blobs)
        docs, _ = parse_documents(pages, blobs)
    counter = HFTokenCounter.from_model_path(resolve_model_path(DEFAULT_MODEL))
    chunks = chunk_documents(docs.iter_rows(named=True), counter, ChunkSettings())
    digest = hashlib.sha256()
    for row in chunks.select("doc_id", "start_char", "end_char", "text").sort("doc_id", "start_char").iter_rows():
        digest.update(json.dumps(row, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    doc_digest = hashlib.sha256()
    for row in docs.select("doc_id", "status", "reason", "title", "url", "text").sort("doc_id").iter_rows():
        doc_digest.update(json.dumps(row, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    from infra_rag_assets.rag.ingest.sources import mirror_fingerprint

    fingerprints = {s.name: mirror_fingerprint(s)[:16] for s in load_sources(args.sources)}
    per_doc = Counter(chunks["doc_id"].to_list())
    longest = chunks.with_columns(chunks["text"].str.len_chars().alias("chars")).sort("chars", descending=True)
    slowest = docs.sort("parse_ms", descending=True)
    report = {
        "pages": len(pages),
        "documents": len(docs),
        "documents_by_status": dict(Counter(s.split(":")[0] for s in docs["status"].to_list())),
        "document_hash": doc_digest.hexdigest(),
        "mirror_fingerprints": fingerprints,
        "chunks": len(chunks),
        "chunk_hash": digest.hexdigest(),
        "max_chunk_chars": int(longest["chars"][0]),
        "max_chunk_chars_doc": longest["doc_id"][0],
        "max_chunk_tokens": int(chunks["token_count"].max()),
        "max_chunks_per_doc": max(per_doc.values()),
        "max_chunks_doc": per_doc.most_common(1)[0][0],
        "max_doc_chars": int(docs["char_count"].max()),
        "max_parse_ms": round(float(slowest["parse_ms"][0]), 1),
        "max_parse_doc": slowest["doc_id"][0],
        "max_page_bytes": int(pages["size_bytes"].max()),
        "wall_s": round(time.perf_counter() - started, 1),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }
    json.dump(report, sys.stdout, indent=1)
    print()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
