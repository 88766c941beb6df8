"""Exact and near-duplicate detection over parsed documents.

Exact duplicates share a SHA-256 of their whitespace-normalized text. Near duplicates have a
Jaccard similarity of word k-shingle sets >= ``threshold``: MinHash signatures (numpy) and
LSH banding propose candidate pairs cheaply, then every candidate is verified with the exact
Jaccard of the two shingle sets, so banding only affects recall, never precision.

Pure and deterministic: no randomness beyond a fixed seed, no dependence on PYTHONHASHSEED
(words are hashed with blake2b), and the canonical document of a group is always the
earliest in input order.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

EXACT = "exact"
NEAR = "near"
_SEED = 20240601
_WORD = re.compile(r"\w+")
_CHUNK = 4096  # shingles per MinHash block: bounds memory at num_perm x CHUNK x 4 bytes


def normalize(text: str) -> str:
    """Whitespace-normalized text: the basis of the exact-duplicate hash."""
    return " ".join(text.split())


def content_hash(text: str) -> str:
    """SHA-256 hex digest of the whitespace-normalized text."""
    return hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()


def find_duplicates(
    docs: Sequence[tuple[str, str]],
    *,
    threshold: float = 0.9,
    shingle: int = 5,
    num_perm: int = 128,
) -> dict[str, tuple[str, str]]:
    """Map each duplicate doc_id to ``(canonical_doc_id, kind)``, kind "exact" or "near".

    Canonicals are never themselves duplicates. Empty texts are ignored; texts shorter than
    ``shingle`` words are only matched exactly. A repeated doc_id keeps its first text.
    """
    first: dict[str, int] = {}
    for i, (doc_id, _) in enumerate(docs):
        first.setdefault(doc_id, i)
    entries = [(doc_id, docs[i][1]) for doc_id, i in first.items()]
    result: dict[str, tuple[str, str]] = {}
    by_hash: dict[str, str] = {}
    uniques: list[tuple[str, str]] = []
    for doc_id, text in entries:
        if not normalize(text):
            continue
        digest = content_hash(text)
        if digest in by_hash:
            result[doc_id] = (by_hash[digest], EXACT)
        else:
            by_hash[digest] = doc_id
            uniques.append((doc_id, text))
    near = _near_duplicates(uniques, threshold, shingle, num_perm)
    for dup, canonical in near.items():
        result[dup] = (canonical, NEAR)
    for doc_id, (canonical, kind) in list(result.items()):
        if kind == EXACT and canonical in near:  # an exact copy of a near-duplicate
            result[doc_id] = (near[canonical], NEAR)
    return result


def _near_duplicates(docs: list[tuple[str, str]], threshold: float, shingle: int, num_perm: int) -> dict[str, str]:
    """Greedy in input order: a doc is a near-duplicate of the earliest surviving canonical
    it verifiably matches, so groups are stars around canonicals (no transitive chains)."""
    ids: list[str] = []
    hashes: list[np.ndarray] = []
    cache: dict[str, int] = {}
    for doc_id, text in docs:
        h = _shingle_hashes(text, shingle, cache)
        if h.size:
            ids.append(doc_id)
            hashes.append(h)
    if len(hashes) < 2:
        return {}
    candidates = _lsh_candidates(_minhash(hashes, num_perm), *_bands(threshold, num_perm))
    sets: dict[int, np.ndarray] = {}  # exact shingle sets, built only for candidates

    def shingle_set(i: int) -> np.ndarray:
        if i not in sets:
            sets[i] = np.unique(hashes[i])
        return sets[i]

    dup_of: dict[int, int] = {}
    for j in range(len(hashes)):
        for i in sorted(candidates.get(j, ())):
            if i not in dup_of and _jaccard(shingle_set(i), shingle_set(j)) >= threshold:
                dup_of[j] = i
                break
    return {ids[j]: ids[i] for j, i in dup_of.items()}


def _shingle_hashes(text: str, k: int, cache: dict[str, int]) -> np.ndarray:
    """64-bit hashes of the lowercase word k-shingles, with repeats (empty if < k words)."""
    words = _WORD.findall(text.lower())
    if len(words) < k or k < 1:
        return np.empty(0, dtype=np.uint64)
    for w in set(words).difference(cache):
        cache[w] = _word_hash(w)
    ids = np.array(list(map(cache.__getitem__, words)), dtype=np.uint64)
    n = len(words) - k + 1
    acc = np.zeros(n, dtype=np.uint64)
    mult = np.uint64(0x100000001B3)  # FNV prime: order-sensitive polynomial combination
    for j in range(k):
        acc = acc * mult + ids[j : j + n]
    return _mix(acc)


def _word_hash(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little") | 1


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: spreads bits so shingle hashes behave like random 64-bit keys."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _minhash(hashes: list[np.ndarray], num_perm: int) -> np.ndarray:
    """(docs, num_perm) uint32 signatures from multiply-add permutations mod 2**32 of the
    top 32 bits of each shingle hash. 32-bit math is several times faster than 64-bit, and
    signatures only propose candidates: the verification uses the full 64-bit sets."""
    rng = np.random.default_rng(_SEED)
    a = (rng.integers(0, 2**31, size=num_perm, dtype=np.uint32) * 2 + 1)[:, None]
    b = rng.integers(0, 2**32, size=num_perm, dtype=np.uint32)[:, None]
    out = np.empty((len(hashes), num_perm), dtype=np.uint32)
    for d, h in enumerate(hashes):
        keys = (h >> np.uint64(32)).astype(np.uint32)
        sig = np.full(num_perm, np.iinfo(np.uint32).max, dtype=np.uint32)
        for c in range(0, keys.size, _CHUNK):
            block = a * keys[None, c : c + _CHUNK]
            block += b
            np.minimum(sig, block.min(axis=1), out=sig)
        out[d] = sig
    return out


def _bands(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows): the most selective banding that still proposes a pair at the
    threshold similarity with >= 99% probability."""
    for rows in range(num_perm, 0, -1):
        bands = num_perm // rows
        if 1 - (1 - threshold**rows) ** bands >= 0.99:
            return bands, rows
    return num_perm, 1


def _lsh_candidates(signatures: np.ndarray, bands: int, rows: int) -> dict[int, set[int]]:
    """For each doc j, the earlier docs i < j sharing at least one band bucket."""
    candidates: dict[int, set[int]] = defaultdict(set)
    for band in range(bands):
        buckets: dict[bytes, list[int]] = defaultdict(list)
        chunk = np.ascontiguousarray(signatures[:, band * rows : (band + 1) * rows])
        for d in range(len(chunk)):
            buckets[chunk[d].tobytes()].append(d)
        for members in buckets.values():
            for pos, j in enumerate(members[1:], start=1):
                candidates[j].update(members[:pos])
    return candidates


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / (a.size + b.size - inter)
