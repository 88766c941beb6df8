"""Page centroid vectors: the mean of a page's unit chunk vectors, by hand; the file round-trips
and a damaged or mismatched one is refused."""

from __future__ import annotations

import numpy as np
import pytest

from infra_rag_assets.rag.operate.home import PAGE_VECTORS_FILE
from infra_rag_assets.rag.search.page_vectors import PageVectors, version_page_vectors

pytestmark = pytest.mark.unit

PAGE_OF = {"a1": "page-a", "a2": "page-a", "b1": "page-b", "orphan": None}.get


def test_centroids_by_hand():
    # a1 and a2 are orthogonal unit vectors (a2 given unnormalized), b1 points along the third axis.
    vectors = np.array([[1.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 2.0], [5.0, 5.0, 5.0]])
    pv = PageVectors.from_chunks(["a1", "a2", "b1", "orphan"], vectors, PAGE_OF)
    assert pv.pages == ("page-a", "page-b")  # the chunk without a page is skipped
    assert pv.matrix.dtype == np.float32
    np.testing.assert_allclose(pv.matrix[0], [2**-0.5, 2**-0.5, 0.0], rtol=1e-6)
    np.testing.assert_allclose(pv.matrix[1], [0.0, 0.0, 1.0], rtol=1e-6)
    cos = pv.cosines(np.array([1.0, 0.0, 0.0]) * 4)  # the query's length does not matter
    assert cos["page-a"] == pytest.approx(2**-0.5) and cos["page-b"] == pytest.approx(0.0)


def test_batches_give_the_centroids_of_the_whole():
    """page_ranker streams the version's vectors: any cut into batches gives the same centroids."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(500, 8))
    ids = [f"c{i}" for i in range(500)]
    page_of = {c: (None if i % 10 == 7 else f"page-{i % 37}") for i, c in enumerate(ids)}.get
    whole = PageVectors.from_chunks(ids, vectors, page_of)
    for size in (1, 64, 499):
        cut = PageVectors.from_batches(
            [(ids[i : i + size], vectors[i : i + size]) for i in range(0, 500, size)], page_of
        )
        assert cut.pages == whole.pages and len(cut.pages) == 37
        np.testing.assert_allclose(cut.matrix, whole.matrix, rtol=1e-6, atol=1e-7)


def test_no_chunks_no_pages():
    pv = PageVectors.from_chunks([], np.zeros((0, 3)), PAGE_OF)
    assert pv.pages == () and pv.cosines(np.ones(3)) == {}


def test_round_trip_and_damage_is_refused(tmp_path):
    assert version_page_vectors(tmp_path) is None  # a version whose page_ranker wrote none
    pv = PageVectors.from_chunks(["a1", "b1"], np.eye(3)[:2], PAGE_OF)
    pv.save(tmp_path / PAGE_VECTORS_FILE)
    again = version_page_vectors(tmp_path)
    assert again.pages == pv.pages and np.array_equal(again.matrix, pv.matrix)
    assert [p.name for p in tmp_path.iterdir()] == [PAGE_VECTORS_FILE]  # no partial file left
    for damage in (b"not an npz", b""):
        (tmp_path / PAGE_VECTORS_FILE).write_bytes(damage)
        with pytest.raises(ValueError, match="page_ranker"):
            version_page_vectors(tmp_path)
    with open(tmp_path / PAGE_VECTORS_FILE, "wb") as stream:  # two pages, one vector
        np.savez(stream, pages=np.array(["x", "y"]), matrix=np.ones((1, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="one finite vector per page"):
        version_page_vectors(tmp_path)
    with open(tmp_path / PAGE_VECTORS_FILE, "wb") as stream:  # object arrays are never unpickled
        np.savez(stream, pages=np.array([{"x": 1}], dtype=object), matrix=np.ones((1, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="page_ranker"):
        version_page_vectors(tmp_path)
