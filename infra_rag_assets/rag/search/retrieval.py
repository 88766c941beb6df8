"""Hybrid retrieval: dense (LanceDB) + lexical (Tantivy) candidates, fused, optionally reranked.

Framework-free on purpose: the Dagster eval assets, the CLI and a future API all call the same
``Retriever.search``, so a number measured offline is the number users get.

Why the pieces look the way they do:

* Filters go to *both* searchers, which apply them before ranking, so a filtered query still
  gets ``k`` hits whenever ``k`` matching chunks exist (post-filtering a global top-k would not).
* Fusion (RRF or weighted min-max, plus optional page evidence and a per-page cap) is pure
  math in ``fusion.py``; ties break by chunk_id so runs are reproducible.
* The abstention floor looks at the dense cosine only: BM25 scores are unbounded and depend on
  corpus statistics, so they cannot carry an absolute "nothing here is relevant" threshold.
  The floor is the served version's calibrated one (``calibration.py``, resolved by the engine);
  ``answerability`` then refuses questions that name a word no chunk contains (``answerability.py``).
* The reranker is optional and may be missing on an offline machine; then the fused order is
  kept and the result says ``degraded`` instead of failing the query.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..index.lexical_store import LexicalSearcher
from ..index.page_index import open_page_searcher
from .answerability import DEFAULT_RULE, AnswerabilityRule, unanswerable_reason
from .fusion import Ranking, add_page_terms, cap_per_page, hybrid_page_scores, minmax, rrf_fuse, weighted_fuse
from .hits import Hit
from .packing import PackedContext, Passage, Source, pack_passages, render_sources
from .page_vectors import PageVectors
from .ranking.features import page_candidates
from .ranking.ranker import Ranker, fallback_reason, load_ranker, rank_chunks
from .retrieval_settings import (  # noqa: F401 - re-export
    DEFAULT_FLOOR,
    NAMED_CONFIGS,
    TUNED_BOOSTS,
    RetrievalSettings,
)

__all__ = [
    "NAMED_CONFIGS",
    "Hit",
    "PackedContext",
    "Passage",
    "RerankerUnavailable",
    "RetrievalSettings",
    "RetrievalResult",
    "Retriever",
    "Source",
    "catalog_from_rows",
    "load_cross_encoder",
    "minmax",
    "open_retriever",
    "pack_passages",
    "render_sources",
    "rrf_fuse",
    "weighted_fuse",
]


# --- results --------------------------------------------------------------------------------


@dataclass
class RetrievalResult:
    question: str
    hits: list[Hit]
    abstained: bool = False
    abstain_reason: str = ""
    degraded: bool = False
    degraded_reason: str = ""
    timings_ms: dict[str, float] = field(default_factory=dict)
    dense_ranking: Ranking = field(default_factory=list)
    lexical_ranking: Ranking = field(default_factory=list)
    config_hash: str = ""


class RerankerUnavailable(RuntimeError):
    """The cross-encoder could not be loaded (e.g. not in the offline HF cache)."""


def catalog_from_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict]:
    """chunk_id -> row, e.g. from ``warehouse.chunks_of(version).iter_rows(named=True)``."""
    return {row["chunk_id"]: dict(row) for row in rows}


def load_cross_encoder(model: str, device: str | None = None) -> Any:
    """A sentence-transformers CrossEncoder from local files only (never the network), on
    ``device`` (a setting; None: the query device, the CPU unless ``INFRA_RAG_DEVICE`` is set)."""
    from sentence_transformers import CrossEncoder

    from ..devices import for_queries, resolve
    from ..index.embedding import offline_models

    offline_models()
    hardware = for_queries() if device is None else resolve(device)
    return CrossEncoder(model, device=hardware.torch_device, local_files_only=True)


class Retriever:
    """Runs one RetrievalSettings over opened searchers; models load once per instance."""

    def __init__(
        self,
        *,
        catalog: Mapping[str, dict],
        config: RetrievalSettings,
        vector_searcher: Any = None,
        lexical_searcher: Any = None,
        reranker_loader: Callable[[str], Any] | None = None,
        page_searcher: Any = None,
        answerability_rule: AnswerabilityRule = DEFAULT_RULE,
        ranker: Ranker | None = None,
        page_vectors: PageVectors | None = None,
    ) -> None:
        if config.mode in ("dense", "hybrid") and vector_searcher is None:
            raise ValueError(f"mode {config.mode!r} needs a vector_searcher")
        if config.mode in ("lexical", "hybrid") and lexical_searcher is None:
            raise ValueError(f"mode {config.mode!r} needs a lexical_searcher")
        self.catalog, self.config = catalog, config
        self.vector_searcher, self.lexical_searcher = vector_searcher, lexical_searcher
        self.page_searcher = page_searcher  # None: the page term is skipped and the result degraded
        self.answerability_rule = answerability_rule  # used when config.answerability
        self._load_reranker = reranker_loader or load_cross_encoder
        self._reranker: Any = None
        self._reranker_error = ""  # a failed load is remembered, not retried per query
        self._ranker: Ranker | None = ranker  # fusion="learned": given (a version's own) or loaded on first use
        self.page_vectors = page_vectors  # the version's page centroids, for the ranker's centroid features

    def search(self, question: str, *, k: int = 10, filters: dict | None = None) -> RetrievalResult:
        if not question or not question.strip():
            raise ValueError("question is empty")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        cfg, timings = self.config, dict.fromkeys(("embed", "dense", "lexical", "page", "fuse", "rerank"), 0.0)
        started = time.perf_counter()
        depth = max(cfg.depth, k, cfg.rerank_depth if cfg.rerank else 0)
        dense, vector = self._dense(question, depth, filters, timings) if cfg.mode != "lexical" else ([], None)
        lexical = self._lexical(question, depth, filters, timings) if cfg.mode != "dense" else []
        result = RetrievalResult(
            question,
            [],
            timings_ms=timings,
            dense_ranking=dense,
            lexical_ranking=lexical,
            config_hash=cfg.config_hash(),
        )
        reason = self._abstain_reason(dense) or self._unanswerable(question, dense, lexical)
        if reason:
            result.abstained, result.abstain_reason = True, reason
        else:
            t0 = time.perf_counter()
            fused = self._fused(question, dense, lexical, result, vector)
            timings["fuse"] = _ms(t0) - timings["page"]
            result.hits = self._hits(fused, dense, lexical, result)
            hits = self._rerank(question, result.hits, result)
            result.hits = cap_per_page(hits, lambda h: h.doc_id, cfg.max_per_page)[:k]
        timings["total"] = _ms(started)
        return result

    def _dense(self, question: str, depth: int, filters: dict | None, timings: dict[str, float]) -> tuple[Ranking, Any]:
        t0 = time.perf_counter()
        vector = self.vector_searcher.embedder.encode([question])[0]
        timings["embed"], t1 = _ms(t0), time.perf_counter()
        ranking = self.vector_searcher.search(vector, depth, filters=filters)
        timings["dense"] = _ms(t1)
        return ranking, vector

    def _lexical(self, question: str, depth: int, filters: dict | None, timings: dict[str, float]) -> Ranking:
        t0 = time.perf_counter()
        boosts = dict(self.config.boosts) or None
        ranking = self.lexical_searcher.search(question, depth, filters=filters, boosts=boosts)
        timings["lexical"] = _ms(t0)
        return ranking

    def _abstain_reason(self, dense: Ranking) -> str:
        floor = self.config.floor
        if floor is None or self.config.mode == "lexical":
            return ""
        if not dense:
            return "no chunk matches the filters"
        best = dense[0][1]
        return f"best dense cosine {best:.3f} < floor {floor:.3f}" if best < floor else ""

    def _unanswerable(self, question: str, dense: Ranking, lexical: Ranking) -> str:
        if not self.config.answerability or self.lexical_searcher is None:
            return ""
        return unanswerable_reason(
            question,
            self.lexical_searcher,
            rule=self.answerability_rule,
            dense_pages=(self._page_of(c) for c, _ in dense[:1]),
            lexical_pages=(self._page_of(c) for c, _ in lexical[:1]),
        )

    def _fused(self, question: str, dense: Ranking, lexical: Ranking, result: RetrievalResult, vector: Any) -> Ranking:
        """The config's chunk order before the per-page cap: one side, RRF, hybrid-page's
        weighted fusion with page terms, or the learned ranker over hybrid-page's candidates."""
        cfg = self.config
        if cfg.mode != "hybrid":
            return self._with_page_terms(question, list(dense if cfg.mode == "dense" else lexical), dense, result)
        if cfg.fusion == "rrf":
            return self._with_page_terms(question, rrf_fuse([dense, lexical], cfg.rrf_k), dense, result)
        if cfg.fusion == "learned":
            return self._learned(question, dense, lexical, result, vector)
        return self._hybrid_page(question, dense, lexical, result)

    def _hybrid_page(self, question: str, dense: Ranking, lexical: Ranking, result: RetrievalResult) -> Ranking:
        """``fusion.hybrid_page_scores`` with this config's weights; the page index is asked only
        when a page term can use it and there is a candidate to add it to."""
        cfg = self.config
        asks_pages = bool(dense or lexical) and cfg.uses_page_index and bool(cfg.page_weight or cfg.page_dense_weight)
        page_lexical = self._page_lexical(question, result) if asks_pages else []
        return hybrid_page_scores(dense, lexical, page_lexical, self._page_of, cfg.fusion_settings)

    def _with_page_terms(self, question: str, fused: Ranking, dense: Ranking, result: RetrievalResult) -> Ranking:
        """Page terms over RRF or one side's order (hybrid-page's own fusion is ``_hybrid_page``)."""
        cfg = self.config
        if not (cfg.page_weight or cfg.page_dense_weight) or not fused:
            return fused
        page_lexical = self._page_lexical(question, result) if cfg.uses_page_index else []
        return add_page_terms(
            fused,
            self._page_of,
            page_lexical=page_lexical,
            page_weight=cfg.page_weight,
            dense=dense,
            page_dense_weight=cfg.page_dense_weight,
        )

    def _page_lexical(self, question: str, result: RetrievalResult) -> Ranking:
        """The page index's (page id, BM25) ranking; none (and degraded) for versions without one."""
        if self.page_searcher is None:
            _degrade(result, "no page index for this version; page term skipped")
            return []
        t0 = time.perf_counter()
        # Unfiltered on purpose: it only re-weights candidates that already passed the filters.
        ranking = self.page_searcher.search(question, self.config.page_depth, boosts=dict(self.config.boosts) or None)
        result.timings_ms["page"] = _ms(t0)
        return ranking

    def _learned(
        self, question: str, dense: Ranking, lexical: Ranking, result: RetrievalResult, vector: Any
    ) -> Ranking:
        """Candidate pages scored by the learned ranker; each page's chunks in hybrid-page order.
        A ranker that cannot rank here (``fallback_reason``) serves hybrid-page's scores, marked
        degraded; the config's own per-page cap still applies."""
        cfg = self.config
        if self._ranker is None:
            self._ranker = load_ranker(cfg.ranker)
        ranker, page_vectors = self._ranker, self.page_vectors if vector is not None else None
        why = fallback_reason(ranker, page_vectors)
        if why:
            _degrade(result, f"{why}; hybrid-page order")
            return self._hybrid_page(question, dense, lexical, result)
        page_cosines = page_vectors.cosines(vector) if ranker.needs_page_vectors and page_vectors is not None else None
        candidates = page_candidates(
            question,
            dense,
            lexical,
            self._page_lexical(question, result),
            self.catalog,
            cfg.fusion_settings,
            page_cosines,
        )
        return rank_chunks(candidates, ranker, cfg.max_per_page)

    def _page_of(self, chunk_id: str) -> str | None:
        row = self.catalog.get(chunk_id)
        return row.get("doc_id") if row else None

    def _hits(self, fused: Ranking, dense: Ranking, lexical: Ranking, result: RetrievalResult) -> list[Hit]:
        d_rank = {cid: (r, s) for r, (cid, s) in enumerate(dense, 1)}
        l_rank = {cid: (r, s) for r, (cid, s) in enumerate(lexical, 1)}
        hits, missing = [], 0
        for cid, score in fused:
            row = self.catalog.get(cid)
            if row is None:
                missing += 1
                continue
            dr, ds = d_rank.get(cid, (None, None))
            lr, ls = l_rank.get(cid, (None, None))
            hits.append(_hit(row, cid, score, ds, ls, dr, lr))
        if missing:  # catalog and index disagree: probably built for different versions
            _degrade(result, f"{missing} candidate(s) missing from the chunk catalog")
        return hits

    def _rerank(self, question: str, hits: list[Hit], result: RetrievalResult) -> list[Hit]:
        if not self.config.rerank or not hits:
            return hits
        t0 = time.perf_counter()
        head, tail = hits[: self.config.rerank_depth], hits[self.config.rerank_depth :]
        try:
            model = self._reranker_model()
            pairs = [(question, f"{h.title} › {h.section}\n{h.text}") for h in head]
            scores = [float(s) for s in model.predict(pairs)]
            if len(scores) != len(head):
                raise ValueError(f"{len(scores)} scores for {len(head)} passages")
        except Exception as exc:  # noqa: BLE001 - any reranker failure keeps the fused order
            why = str(exc) if isinstance(exc, RerankerUnavailable) else f"rerank failed: {_one_line(exc)}"
            _degrade(result, f"{why}; fused order kept")
            return hits
        finally:
            result.timings_ms["rerank"] = _ms(t0)
        for hit, score in zip(head, scores):
            hit.rerank_score = score
        order = {h.chunk_id: i for i, h in enumerate(head)}  # stable tie-break: fused position
        # Every head hit got its rerank_score just above.
        return sorted(head, key=lambda h: (-cast(float, h.rerank_score), order[h.chunk_id])) + tail

    def _reranker_model(self) -> Any:
        if self._reranker is None:
            if self._reranker_error:
                raise RerankerUnavailable(self._reranker_error)
            try:
                self._reranker = self._load_reranker(self.config.rerank_model)
            except Exception as exc:  # noqa: BLE001 - reported as degraded, never fatal
                self._reranker_error = f"reranker {self.config.rerank_model} unavailable: {_one_line(exc)}"
                raise RerankerUnavailable(self._reranker_error) from None
        return self._reranker


def _hit(row: Mapping[str, Any], cid: str, score: float, ds, ls, dr, lr) -> Hit:
    """A Hit from a catalog row; NULL columns become "" / 0 / [] so callers never see None."""
    text = {
        key: row.get(key) or ""
        for key in ("doc_id", "project", "source", "page_id", "url", "title", "section_path", "text", "page_kind")
    }
    return Hit(
        chunk_id=cid,
        doc_id=text["doc_id"],
        project=text["project"],
        source=text["source"],
        page_id=text["page_id"],
        url=text["url"],
        title=text["title"],
        section=text["section_path"],
        text=text["text"],
        score=float(score),
        dense_score=ds,
        lexical_score=ls,
        dense_rank=dr,
        lexical_rank=lr,
        pages=[int(p) for p in (row.get("pages") or [])],
        start_char=int(row.get("start_char") or 0),
        end_char=int(row.get("end_char") or 0),
        page_kind=text["page_kind"],
    )


def _degrade(result: RetrievalResult, reason: str) -> None:
    result.degraded = True
    result.degraded_reason = "; ".join(r for r in (result.degraded_reason, reason) if r)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:200]}"


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000.0, 3)


def open_retriever(
    db_uri: str,
    tantivy_dir: Path,
    catalog: Mapping[str, dict],
    embedder: Any,
    config: RetrievalSettings,
    *,
    version: str | None = None,
    reranker_loader: Callable[[str], Any] | None = None,
) -> Retriever:
    """Open the searchers ``config.mode`` needs. The index version defaults to the Tantivy
    directory's name (``<home>/tantivy/<version>``). ModelMismatch propagates unchanged."""
    from .vector_search import VectorSearcher  # lazily: lancedb is only needed once a searcher opens

    version = version or Path(tantivy_dir).name
    vector = VectorSearcher.open(db_uri, version, embedder) if config.mode != "lexical" else None
    lexical = LexicalSearcher.open(Path(tantivy_dir)) if config.mode != "dense" else None
    pages = open_page_searcher(Path(tantivy_dir)) if config.uses_page_index else None
    return Retriever(
        catalog=catalog,
        config=config,
        vector_searcher=vector,
        lexical_searcher=lexical,
        reranker_loader=reranker_loader,
        page_searcher=pages,
    )
