"""One QueryEngine shared by many threads (as the service's worker threads share it) gives
exactly the results it gives sequentially: no tokenizer "Already borrowed", no mixed-up
rankings, for every mode."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from infra_rag_assets.rag.engine import QueryEngine
from infra_rag_assets.rag.home import DataHome

QUESTIONS = ["How does maxSurge limit pods during a rollout?", "basic auth for the Prometheus UI",
             "What is an Argo CD Application?", "What is a Pod?", "EndpointSlice address types",
             "supply chain attestation", "roll back a Deployment", "kube-apiserver flags"]


def _signature(engine: QueryEngine, question: str, config: str) -> tuple:
    result = engine.search(question, config=config, k=5)
    return result.abstained, tuple((h.chunk_id, round(h.score, 5)) for h in result.hits)


def test_concurrent_searches_match_sequential_ones(built_index):
    engine = QueryEngine(DataHome.at(built_index["home"]), built_index["version"])
    work = [(q, c) for c in ("hybrid-page", "dense", "lexical", "hybrid-rrf") for q in QUESTIONS] * 3
    expected = {item: _signature(engine, *item) for item in set(work)}
    fresh = QueryEngine(DataHome.at(built_index["home"]), built_index["version"])  # lazy parts opened by threads
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda item: (item, _signature(fresh, *item)), work))
    assert len(got) == len(work)
    for item, signature in got:
        assert signature == expected[item], item
