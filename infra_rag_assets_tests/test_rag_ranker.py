"""Learned ranker: features by hand, fit on a tiny synthetic set, ordering, JSON round-trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from infra_rag_assets.rag.search.ranking.features import (
    FEATURE_NAMES,
    GROUPS,
    for_contributors,
    is_definitional,
    page_candidates,
    page_type,
)
from infra_rag_assets.rag.search.ranking.ranker import FitSettings, Ranker, fit, rank_chunks

CATALOG = {
    "c1": {
        "doc_id": "k:concepts_scheduling_pod-priority",
        "title": "Pod Priority and Preemption",
        "section_path": "Pod Priority and Preemption › PriorityClass",
        "page_kind": "concept",
        "url": "https://kubernetes.io/docs/concepts/scheduling/pod-priority/",
    },
    "c2": {
        "doc_id": "k:concepts_scheduling_pod-priority",
        "title": "Pod Priority and Preemption",
        "section_path": "Pod Priority and Preemption › Preemption",
        "page_kind": "concept",
        "url": "https://kubernetes.io/docs/concepts/scheduling/pod-priority/",
    },
    "r1": {
        "doc_id": "k:reference_kubernetes-api_priority-class-v1",
        "title": "PriorityClass",
        "section_path": "PriorityClass",
        "page_kind": "reference",
        "url": "https://kubernetes.io/docs/reference/kubernetes-api/priority-class-v1/",
    },
    "g1": {
        "doc_id": "k:reference_glossary_priority",
        "title": "Pod Priority",
        "section_path": "Pod Priority",
        "page_kind": "glossary",
        "url": "https://kubernetes.io/docs/reference/glossary/",
    },
    "p1": {
        "doc_id": "k:concepts_scheduling",
        "title": "Scheduling",
        "section_path": "Scheduling",
        "page_kind": "concept",
        "url": "https://kubernetes.io/docs/concepts/scheduling/",
    },
}
DENSE = [("r1", 0.8), ("c1", 0.7), ("g1", 0.6), ("p1", 0.5)]
LEXICAL = [("c2", 12.0), ("r1", 10.0), ("c1", 4.0)]
PAGES = [("k:concepts_scheduling_pod-priority", 9.0), ("k:reference_kubernetes-api_priority-class-v1", 3.0)]
QUESTION = "What is a PriorityClass?"


def col(name: str) -> int:
    return FEATURE_NAMES.index(name)


@pytest.mark.unit
def test_feature_names_are_grouped_and_unique():
    assert len(FEATURE_NAMES) == len(set(FEATURE_NAMES)) == sum(map(len, GROUPS.values()))


@pytest.mark.unit
def test_definitional_questions():
    assert is_definitional("What is a PriorityClass?") and is_definitional("what are taints")
    assert is_definitional("What does the kube-proxy do?") and is_definitional("Define a Pod")
    assert not is_definitional("How do I drain a node?") and not is_definitional("What happens when a pod dies?")


@pytest.mark.unit
def test_page_types():
    assert page_type(CATALOG["g1"]) == "glossary" and page_type(CATALOG["r1"]) == "api"
    assert page_type(CATALOG["c1"]) == "concept" and page_type({"page_kind": "guide", "url": ""}) == "other"


@pytest.mark.unit
def test_pages_for_contributors_across_projects():
    assert for_contributors({"url": "https://kubernetes.io/docs/contribute/style/#x", "page_kind": "guide"})
    assert for_contributors({"url": "https://argo-cd.readthedocs.io/en/stable/developer-guide/running-locally/"})
    assert for_contributors({"url": "https://argo-cd.readthedocs.io/en/stable/CONTRIBUTING/"})
    assert for_contributors({"url": "", "page_kind": "proposal"})
    assert not for_contributors({"url": "https://argo-cd.readthedocs.io/en/stable/user-guide/auto_sync/"})
    assert not for_contributors({"url": "https://kubernetes.io/docs/concepts/contributors-guide-is-not-a-path/"})
    assert not for_contributors(CATALOG["c1"])


@pytest.mark.unit
def test_features_by_hand():
    cands = page_candidates(QUESTION, DENSE, LEXICAL, PAGES, CATALOG)
    concept, api, glossary, parent = (
        cands.pages.index(p)
        for p in (
            "k:concepts_scheduling_pod-priority",
            "k:reference_kubernetes-api_priority-class-v1",
            "k:reference_glossary_priority",
            "k:concepts_scheduling",
        )
    )
    x = cands.features
    assert x.shape == (4, len(FEATURE_NAMES))
    assert set(cands.chunks[cands.pages[concept]]) == {"c1", "c2"}
    assert x[api, col("d_cos")] == pytest.approx(0.8) and x[api, col("d_rrank")] == 1.0
    assert x[concept, col("l_count")] == pytest.approx(np.log1p(2)) and x[concept, col("l_ratio")] == 1.0
    assert x[concept, col("p_ratio")] == 1.0 and x[glossary, col("p_rrank")] == 0.0
    assert x[api, col("both")] == 1.0 and x[glossary, col("both")] == 0.0
    # The API page is titled exactly the question's subject; the concept page only mentions it.
    assert x[api, col("title_in_q")] == 1.0 and x[api, col("def_title_in_q")] == 1.0
    assert x[concept, col("title_in_q")] == 0.0 and x[concept, col("head_cover")] == 1.0
    assert x[api, col("t_api")] == 1.0 and x[api, col("def_api")] == 1.0 and x[glossary, col("t_glossary")] == 1.0
    assert x[parent, col("children")] == pytest.approx(np.log1p(1)) and x[concept, col("has_parent")] == 1.0
    assert np.all(x[:, col("def_q")] == 1.0) and np.all(x[:, col("t_contrib")] == 0.0)


@pytest.mark.unit
def test_centroid_features_by_hand():
    cosines = {
        "k:concepts_scheduling_pod-priority": 0.9,
        "k:reference_kubernetes-api_priority-class-v1": 0.5,
        "k:reference_glossary_priority": 0.3,
    }  # the parent page has no vector: cosine 0
    cands = page_candidates(QUESTION, DENSE, LEXICAL, PAGES, CATALOG, page_cosines=cosines)
    x = {page: dict(zip(FEATURE_NAMES, row)) for page, row in zip(cands.pages, cands.features)}
    concept, api = x["k:concepts_scheduling_pod-priority"], x["k:reference_kubernetes-api_priority-class-v1"]
    glossary, parent = x["k:reference_glossary_priority"], x["k:concepts_scheduling"]
    assert [concept["c_cos"], api["c_cos"], glossary["c_cos"], parent["c_cos"]] == [0.9, 0.5, 0.3, 0.0]
    assert concept["c_mm"] == 1.0 and api["c_mm"] == pytest.approx(0.5 / 0.9) and parent["c_mm"] == 0.0
    assert [concept["c_rrank"], api["c_rrank"], glossary["c_rrank"], parent["c_rrank"]] == [1.0, 0.5, 1 / 3, 0.25]
    without = page_candidates(QUESTION, DENSE, LEXICAL, PAGES, CATALOG)
    centroid = [col(n) for n in GROUPS["centroid"]]
    assert not without.features[:, centroid].any()
    other = [i for i in range(len(FEATURE_NAMES)) if i not in centroid]
    assert np.array_equal(without.features[:, other], cands.features[:, other])  # nothing else moves


@pytest.mark.unit
def test_no_candidates():
    cands = page_candidates(QUESTION, [], [], [], CATALOG)
    assert cands.pages == [] and cands.features.shape == (0, len(FEATURE_NAMES))


def synthetic(n: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Questions whose relevant page is the one with the highest ``l_mm`` minus ``t_api``."""
    rng = np.random.default_rng(seed)
    groups = []
    for _ in range(n):
        x = rng.random((8, len(FEATURE_NAMES)))
        x[:, col("t_api")] = rng.integers(0, 2, 8)
        y = np.zeros(8)
        y[int(np.argmax(x[:, col("l_mm")] - x[:, col("t_api")]))] = 1.0
        groups.append((x, y))
    return groups


@pytest.mark.unit
@pytest.mark.parametrize("loss", ["listwise", "pairwise"])
def test_fit_learns_the_signal_deterministically(loss):
    train, test = synthetic(200), synthetic(100, seed=1)
    settings = FitSettings(steps=200, loss=loss)
    ranker = fit(train, settings=settings)
    assert ranker == fit(train, settings=settings)  # same data, same weights
    w = dict(zip(ranker.feature_names, ranker.weights))
    assert w["l_mm"] > 0 > w["t_api"] and abs(w["d_cos"]) < w["l_mm"] / 3
    top1 = np.mean([y[ranker.order(x)[0]] for x, y in test])
    one_signal = np.mean([y[int(np.argmax(x[:, col("l_mm")]))] for x, y in test])  # 0.48 on this draw
    # 200 questions against ~40 noise columns: well above either signal alone, short of the oracle's 1.0
    assert top1 > 0.7 and top1 > one_signal + 0.2


@pytest.mark.unit
def test_listwise_gradient_matches_its_loss():
    """The listwise loss's analytic gradient against central differences (two relevant pages in
    one question, a question without a relevant page that must be left out)."""
    from infra_rag_assets.rag.search.ranking.ranker import _Listwise

    rng = np.random.default_rng(3)
    groups = [
        (rng.normal(size=(6, 4)), np.array([0, 1, 0, 0, 0, 0.0])),
        (rng.normal(size=(5, 4)), np.array([1, 0, 0, 1, 0.0])),
        (rng.normal(size=(4, 4)), np.zeros(4)),
    ]
    objective, w = _Listwise(groups), rng.normal(size=4)
    assert objective.meta == {"candidates": 11, "questions_used": 2}
    numeric = [(objective.loss(w + e) - objective.loss(w - e)) / 2e-6 for e in np.eye(4) * 1e-6]
    assert np.allclose(objective.gradient(w), numeric, atol=1e-6)
    assert objective.loss(np.zeros(4)) == pytest.approx((np.log(6) + np.log(5 / 2)) / 2)


@pytest.mark.unit
def test_unknown_loss_is_refused():
    with pytest.raises(ValueError, match="unknown ranker loss"):
        FitSettings(loss="pointwise")


@pytest.mark.unit
def test_fit_on_a_feature_subset_and_apply_order():
    ranker = fit(synthetic(100), ["l_mm", "t_api"], FitSettings(steps=100))
    assert ranker.feature_names == ("l_mm", "t_api")
    x = np.zeros((3, len(FEATURE_NAMES)))
    x[:, col("l_mm")] = [0.5, 0.55, 0.9]
    x[:, col("t_api")] = [0, 1, 0]
    assert ranker.order(x) == [2, 0, 1]


@pytest.mark.unit
def test_rank_chunks_groups_pages_in_learned_order():
    cands = page_candidates(QUESTION, DENSE, LEXICAL, PAGES, CATALOG)
    ranker = Ranker(("p_ratio",), (0.0,), (1.0,), (1.0,))
    ranked = [c for c, _ in rank_chunks(cands, ranker, max_per_page=1)]
    assert ranked[0] in ("c1", "c2") and ranked[1] == "r1" and sorted(ranked) == ["c1", "c2", "g1", "p1", "r1"]
    assert ranked[-1] in ("c1", "c2")  # the page's second chunk goes behind every page's first
    both = [c for c, _ in rank_chunks(cands, ranker, max_per_page=2)]
    assert sorted(both[:2]) == ["c1", "c2"] and both[2] == "r1"


@pytest.mark.unit
def test_save_load_round_trip(tmp_path):
    ranker = fit(synthetic(50), ["l_mm", "t_api", "d_cos"], FitSettings(steps=50))
    path = tmp_path / "ranker.json"
    ranker.save(path)
    again = Ranker.load(path)
    assert again == ranker and again.hash == ranker.hash and again.meta["questions"] == 50
    data = json.loads(path.read_text())
    data["weights"][0] += 1.0
    with pytest.raises(ValueError, match="hash"):
        Ranker.from_dict(data)
    with pytest.raises(ValueError, match="unknown features"):
        Ranker(("nope",), (0.0,), (1.0,), (1.0,))


@pytest.mark.build
def test_learned_fusion_through_the_retriever(built_index, tmp_path):
    """On the fixture index: a ranker that weights only the hybrid-page score returns pages in
    hybrid-page's order, each page's chunks together and capped."""
    import dataclasses

    from infra_rag_assets.defs.resources import DataHomeResource, EmbedderResource
    from infra_rag_assets.rag.evaluate.metrics import page_ranking
    from infra_rag_assets.rag.search.retrieval import NAMED_CONFIGS, catalog_from_rows, open_retriever

    store, version = DataHomeResource(home=str(built_index["home"])), built_index["version"]
    frame = store.data_home().warehouse().frame("SELECT * FROM chunks WHERE index_version = ?", [version])
    catalog = catalog_from_rows(frame.iter_rows(named=True))
    embedder = EmbedderResource().embedder("all-MiniLM-L6-v2")
    path = tmp_path / "ranker.json"
    Ranker(("hp_score",), (0.0,), (1.0,), (1.0,)).save(path)
    page = NAMED_CONFIGS["hybrid-page"]
    learned = dataclasses.replace(page, name="learned", fusion="learned", ranker=str(path))
    question = "How do I roll back a Deployment to a previous revision?"
    runs = [
        open_retriever(
            store.data_home().vectors_uri(), store.data_home().version(version).tantivy, catalog, embedder, c
        ).search(question, k=6)
        for c in (page, learned)
    ]
    assert not runs[1].degraded and runs[1].timings_ms["page"] > 0
    pages = [page_ranking(h.doc_id for h in run.hits) for run in runs]
    assert pages[1][:3] == pages[0][:3]
    docs = [h.doc_id for h in runs[1].hits]
    assert docs[0] == docs[1] == "kubernetes:concepts_workloads_controllers_deployment"
    head = docs[: len(set(docs)) * 2]  # a small corpus runs out of pages: overflow chunks come last
    assert all(head.count(p) <= 2 for p in head)
    assert learned.config_hash() != page.config_hash()
    with pytest.raises(ValueError, match="needs a ranker"):
        dataclasses.replace(page, fusion="learned")


@pytest.mark.build
def test_a_ranker_with_centroid_features_needs_page_vectors(built_index, tmp_path):
    """Without the version's page vectors such a ranker cannot rank: hybrid-page's order, marked
    degraded. With them, the page whose centroid is nearest the question comes first."""
    import dataclasses

    from infra_rag_assets.defs.resources import DataHomeResource, EmbedderResource
    from infra_rag_assets.rag.search.page_vectors import PageVectors
    from infra_rag_assets.rag.search.retrieval import NAMED_CONFIGS, catalog_from_rows, open_retriever

    store, version = DataHomeResource(home=str(built_index["home"])), built_index["version"]
    frame = store.data_home().warehouse().frame("SELECT * FROM chunks WHERE index_version = ?", [version])
    catalog = catalog_from_rows(frame.iter_rows(named=True))
    embedder = EmbedderResource().embedder("all-MiniLM-L6-v2")
    ranker = Ranker(("c_cos",), (0.0,), (1.0,), (1.0,))
    assert ranker.needs_page_vectors and not Ranker(("hp_score",), (0.0,), (1.0,), (1.0,)).needs_page_vectors
    ranker.save(tmp_path / "ranker.json")
    page = NAMED_CONFIGS["hybrid-page"]
    learned = dataclasses.replace(page, name="learned", fusion="learned", ranker=str(tmp_path / "ranker.json"))
    question = "How does Prometheus discover scrape targets?"

    def open_one(config):
        home = store.data_home()
        return open_retriever(home.vectors_uri(), home.version(version).tantivy, catalog, embedder, config)

    baseline, blind = open_one(page).search(question, k=6), open_one(learned).search(question, k=6)
    assert blind.degraded and "page vectors" in blind.degraded_reason
    assert [h.chunk_id for h in blind.hits] == [h.chunk_id for h in baseline.hits]

    pages = PageVectors.of_version(store.data_home().vectors_uri(), version, catalog)
    from infra_rag_assets.rag.index.vector_store import iter_vectors, read_vectors

    batches = list(iter_vectors(store.data_home().vectors_uri(), version, batch_rows=7))  # streamed, as built
    assert len(batches) > 1 and all(len(ids) <= 7 for ids, _ in batches)
    assert sum(len(ids) for ids, _ in batches) == len(read_vectors(store.data_home().vectors_uri(), version))
    seeing = open_one(learned)
    seeing.page_vectors = pages
    result = seeing.search(question, k=6)
    assert not result.degraded
    cosines = pages.cosines(embedder.encode([question])[0])
    candidates = {catalog[c]["doc_id"] for c, _ in result.dense_ranking + result.lexical_ranking}
    assert result.hits[0].doc_id == max(candidates, key=cosines.__getitem__)


@pytest.mark.unit
def test_shipped_base_model_ranker_loads():
    from infra_rag_assets.rag.search.ranking.ranker import load_ranker
    from infra_rag_assets.rag.search.retrieval_settings import LEARNED_RANKER, NAMED_CONFIGS, VERSION_RANKER

    ranker = load_ranker(LEARNED_RANKER)
    assert set(ranker.feature_names) <= set(FEATURE_NAMES) and ranker.meta["trained_on"] == "k8s_bench_train"
    config = NAMED_CONFIGS["hybrid-learned"]  # serves each version's own ranker (page_ranker asset)
    assert config.fusion == "learned" and config.uses_page_index and config.ranker == VERSION_RANKER
