"""One QueryEngine shared by many threads (as the service's worker threads share it) gives
exactly the results it gives sequentially: no tokenizer "Already borrowed", no mixed-up
rankings, for every mode."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.engine import QueryEngine

pytestmark = pytest.mark.build

QUESTIONS = [
    "How does maxSurge limit pods during a rollout?",
    "basic auth for the Prometheus UI",
    "What is an Argo CD Application?",
    "What is a Pod?",
    "EndpointSlice address types",
    "supply chain attestation",
    "roll back a Deployment",
    "kube-apiserver flags",
]


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


def test_a_replica_serves_from_a_read_only_data_home(built_index, tmp_path):
    """Replicas share one release without writing to it or locking it: the whole data home is
    mounted read-only (a bind mount; needs root, as in CI) and the engine still opens and searches."""
    import shutil
    import subprocess

    source = tmp_path / "home"
    shutil.copytree(built_index["home"], source)
    mount = tmp_path / "ro"
    mount.mkdir()
    bound = subprocess.run(["mount", "--bind", str(source), str(mount)], capture_output=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here (needs root): {bound.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mount)], check=True, capture_output=True)
        with pytest.raises(OSError):
            (mount / "probe").write_text("x")
        engine = QueryEngine(DataHome.at(mount), built_index["version"])
        for config in ("hybrid-page", "lexical", "dense"):
            assert engine.search("How does maxSurge work?", config=config, k=3).hits
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
