"""Fusion math, pure functions over (chunk_id, score) rankings; no index, no model.

Chunk level: RRF (rank-only, immune to score scales) or weighted min-max (keeps score gaps,
tunable by ``alpha``); both break ties by chunk_id so runs are reproducible.

Page level: users (and the benchmarks) ask for *pages*; a chunk scored alone misses that the
rest of its page is about the question too. Measured on the k8s eval split with the
domain-adapted model (README "Retrieval tuning", eval/sweep_fusion.py), adding to each chunk's
fused score

* ``page_weight`` x the min-max-scaled BM25 score of its whole page (a page-level Tantivy
  index: title + every chunk of the page), and
* ``page_dense_weight`` x the min-max-scaled best dense cosine of any candidate chunk of
  its page,

lifted MRR@10 0.818 -> 0.836, and capping each page at 2 chunks of the returned list (so ten
hits name at least five pages instead of ~4.6) lifted hit@5 0.907 -> 0.914.

``hybrid_page_scores`` is that pipeline (weighted fusion + both page terms) written once:
retrieval serves it, the learned ranker's features start from it and ``eval/sweep_fusion.py``
replays it, so the three cannot drift apart. Its numbers live in
``NAMED_CONFIGS["hybrid-page"]`` (``retrieval_settings.py``), not here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

Ranking = list[tuple[str, float]]
T = TypeVar("T")


# --- chunk fusion -------------------------------------------------------------------------


def _ordered(scores: Mapping[str, float]) -> Ranking:
    """Best first; equal scores ordered by chunk_id so every run returns the same list."""
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def rrf_fuse(rankings: Sequence[Sequence[tuple[str, float]]], k: int) -> Ranking:
    """Reciprocal rank fusion: sum of ``1 / (k + rank)`` with 1-based ranks; scores ignored."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        seen: set[str] = set()
        for rank, (cid, _score) in enumerate(ranking, 1):
            if cid not in seen:  # a duplicate within one list must not vote twice
                seen.add(cid)
                fused[cid] = fused.get(cid, 0.0) + 1.0 / (k + rank)
    return _ordered(fused)


def minmax(scores: Sequence[tuple[str, float]] | Mapping[str, float]) -> dict[str, float]:
    """Scale to [0, 1]; a list whose scores are all equal maps to 1.0 (all are its best)."""
    items: dict[str, float] = {}
    for cid, score in scores.items() if isinstance(scores, Mapping) else scores:
        items.setdefault(cid, score)  # a repeated id keeps its first (best-ranked) score
    if not items:
        return {}
    lo, hi = min(items.values()), max(items.values())
    return {cid: (s - lo) / (hi - lo) if hi > lo else 1.0 for cid, s in items.items()}


def weighted_fuse(dense: Sequence[tuple[str, float]], lexical: Sequence[tuple[str, float]], alpha: float) -> Ranking:
    """``alpha * dense + (1 - alpha) * lexical`` after per-list min-max; absent side counts 0."""
    d, lex = minmax(dense), minmax(lexical)
    return _ordered({cid: alpha * d.get(cid, 0.0) + (1 - alpha) * lex.get(cid, 0.0) for cid in {*d, *lex}})


# --- page evidence --------------------------------------------------------------------------


def best_per_page(ranking: Sequence[tuple[str, float]], page_of: Callable[[str], str | None]) -> dict[str, float]:
    """Highest score of any chunk of each page in ``ranking`` (chunks without a page are skipped)."""
    best: dict[str, float] = {}
    for cid, score in ranking:
        page = page_of(cid)
        if page is not None and score > best.get(page, float("-inf")):
            best[page] = score
    return best


def add_page_terms(
    fused: Sequence[tuple[str, float]],
    page_of: Callable[[str], str | None],
    *,
    page_lexical: Sequence[tuple[str, float]] = (),
    page_weight: float = 0.0,
    dense: Sequence[tuple[str, float]] = (),
    page_dense_weight: float = 0.0,
) -> Ranking:
    """``fused + page_weight * page_bm25' + page_dense_weight * page_best_cosine'`` per chunk.

    ``page_lexical`` is a (page id, BM25) ranking from the page index; both page signals are
    min-max scaled over the pages they cover, and a page absent from a signal gets 0 from it.
    Order: best first, ties by chunk id (as every fusion here)."""
    lexical = minmax(page_lexical) if page_weight else {}
    cosine = minmax(best_per_page(dense, page_of)) if page_dense_weight else {}
    scored: dict[str, float] = {}
    for cid, score in fused:
        page = page_of(cid)
        # A chunk without a page (None) is in neither page signal: 0 from both.
        page_bm25 = lexical.get(page, 0.0) if page is not None else 0.0
        page_cosine = cosine.get(page, 0.0) if page is not None else 0.0
        scored[cid] = score + page_weight * page_bm25 + page_dense_weight * page_cosine
    return _ordered(scored)


def cap_per_page(items: Sequence[T], page_of: Callable[[T], str], max_per_page: int) -> list[T]:
    """Keep the order, but move each page's chunks beyond the first ``max_per_page`` behind all
    others (still in order), so a top-k list names more distinct pages. 0 = no cap."""
    if max_per_page <= 0:
        return list(items)
    seen: dict[str, int] = {}
    head: list[T] = []
    overflow: list[T] = []
    for item in items:
        page = page_of(item)
        seen[page] = seen.get(page, 0) + 1
        (head if seen[page] <= max_per_page else overflow).append(item)
    return head + overflow


# --- hybrid-page --------------------------------------------------------------------------


@dataclass(frozen=True)
class FusionSettings:
    """The weights of ``hybrid_page_scores``; serving's are ``RetrievalSettings.fusion_settings``
    of ``hybrid-page`` (no defaults here, so the numbers have one home)."""

    alpha: float
    page_weight: float
    page_dense_weight: float


def hybrid_page_scores(
    dense: Sequence[tuple[str, float]],
    lexical: Sequence[tuple[str, float]],
    page_lexical: Sequence[tuple[str, float]],
    page_of: Callable[[str], str | None],
    fusion: FusionSettings,
) -> Ranking:
    """Every candidate chunk's ``hybrid-page`` score (before the per-page cap), best first:
    ``weighted_fuse`` of the two chunk sides, then ``add_page_terms``."""
    fused = weighted_fuse(dense, lexical, fusion.alpha)
    return add_page_terms(
        fused,
        page_of,
        page_lexical=page_lexical,
        page_weight=fusion.page_weight,
        dense=dense,
        page_dense_weight=fusion.page_dense_weight,
    )
