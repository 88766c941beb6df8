"""Duplicate detection: exact hashes, verified near-duplicates, determinism and speed."""

from __future__ import annotations

import hashlib
import random
import time

import pytest

from infra_rag_assets.rag.ingest.parse.dedup import content_hash, find_duplicates

VOCAB = [f"term{i}" for i in range(5000)]


def _text(seed: int, words: int = 400) -> str:
    return " ".join(random.Random(seed).choices(VOCAB, k=words))


def _change_one_word(text: str, index: int) -> str:
    words = text.split()
    words[index] = "completely-different"
    return " ".join(words)


@pytest.mark.unit
def test_content_hash_normalizes_whitespace_only():
    assert content_hash("a  b\n\tc ") == content_hash("a b c")
    assert content_hash("a b c") == hashlib.sha256(b"a b c").hexdigest()
    assert content_hash("A b c") != content_hash("a b c")


@pytest.mark.unit
def test_exact_duplicate_maps_to_first():
    base = _text(1)
    docs = [("a", base), ("b", _text(2)), ("c", base.replace(" ", "\n  ")), ("d", base)]
    assert find_duplicates(docs) == {"c": ("a", "exact"), "d": ("a", "exact")}


@pytest.mark.unit
def test_near_duplicate_one_word_changed():
    base = _text(3, words=1000)
    docs = [("orig", base), ("other", _text(4)), ("edited", _change_one_word(base, 500))]
    assert find_duplicates(docs) == {"edited": ("orig", "near")}


@pytest.mark.unit
def test_canonical_is_first_in_input_order():
    base = _text(5, words=1000)
    docs = [("late-edit", _change_one_word(base, 10)), ("orig", base), ("copy", base)]
    result = find_duplicates(docs)
    assert result["orig"] == ("late-edit", "near")
    assert result["copy"] == ("late-edit", "near")  # exact copy of a near-dup resolves to canonical
    assert "late-edit" not in result


@pytest.mark.unit
def test_distinct_documents_not_flagged():
    docs = [(f"doc{i}", _text(100 + i)) for i in range(50)]
    assert find_duplicates(docs) == {}


@pytest.mark.unit
def test_below_threshold_not_flagged():
    base = _text(6, words=200)
    edited = " ".join(w if i % 10 else "changed" for i, w in enumerate(base.split()))
    assert find_duplicates([("a", base), ("b", edited)]) == {}
    assert find_duplicates([("a", base), ("b", edited)], threshold=0.1) == {"b": ("a", "near")}


@pytest.mark.unit
def test_short_texts_only_dedup_exactly():
    docs = [("a", "hello world"), ("b", "hello  world"), ("c", "hello there"), ("d", ""), ("e", " ")]
    assert find_duplicates(docs) == {"b": ("a", "exact")}


@pytest.mark.unit
def test_deterministic_and_order_independent_of_hash_seed():
    base = _text(7, words=800)
    docs = [(f"d{i}", _text(200 + i)) for i in range(20)]
    docs += [("near", _change_one_word(base, 3)), ("orig", base), ("dup", base)]
    first = find_duplicates(docs)
    assert first == find_duplicates(list(docs)) == find_duplicates(docs)
    assert first == {"orig": ("near", "near"), "dup": ("near", "near")}


@pytest.mark.unit
def test_repeated_doc_id_keeps_first_text():
    base = _text(8)
    assert find_duplicates([("a", base), ("a", _text(9)), ("b", base)]) == {"b": ("a", "exact")}


@pytest.mark.slow
def test_scales_to_corpus_size():
    rng = random.Random(10)
    docs = [(f"d{i}", " ".join(rng.choices(VOCAB, k=rng.randint(300, 1500)))) for i in range(1450)]
    docs.append(("near", _change_one_word(docs[100][1], 20)))
    started = time.monotonic()
    result = find_duplicates(docs)
    assert time.monotonic() - started < 10
    assert result == {"near": ("d100", "near")}
