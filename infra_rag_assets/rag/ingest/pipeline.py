"""The first two stages as plain functions: snapshot source pages, parse them to documents.

The Dagster assets are thin wrappers over these, and the CLI and tests reuse them directly.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict

import polars as pl

from ..versions import PIPELINE_VERSION
from .blobs import BlobStore
from .models import DUPLICATE_PREFIX, STATUS_ERROR, STATUS_OK, STATUS_TOO_LARGE, ParsedDocument
from .parse.budget import PARSE_BUDGET_S, ParseWorker
from .parse.dedup import content_hash, find_duplicates
from .parse.dispatch import PARSERS, parse_page, parser_of
from .parse.markdown import clean_inline, decode_text, split_front_matter
from .parse.section_index import section_listings
from .safe_paths import TooLarge, UnsafePath, entry_for, iter_blocks, open_entry
from .sources import MAX_PAGE_BYTES, PageRef, Source, SourceConfigError, iter_pages, sha256_bytes

Progress = Callable[[int, int], None]
# Longest parsed text on the real corpus: 204,632 characters (eval/measure_ingest_bounds.py).
# ~5x that is refused as too_large: a one-line 6 MB file would otherwise become ~4,700 chunks.
MAX_DOC_CHARS = 1_000_000
# Near-duplicate Jaccard (word 5-shingles). Measured on the corpus: versioned API references
# (kubelet-config v1alpha1 vs v1: 0.95) and sibling CLI command pages (0.91-0.93) are distinct
# pages users cite and ask about; only copy-edited copies reach 0.98.
NEAR_DUP_THRESHOLD = 0.98


def list_pages(sources: Iterable[Source]) -> list[PageRef]:
    pages: list[PageRef] = []
    for source in sources:
        pages.extend(iter_pages(source))
    return pages


def snapshot_pages(pages: list[PageRef], blobs: BlobStore, progress: Progress | None = None) -> pl.DataFrame:
    """Read every page's bytes into the blob store and return one row per page."""
    rows = []
    for i, page in enumerate(pages, 1):
        rows.append(_snapshot_one(page, blobs))
        if progress:
            progress(i, len(pages))
    return pl.DataFrame(rows, schema=PAGE_SCHEMA)


PAGE_SCHEMA = {  # explicit, so a frame of zero pages still has its columns
    **dict.fromkeys(
        ("source", "project", "doc_id", "page_id", "rel_path", "url", "upstream", "license", "kind", "bytes_hash"),
        pl.String,
    ),
    "size_bytes": pl.Int64,
    "fetch_status": pl.String,
    "fetch_reason": pl.String,
    "read_ms": pl.Float64,
}


def _snapshot_one(page: PageRef, blobs: BlobStore) -> dict:
    started = time.perf_counter()
    entry = page.entry or entry_for(page.source.mirror or page.abs_path.parent, page.abs_path)
    status, reason, digest, size = entry.status, entry.reason, "", entry.size
    if status == "ok":  # size checked on the open file before any read; bytes streamed
        try:
            fd, size = open_entry(entry, MAX_PAGE_BYTES)
            try:
                digest = blobs.put_stream(iter_blocks(fd, MAX_PAGE_BYTES))
            finally:
                os.close(fd)
        except TooLarge as exc:
            status, reason, size = "too_large", f"{exc.size} bytes > {MAX_PAGE_BYTES}", exc.size
        except UnsafePath as exc:
            status, reason = "error", str(exc)[:300]
        except OSError as exc:
            status, reason = "error", f"{type(exc).__name__}: {exc.strerror or exc}"[:300]
    return {
        "source": page.source.name,
        "project": page.source.project,
        "doc_id": page.doc_id,
        "page_id": page.page_id,
        "rel_path": page.rel_path,
        "url": page.url,
        "upstream": page.source.upstream_ref(),
        "license": page.source.license,
        "kind": page.source.kind,
        "bytes_hash": digest,
        "size_bytes": size,
        "fetch_status": status,
        "fetch_reason": reason,
        "read_ms": (time.perf_counter() - started) * 1000,
    }


def parse_documents(
    pages: pl.DataFrame,
    blobs: BlobStore,
    reusable: dict[tuple[str, str], dict] | None = None,
    progress: Progress | None = None,
    budget_s: float = PARSE_BUDGET_S,
) -> tuple[pl.DataFrame, int]:
    """Parse each snapshotted page (reusing earlier parses of identical bytes), then dedup.

    ``reusable`` maps (source bytes hash, parser@version) to a document row of an earlier
    index version. Returns the documents frame and how many rows were reused. Each parse
    runs in a worker process under ``budget_s`` seconds (see ``parse.budget``).
    """
    reusable = reusable or {}
    rows, reused = [], 0
    records = pages.to_dicts()
    listings = section_listing_by_doc(records, blobs)
    with ParseWorker(budget_s) as worker:
        for i, page in enumerate(records, 1):
            key = (page["bytes_hash"], parser_tag(page["kind"]))
            listing = listings.get(page["doc_id"], "")
            if page["bytes_hash"] and key in reusable and not listing:  # a listing depends on other pages
                row = {**reusable[key], **_identity(page)}
                reused += 1
            else:
                row = _parse_one(page, blobs, listing, worker)
            rows.append(row)
            if progress:
                progress(i, len(records))
    _mark_duplicates(rows)
    return pl.DataFrame(
        rows, schema_overrides={"char_count": pl.Int64, "parse_ms": pl.Float64, "section_count": pl.Int32}
    ), reused


def parser_tag(kind: str) -> str:
    name, version = parser_of(kind)
    return f"{name}@{version}+pipeline{PIPELINE_VERSION}"


def _identity(page: dict) -> dict:
    keys = ("doc_id", "source", "project", "page_id", "url")
    return {k: page[k] for k in keys} | {"source_hash": page["bytes_hash"]}


def section_listing_by_doc(records: list[dict], blobs: BlobStore) -> dict[str, str]:
    """doc_id -> the child-page listing its published section index shows (Markdown sources)."""
    by_source: dict[str, list[dict]] = {}
    for page in records:
        if page["kind"] == "markdown_tree" and page["fetch_status"] == "ok" and page["bytes_hash"]:
            by_source.setdefault(page["source"], []).append(page)
    out = {}
    for pages in by_source.values():
        doc_of = {p["rel_path"]: p["doc_id"] for p in pages}
        metas = ((p["rel_path"], front_matter(blobs.get(p["bytes_hash"]))) for p in pages)
        out.update({doc_of[path]: text for path, text in section_listings(metas, clean_inline).items()})
    return out


def front_matter(raw: bytes) -> dict:
    return split_front_matter(decode_text(raw)[0])[0]


def _parse_one(page: dict, blobs: BlobStore, listing: str = "", worker: ParseWorker | None = None) -> dict:
    started = time.perf_counter()
    if page["fetch_status"] != "ok":
        doc = ParsedDocument(
            text="",
            title="",
            status=page["fetch_status"] or STATUS_ERROR,
            reason=f"not fetched: {page['fetch_reason']}",
        )
    else:
        parse = worker.parse if worker else parse_page
        doc = parse(
            page["kind"], blobs.get(page["bytes_hash"]), path=page["rel_path"], url=page["url"], appendix=listing
        )
        if len(doc.text) > MAX_DOC_CHARS:  # refused whole: a cut document would cite half a page
            doc = ParsedDocument(
                text="",
                title=doc.title,
                status=STATUS_TOO_LARGE,
                parser=doc.parser,
                parser_version=doc.parser_version,
                reason=f"parsed text has {len(doc.text)} characters > {MAX_DOC_CHARS}",
            )
    return _document_row(page, doc, (time.perf_counter() - started) * 1000)


def _document_row(page: dict, doc: ParsedDocument, parse_ms: float) -> dict:
    name, version = parser_of(page["kind"]) if page["kind"] in PARSERS else (doc.parser, doc.parser_version)
    return _identity(page) | {
        "title": doc.title,
        "description": doc.description,
        "text": doc.text,
        "page_kind": doc.page_kind,
        "status": doc.status,
        "reason": doc.reason,
        "sections_json": json.dumps([asdict(s) for s in doc.sections]),
        "page_spans_json": json.dumps([asdict(p) for p in doc.page_spans]),
        "section_count": len(doc.sections),
        "content_hash": content_hash(doc.text) if doc.text else "",
        "parser": doc.parser or name,
        "parser_version": doc.parser_version or version,
        "pipeline_version": PIPELINE_VERSION,
        "char_count": len(doc.text),
        "parse_ms": parse_ms,
    }


def _mark_duplicates(rows: list[dict]) -> None:
    """Exact and near duplicates keep their record, with status ``duplicate_of:<doc_id>``."""
    candidates = [(r["doc_id"], r["text"]) for r in rows if _is_ok_or_dup(r["status"])]
    dups = find_duplicates(candidates, threshold=NEAR_DUP_THRESHOLD)
    for row in rows:
        if row["doc_id"] in dups:
            canonical, kind = dups[row["doc_id"]]
            row["status"] = f"{DUPLICATE_PREFIX}{canonical}"
            row["reason"] = f"{kind} duplicate of {canonical}"
        elif row["status"].startswith(DUPLICATE_PREFIX):  # reused row whose twin changed
            row["status"], row["reason"] = STATUS_OK, ""


def _is_ok_or_dup(status: str) -> bool:
    return status == STATUS_OK or status.startswith(DUPLICATE_PREFIX)


__all__ = ["SourceConfigError", "list_pages", "parse_documents", "snapshot_pages", "sha256_bytes", "parser_tag"]
