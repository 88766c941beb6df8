"""A retrieved chunk: what retrieval returns, packing cites and the API serializes.

Its own module so that packing (which retrieval re-exports) needs nothing from retrieval.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Hit:
    """One retrieved chunk with everything needed to cite it and to explain its rank."""

    chunk_id: str
    doc_id: str
    project: str
    source: str
    page_id: str
    url: str
    title: str
    section: str
    text: str
    score: float  # the fusion score (cosine / BM25 alone in single-side modes)
    dense_score: float | None
    lexical_score: float | None
    dense_rank: int | None  # 1-based rank in the dense candidate list
    lexical_rank: int | None
    pages: list[int]
    start_char: int
    end_char: int
    page_kind: str
    rerank_score: float | None = None  # cross-encoder score when reranked; decides the order
