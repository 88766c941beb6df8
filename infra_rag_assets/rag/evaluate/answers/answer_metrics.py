"""Per-answer checks that need no model: correctness against the reference answer, citation
validity, cited-page precision and cost (the judge's TRACe scores are ``rag/judge/trace.py``).

Correctness is token F1 and token recall against the reference answer (``rag/answer/overlap.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...answer.records import Citation

# USD per million tokens by model-id prefix (input, output), the Anthropic list price on
# 2026-12-03; a model not listed has no cost rather than a guessed one.
PRICES_PER_MTOK = {"claude-sonnet-4": (3.0, 15.0), "claude-opus-4": (15.0, 75.0), "claude-haiku-4": (1.0, 5.0)}


@dataclass(frozen=True)
class ChunkRecord:
    doc_id: str
    url: str
    text: str
    start_char: int


def page_of(url: str) -> str:
    return url.split("#", 1)[0]


def citation_problem(c: Citation, chunks: Mapping[str, ChunkRecord], docs: Mapping[str, str]) -> str:
    """Why a citation does not resolve to exact offsets of a chunk of this version and its
    page, or '' when it does."""
    chunk = chunks.get(c.chunk_id)
    if chunk is None:
        return f"chunk {c.chunk_id} is not in this version"
    if c.doc_id != chunk.doc_id or page_of(c.url) != page_of(chunk.url):
        return f"chunk {c.chunk_id} belongs to {chunk.doc_id}, not {c.doc_id}"
    if not c.cited_text.strip() or chunk.text[c.chunk_start : c.chunk_end] != c.cited_text:
        return f"chunk offsets {c.chunk_start}:{c.chunk_end} do not hold the cited text"
    if (c.doc_start, c.doc_end) != (chunk.start_char + c.chunk_start, chunk.start_char + c.chunk_end):
        return "document offsets do not match the chunk offsets"
    if docs.get(chunk.doc_id, "")[c.doc_start : c.doc_end] != c.cited_text:
        return f"page {chunk.doc_id} does not hold the cited text at {c.doc_start}:{c.doc_end}"
    return ""


def citations_valid(
    citations: Sequence[Citation], chunks: Mapping[str, ChunkRecord], docs: Mapping[str, str]
) -> tuple[bool, list[str]]:
    """An answer's citations are valid when it has some and every one resolves exactly."""
    if not citations:
        return False, ["no citation"]
    problems = [p for p in (citation_problem(c, chunks, docs) for c in citations) if p]
    return not problems, problems


def cited_page_precision(citations: Sequence[Citation], relevant: Sequence[str]) -> float | None:
    """Share of distinct cited pages that the benchmark labels relevant."""
    pages = {c.doc_id for c in citations}
    return len(pages & set(relevant)) / len(pages) if pages and relevant else None


def cost_usd(model: str, usage: Mapping[str, Any]) -> float | None:
    """List-price cost of one Claude call from its usage, or None for an unpriced model."""
    price = next((p for prefix, p in PRICES_PER_MTOK.items() if model.startswith(prefix)), None)
    if price is None or not usage:
        return None
    tokens_in = sum(float(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens"))
    tokens_in += 0.1 * float(usage.get("cache_read_input_tokens") or 0)  # cache reads bill at a tenth
    return (tokens_in * price[0] + int(usage.get("output_tokens") or 0) * price[1]) / 1e6
