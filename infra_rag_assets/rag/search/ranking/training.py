"""Fit a version's own page ranker: the serving searchers' candidates for labelled train
questions, their feature rows, then ``ranker.fit``.

Why per version: the features include raw dense cosines and BM25 ratios, whose scales move
with the embedding model (a domain-adapted model shifts the cosines) and the corpus, so
weights fitted on one version's candidates must not be reused on another's. Shared by the
``page_ranker`` asset and ``eval/train_ranker.py``; only the benchmark's *train* split is
ever passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..page_vectors import PageVectors
from ..retrieval_settings import HYBRID_PAGE
from .features import FEATURE_NAMES, GROUPS, PageCandidates, page_candidates
from .ranker import FitSettings, Ranker, fit

# Chunk candidates per side and pages asked: hybrid-page's own, so the ranker trains on what serves.
DEPTH, PAGE_DEPTH = HYBRID_PAGE.depth, HYBRID_PAGE.page_depth
CACHE_DEPTH = 100  # candidates cached per side by scripts that replay deeper settings


def candidate_lists(
    engine: Any, records: Sequence[Any], depth: int = DEPTH, progress: Callable[[int, int], None] | None = None
) -> list[dict]:
    """Per question: id, text, relevant pages, the question's vector and the dense, lexical and
    page-index candidates from the searchers and boosts ``hybrid-page`` serves with."""
    serving = engine.retriever(HYBRID_PAGE.name)
    if serving.page_searcher is None:
        raise ValueError(f"version {engine.version} has no page index: rebuild its lexical_index")
    boosts = dict(serving.config.boosts)
    out = []
    for start in range(0, len(records), 64):
        batch = records[start : start + 64]
        vectors = engine.embedder.encode([r.question for r in batch])
        out += [
            {
                "id": r.id,
                "question": r.question,
                "relevant": list(r.relevant),
                "vector": v,
                "dense": serving.vector_searcher.search(v, depth),
                "lexical": serving.lexical_searcher.search(r.question, depth, boosts=boosts),
                "pages": serving.page_searcher.search(r.question, max(depth, PAGE_DEPTH), boosts=boosts),
            }
            for r, v in zip(batch, vectors)
        ]
        if progress:
            progress(len(out), len(records))
    return out


def labelled_candidates(
    item: dict, catalog: dict, page_vectors: PageVectors | None = None
) -> tuple[PageCandidates, np.ndarray]:
    """One question's candidate pages (feature rows) and 0/1 labels (page is relevant)."""
    cosines = page_vectors.cosines(item["vector"]) if page_vectors is not None else None
    candidates = page_candidates(
        item["question"],
        item["dense"][:DEPTH],
        item["lexical"][:DEPTH],
        item["pages"][:PAGE_DEPTH],
        catalog,
        page_cosines=cosines,
    )
    relevant = set(item["relevant"])
    return candidates, np.array([float(p in relevant) for p in candidates.pages])


def fit_version_ranker(
    candidates: Sequence[dict],
    catalog: dict,
    feature_names: Sequence[str] = FEATURE_NAMES,
    settings: FitSettings | None = None,
    page_vectors: PageVectors | None = None,
) -> Ranker:
    """The ranker fitted on these questions' candidates (questions without candidates skipped).
    Without page vectors the centroid features are left out of the fit (they would be all zeros)."""
    if page_vectors is None:
        feature_names = [n for n in feature_names if n not in GROUPS["centroid"]]
    groups = [labelled_candidates(item, catalog, page_vectors) for item in candidates]
    usable = [(c.features, labels) for c, labels in groups if len(labels)]
    if not usable:
        raise ValueError("no train question has candidate pages in this version")
    found = sum(bool(labels.any()) for _, labels in usable)
    ranker = fit(usable, feature_names, settings)
    return Ranker(
        ranker.feature_names,
        ranker.mean,
        ranker.scale,
        ranker.weights,
        meta={**ranker.meta, "questions_with_relevant_candidate": found},
    )


def ranker_key(engine: Any, train_hash: str, records: Sequence[Any], settings: FitSettings) -> str:
    """The content address of a version's ranker: everything the fit reads, not the version name."""
    from ...index.config import stable_hash

    return stable_hash(
        {
            "train": train_hash,
            "catalog": engine.manifest.catalog_sha256,
            "model": engine.embedder.weights_hash,
            "questions": [r.id for r in records],
            "searchers": HYBRID_PAGE.config_hash(),
            "features": list(FEATURE_NAMES),
            "fit": settings.__dict__,
        },
        16,
    )


def fit_or_reuse(
    engine: Any,
    records: Sequence[Any],
    cache: Any,
    page_vectors: PageVectors,
    train: tuple[str, str],
    progress: Callable[[int, int], None] | None = None,
    settings: FitSettings | None = None,
) -> tuple[Ranker, bool]:
    """The version's ranker and whether it was reused: found again in ``cache`` (a
    ``DataHome.cache("ranker")``) by ``ranker_key``, else fitted on hybrid-page's candidates of
    ``records`` (queries embedded on one torch thread, as served) and stored there.
    ``train`` is the train split's (name, version hash)."""
    from ...operate.files import write_json_atomic
    from ..engine import one_torch_thread

    settings = settings or FitSettings()
    entry = f"{ranker_key(engine, train[1], records, settings)}.json"
    cached = cache.get(entry)
    if cached is not None:
        return Ranker.load(cached), True
    with one_torch_thread():
        candidates = candidate_lists(engine, records, progress=progress)
    fitted = fit_version_ranker(candidates, engine.catalog, settings=settings, page_vectors=page_vectors)
    meta = {**fitted.meta, "trained_on": train[0], "index_version": engine.version}
    ranker = Ranker(fitted.feature_names, fitted.mean, fitted.scale, fitted.weights, meta=meta)
    cache.put(entry, lambda path: write_json_atomic(path, ranker.to_dict()))
    return ranker, False
