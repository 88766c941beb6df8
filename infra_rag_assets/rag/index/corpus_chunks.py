"""Turn documents rows into chunk rows: the chunks stage as a plain function.

A chunk row carries everything retrieval and citation need (doc id, project, URL + anchor,
section path, PDF pages, page kind, token count, hashes) plus the optional context line that
is prepended for embedding and indexing only; ``text`` is always the exact slice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator

import polars as pl

from ..ingest.models import STATUS_OK, PageSpan, Section
from .chunking import ChunkerSettings, chunk_document, chunk_id, context_line, is_truncated
from .config import ChunkSettings, StableRowsHash, stable_hash
from .embedding import text_hash
from .tokens import TokenCounter

SECTION_SEP = " › "
CHUNK_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "chunk_id": pl.String,
    "doc_id": pl.String,
    "source": pl.String,
    "project": pl.String,
    "page_id": pl.String,
    "url": pl.String,
    "title": pl.String,
    "section_path": pl.String,
    "anchor": pl.String,
    "pages": pl.List(pl.Int32),
    "page_kind": pl.String,
    "ordinal": pl.Int32,
    "start_char": pl.Int64,
    "end_char": pl.Int64,
    "text": pl.String,
    "context": pl.String,
    "token_count": pl.Int32,
    "text_hash": pl.String,
    "embed_hash": pl.String,
}


def chunker_config(settings: ChunkSettings) -> ChunkerSettings:
    return ChunkerSettings(
        target_tokens=settings.target_tokens,
        max_tokens=settings.max_tokens,
        min_tokens=settings.min_tokens,
        max_chars=settings.max_chars,
        max_chunks=settings.max_chunks,
    )


def embed_input(context: str, text: str) -> str:
    """What the embedder and the lexical index see: context line, newline, exact slice."""
    return f"{context}\n{text}" if context else text


def chunk_documents(
    docs: Iterable[dict],
    counter: TokenCounter,
    settings: ChunkSettings,
    progress: Callable[[int, int], None] | None = None,
    truncated: list[str] | None = None,
) -> pl.DataFrame:
    """Chunk every ``ok`` document (duplicates and failures are not indexed).
    ``truncated`` collects the doc ids that stopped at ``max_chunks``."""
    docs = list(docs)
    batches = chunk_document_batches([docs], counter, settings, len(docs), progress, truncated)
    return pl.concat([*batches, pl.DataFrame(schema=CHUNK_SCHEMA)])


def chunk_document_batches(
    batches: Iterable[Iterable[dict]],
    counter: TokenCounter,
    settings: ChunkSettings,
    total: int,
    progress: Callable[[int, int], None] | None = None,
    truncated: list[str] | None = None,
) -> Iterator[pl.DataFrame]:
    """``chunk_documents`` a batch of documents at a time: one chunk frame per batch, so the
    chunks stage holds a batch, not the version. ``total`` is the documents' count (progress)."""
    config, done = chunker_config(settings), 0
    for batch in batches:
        rows: list[dict] = []
        for doc in batch:
            done += 1
            if doc["status"] == STATUS_OK:
                rows.extend(_document_chunks(doc, counter, config, settings.context_line, truncated))
            if progress:
                progress(done, total)
        yield pl.DataFrame(rows, schema=CHUNK_SCHEMA)


def _document_chunks(
    doc: dict, counter: TokenCounter, config: ChunkerSettings, with_context: bool, truncated: list[str] | None = None
) -> list[dict]:
    sections = [Section(**{**s, "path": tuple(s["path"])}) for s in json.loads(doc["sections_json"])]
    page_spans = [PageSpan(**p) for p in json.loads(doc["page_spans_json"])]
    rows = []
    spans = chunk_document(doc["text"], sections, page_spans, counter, config)
    if truncated is not None and is_truncated(doc["text"], spans, config):
        truncated.append(doc["doc_id"])
    for chunk in spans:
        if is_bare_heading(chunk.text, chunk.section_path):
            continue
        digest = text_hash(chunk.text)
        context = context_line(doc["project"], doc["title"], chunk.section_path) if with_context else ""
        rows.append(
            {
                "chunk_id": chunk_id(doc["doc_id"], chunk.start, chunk.end, digest),
                "doc_id": doc["doc_id"],
                "source": doc["source"],
                "project": doc["project"],
                "page_id": doc["page_id"],
                "url": _cite_url(doc["url"], chunk.anchor if len(chunk.section_path) > 1 else "", chunk.pages),
                "title": doc["title"],
                "section_path": SECTION_SEP.join(chunk.section_path),
                "anchor": chunk.anchor,
                "pages": list(chunk.pages),
                "page_kind": doc["page_kind"],
                "ordinal": chunk.ordinal,
                "start_char": chunk.start,
                "end_char": chunk.end,
                "text": chunk.text,
                "context": context,
                "token_count": chunk.token_count,
                "text_hash": digest,
                "embed_hash": text_hash(embed_input(context, chunk.text)),
            }
        )
    return rows


def is_bare_heading(text: str, section_path: tuple[str, ...]) -> bool:
    """A chunk that is only its section's heading line (a parent heading whose body is all
    subsections). It says nothing its children's context lines do not already carry, and as a
    2-word vector it attracts unrelated queries, so it is not indexed."""
    return bool(section_path) and "\n" not in text and text.lstrip("#").strip() == section_path[-1].strip()


def _cite_url(url: str, anchor: str, pages: tuple[int, ...]) -> str:
    """PDF chunks cite their first page (``#page=N``); web pages cite the section anchor."""
    if pages:
        return f"{url}#page={pages[0]}"
    if anchor and not anchor.startswith("page-"):
        return f"{url}#{anchor}"
    return url


def chunks_version(frame: pl.DataFrame) -> str:
    """Rolls up every chunk's id and embedded-text hash: moves when any chunk or context moves."""
    return stable_hash(frame.select("chunk_id", "embed_hash").sort("chunk_id").rows(), 16)


def chunks_version_of(batches: Iterable[pl.DataFrame]) -> str:
    """``chunks_version`` of a version's (chunk_id, embed_hash) rows read in chunk-id order, a
    batch at a time (``Warehouse.chunk_batches``)."""
    digest = StableRowsHash()
    for batch in batches:
        digest.add(batch.select("chunk_id", "embed_hash").rows())
    return digest.hexdigest(16)
