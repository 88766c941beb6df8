"""The page-level Tantivy index: one document per page (title + every chunk of the page),
beside each version's chunk index; the retriever's page terms (fusion.py) search it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .lexical_store import MANIFEST_NAME, PAGE_INDEX_SUFFIX, LexicalDoc, LexicalSearcher


def page_index_dir(chunk_index_dir: Path) -> Path:
    """The page-level index of a version sits beside its chunk index (same lock, same cleanup)."""
    chunk_index_dir = Path(chunk_index_dir)
    return chunk_index_dir.with_name(chunk_index_dir.name + PAGE_INDEX_SUFFIX)


def has_page_index(chunk_index_dir: Path) -> bool:
    """Whether the version was built with a page index (versions from before it have none)."""
    return (page_index_dir(chunk_index_dir) / MANIFEST_NAME).is_file()


def open_page_searcher(chunk_index_dir: Path, *, private_copy: bool = False) -> LexicalSearcher | None:
    """The version's page index, or None for versions built before page indexes existed."""
    if not has_page_index(chunk_index_dir):
        return None
    return LexicalSearcher.open(page_index_dir(chunk_index_dir), private_copy=private_copy)


def page_docs(chunks: Iterable[dict]) -> list[LexicalDoc]:
    """One document per page: its title and all its chunk texts in chunk order. ``chunk_id``
    holds the page's doc_id, so a page search returns (doc_id, BM25) pairs."""
    first: dict[str, dict] = {}
    texts: dict[str, list[str]] = {}
    for row in sorted(chunks, key=lambda r: (r["doc_id"], r.get("ordinal") or 0, r["chunk_id"])):
        first.setdefault(row["doc_id"], row)
        texts.setdefault(row["doc_id"], []).append(row["text"])
    return [
        LexicalDoc(
            chunk_id=doc_id,
            doc_id=doc_id,
            project=row["project"],
            source=row["source"],
            page_kind=row["page_kind"],
            section_path="",
            title=row["title"],
            text="\n".join(texts[doc_id]),
        )
        for doc_id, row in first.items()
    ]
