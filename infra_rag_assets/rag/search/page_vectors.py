"""One vector per page: the normalized mean of its chunks' vectors (numpy; torch for the product).

A chunk's cosine says whether one passage matches the question; the page's centroid says how
much the whole page is about it. That separates near-twin pages the chunk scores tie on: the
concept page about ConfigMaps from the task page with one ConfigMap section, or a section's
index page from a child page that mentions the same term once. The learned ranker uses the
centroid cosine as features (group ``centroid``).

``page_ranker`` writes ``page_vectors.npz`` (page ids + float32 centroids) into the version's
serving snapshot with ranker.json, from the version's own vectors, so the ranker and the
vectors it was fitted with always travel together.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..operate.files import write_atomic
from ..operate.home import PAGE_VECTORS_FILE


@dataclass(frozen=True)
class PageVectors:
    pages: tuple[str, ...]
    matrix: np.ndarray  # (len(pages), dim), unit rows

    @classmethod
    def from_chunks(
        cls, chunk_ids: Sequence[str], vectors: np.ndarray, page_of: Callable[[str], str | None]
    ) -> PageVectors:
        """Centroids of the chunks' vectors per page (chunks without a page are skipped)."""
        return cls.from_batches([(chunk_ids, vectors)], page_of)

    @classmethod
    def from_batches(
        cls, batches: Iterable[tuple[Sequence[str], np.ndarray]], page_of: Callable[[str], str | None]
    ) -> PageVectors:
        """The same from (chunk ids, vectors) batches: memory grows with the pages, not the chunks."""
        index: dict[str, int] = {}
        dim, sums = 0, np.zeros((0, 0), dtype=np.float64)
        for chunk_ids, vectors in batches:
            dim = vectors.shape[1] if vectors.ndim == 2 else 0
            kept = [(i, page) for i, c in enumerate(chunk_ids) if (page := page_of(c)) is not None]
            if not kept:
                continue
            groups = np.array([index.setdefault(page, len(index)) for _, page in kept], dtype=np.int64)
            if len(index) > len(sums):  # room for the new pages, doubling
                sums = np.vstack([sums.reshape(-1, dim), np.zeros((max(len(index), 2 * len(sums)) - len(sums), dim))])
            np.add.at(sums, groups, _unit(np.asarray(vectors, dtype=np.float64)[[i for i, _ in kept]]))
        pages = sorted(index)
        centroids = sums[[index[p] for p in pages]] if pages else np.zeros((0, dim))
        return cls(tuple(pages), _unit(centroids).astype(np.float32))

    def cosines(self, query: np.ndarray) -> dict[str, float]:
        """page id -> cosine of the question's vector to the page's centroid."""
        import torch  # the product runs on the process's torch threads, as the dense scan does:
        # numpy's OpenBLAS would start busy-waiting threads in every service worker (see vector_store)

        if not self.pages:
            return {}
        unit = np.ascontiguousarray(_unit(np.asarray(query, dtype=np.float32).reshape(1, -1))[0])
        scores = torch.mv(torch.from_numpy(np.ascontiguousarray(self.matrix)), torch.from_numpy(unit)).numpy()
        return dict(zip(self.pages, scores.tolist()))

    @classmethod
    def of_version(cls, db_uri: str, version: str, catalog: Mapping[str, Mapping]) -> PageVectors:
        """The centroids of a built version: its stored chunk vectors, pages from its catalog."""
        from ..index.vector_store import iter_vectors

        return cls.from_batches(iter_vectors(db_uri, version), lambda c: (catalog.get(c) or {}).get("doc_id"))

    def save(self, path: str | Path) -> None:
        """Replaced atomically: a serving engine opening the version never reads half a file."""
        write_atomic(
            Path(path), lambda stream: np.savez(stream, pages=np.array(self.pages, dtype=str), matrix=self.matrix)
        )

    @classmethod
    def load(cls, path: str | Path) -> PageVectors:
        """A damaged or mismatched file is refused (ValueError), never half-used."""
        try:
            with np.load(path, allow_pickle=False) as data:
                pages, matrix = tuple(str(p) for p in data["pages"]), np.asarray(data["matrix"], dtype=np.float32)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise ValueError(f"{path} is unreadable ({type(exc).__name__}): re-materialize page_ranker") from None
        if matrix.ndim != 2 or matrix.shape[0] != len(pages) or not np.isfinite(matrix).all():
            raise ValueError(f"{path} does not hold one finite vector per page: re-materialize page_ranker")
        return cls(pages, matrix)


def version_page_vectors(snapshot_dir: Path) -> PageVectors | None:
    """The version's page vectors (None for versions whose page_ranker did not write them)."""
    path = Path(snapshot_dir) / PAGE_VECTORS_FILE
    return PageVectors.load(path) if path.is_file() else None


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)
