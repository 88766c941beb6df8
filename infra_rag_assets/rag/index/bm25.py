"""A small in-memory BM25 over a list of texts, for mining training pairs.

Why not the Tantivy index of a version: mining needs a score for *every* chunk (argmax within
one page for the positive, argmax outside that page for the hard negative), works on any chunk
list (a test fixture, a version whose lexical index was never built), and must not depend on a
directory that may be rebuilt underneath it. A sparse term matrix answers one query with a
column slice and a row sum (a few ms for 20k chunks), which is all mining needs.

Analysis is ``analysis.prose_terms`` (stemmed prose), the same function the lexical index uses
for its body field, so "lexically similar" means the same thing here as in retrieval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse

from .analysis import prose_terms

K1 = 1.2
B = 0.75


class BM25:
    """BM25 (Okapi, k1=1.2, b=0.75, Lucene's idf) over ``texts``; rows keep the input order."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.vocab: dict[str, int] = {}
        rows, cols, counts = [], [], []
        for row, text in enumerate(texts):
            terms, freq = np.unique(np.array(prose_terms(text) or [""], dtype=object), return_counts=True)
            for term, tf in zip(terms, freq):
                if term:
                    rows.append(row)
                    cols.append(self.vocab.setdefault(term, len(self.vocab)))
                    counts.append(tf)
        shape = (len(texts), max(len(self.vocab), 1))
        tf = sparse.csr_matrix((np.asarray(counts, dtype=np.float32), (rows, cols)), shape=shape)
        self.matrix = _bm25_weights(tf).tocsc()  # column slices per query term are the hot path

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every text for ``query`` (each distinct query term counted once)."""
        ids = sorted({self.vocab[t] for t in prose_terms(query) if t in self.vocab})
        if not ids:
            return np.zeros(self.matrix.shape[0], dtype=np.float32)
        return np.asarray(self.matrix[:, ids].sum(axis=1)).ravel()


def _bm25_weights(tf: sparse.csr_matrix) -> sparse.csr_matrix:
    """Replace each term frequency by its BM25 contribution idf * tf(k1+1) / (tf + k1*norm)."""
    n_docs = tf.shape[0]
    lengths = np.asarray(tf.sum(axis=1)).ravel()
    avg = lengths.mean() if n_docs and lengths.mean() > 0 else 1.0
    df = np.bincount(tf.indices, minlength=tf.shape[1])
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
    norm = np.repeat(K1 * (1 - B + B * lengths / avg), np.diff(tf.indptr)).astype(np.float32)
    out = tf.copy()
    out.data = idf[tf.indices] * tf.data * (K1 + 1) / (tf.data + norm)
    return out
