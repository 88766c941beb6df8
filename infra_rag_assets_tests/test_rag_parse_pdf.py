"""PDF parser: broken inputs never raise, layout cleanup works on generated and real PDFs."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import pymupdf
import pytest
from conftest import CORPUS  # honours INFRA_RAG_CORPUS

from infra_rag_assets.rag.ingest.models import (
    STATUS_ERROR,
    STATUS_NO_CONTENT,
    STATUS_OK,
    STATUS_TOO_LARGE,
    ParsedDocument,
    check_spans,
)
from infra_rag_assets.rag.ingest.parse.pdf import PARSER_NAME, parse_pdf, parser_version
from infra_rag_assets.rag.ingest.parse.pdf_ocr import ocr_engine

pytestmark = pytest.mark.unit

REAL_PDFS = sorted((CORPUS / "pdf").glob("*.pdf"))
needs_corpus = pytest.mark.skipif(not REAL_PDFS, reason=f"real PDF corpus not found under {CORPUS}")

HEADER = "ACME Cloud Security Report"
BODY = [
    "Threat modeling starts from the data flows of the workload and the trust",
    "boundaries that each request crosses. Every boundary needs an owner.",
]


def _parse_file(path: Path, **kwargs) -> ParsedDocument:
    return parse_pdf(path.read_bytes(), path=str(path), **kwargs)


def _report_pdf(tmp_path: Path, *, outline: bool = False) -> Path:
    """Three A4 pages: running header, 'Page n of 3' footer, bare page number, a big
    heading and a medium subheading per page, and body text carrying a page marker."""
    doc = pymupdf.open()
    for n in range(1, 4):
        page = doc.new_page(width=595, height=842)
        page.insert_text((50, 40), HEADER, fontsize=9)
        page.insert_text((50, 120), f"Chapter {n} Overview", fontsize=22)
        page.insert_text((50, 160), f"Details of part {n}", fontsize=15)
        y = 190
        for line in [*BODY, f"Marker for page {n}: token-p{n}."]:
            page.insert_text((50, y), line, fontsize=11)
            y += 14
        page.insert_text((50, 815), f"Page {n} of 3", fontsize=9)
        page.insert_text((540, 815), str(n), fontsize=9)
    if outline:
        doc.set_toc([[1, f"Chapter {n} Overview", n] for n in range(1, 4)])
    path = tmp_path / "report.pdf"
    doc.save(path)
    return path


def test_generated_report_cleanup_sections_and_spans(tmp_path):
    doc = _parse_file(_report_pdf(tmp_path))
    assert doc.status == STATUS_OK, doc.reason
    assert (doc.parser, doc.parser_version, doc.page_kind) == (PARSER_NAME, parser_version(), "whitepaper")
    assert check_spans(doc) == []
    assert HEADER not in doc.text and "Page 1 of 3" not in doc.text
    assert not re.search(r"(?m)^\d+$", doc.text), "bare page numbers must be removed"
    assert doc.title == "Chapter 1 Overview"
    assert [p.page for p in doc.page_spans] == [1, 2, 3]
    for span in doc.page_spans:
        page_text = doc.text[span.start : span.end]
        assert f"token-p{span.page}" in page_text
        assert page_text.startswith(f"Chapter {span.page} Overview")
    assert all(a.end <= b.start for a, b in zip(doc.page_spans, doc.page_spans[1:]))
    by_heading = {s.heading: s for s in doc.sections}
    chapter, details = by_heading["Chapter 2 Overview"], by_heading["Details of part 2"]
    assert (chapter.level, details.level) == (1, 2)
    assert details.path == ("Chapter 2 Overview", "Details of part 2")
    assert chapter.anchor == "page-2-chapter-2-overview"
    assert chapter.end == by_heading["Chapter 3 Overview"].start  # runs to next same-level heading
    assert "token-p2" in doc.text[details.start : details.end]
    assert "Trust boundaries" not in doc.text and "the trust boundaries" in doc.text  # re-joined


def test_outline_drives_headings_when_present(tmp_path):
    doc = _parse_file(_report_pdf(tmp_path, outline=True))
    assert doc.status == STATUS_OK and check_spans(doc) == []
    assert [s.heading for s in doc.sections] == [f"Chapter {n} Overview" for n in range(1, 4)]
    assert {s.level for s in doc.sections} == {1}


def test_contents_page_is_dropped(tmp_path):
    doc = pymupdf.open()
    toc = doc.new_page()
    toc.insert_text((72, 80), "Table of Contents", fontsize=18)
    for i, (name, pg) in enumerate([("Introduction", 2), ("Threat Modeling", 2), ("Runtime", 3)]):
        toc.insert_text((72, 120 + 16 * i), f"{name} {'.' * 40} {pg}", fontsize=11)
    for n in (2, 3):
        page = doc.new_page()
        page.insert_text((72, 100), f"Section {n}", fontsize=20)
        page.insert_text((72, 140), f"Real body text on page {n} about runtime security.", fontsize=11)
    path = tmp_path / "toc.pdf"
    doc.save(path)
    parsed = _parse_file(path)
    assert parsed.status == STATUS_OK
    assert "Contents" not in parsed.text and "....." not in parsed.text
    assert [p.page for p in parsed.page_spans] == [2, 3]


def test_encrypted_pdf_is_error(tmp_path):
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "top secret", fontsize=11)
    path = tmp_path / "locked.pdf"
    doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="user", owner_pw="owner")
    parsed = _parse_file(path)
    assert (parsed.status, parsed.reason) == (STATUS_ERROR, "encrypted PDF")
    assert parsed.text == "" and parsed.title == "locked"


def test_owner_password_only_pdf_still_parses(tmp_path):
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "readable but restricted", fontsize=11)
    path = tmp_path / "restricted.pdf"
    doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", permissions=0)
    parsed = _parse_file(path)
    assert parsed.status == STATUS_OK and "readable but restricted" in parsed.text


def test_truncated_pdf_is_error_or_salvaged(tmp_path):
    source = REAL_PDFS[0] if REAL_PDFS else _report_pdf(tmp_path)
    raw = source.read_bytes()
    parsed = parse_pdf(raw[: len(raw) // 2], path="half.pdf")
    if parsed.status == STATUS_OK:  # MuPDF repaired part of it: must say so
        assert parsed.reason and check_spans(parsed) == []
    else:
        assert parsed.status == STATUS_ERROR and parsed.reason


def test_truncated_uncompressed_pdf_salvages_early_pages(tmp_path):
    raw = _report_pdf(tmp_path).read_bytes()
    parsed = parse_pdf(raw[: int(len(raw) * 0.6)])
    assert parsed.status in (STATUS_OK, STATUS_ERROR) and parsed.reason
    if parsed.status == STATUS_OK:
        assert "repaired" in parsed.reason and check_spans(parsed) == []


def test_blank_and_scanned_pages_have_no_text_layer(tmp_path):
    doc = pymupdf.open()
    doc.new_page()
    scan = doc.new_page()
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 40, 40), False)
    pix.clear_with(200)
    scan.insert_image(pymupdf.Rect(72, 72, 300, 300), pixmap=pix)
    path = tmp_path / "scan.pdf"
    doc.save(path)
    parsed = _parse_file(path)
    assert parsed.status == STATUS_NO_CONTENT and parsed.reason.startswith("no text layer")


SCANNED_WORDS = ["Kubernetes", "admission", "controllers", "validate", "every", "request"]


def _scanned_pdf(tmp_path: Path, pages: int = 1) -> Path:
    """An image-only PDF: text drawn on a page, rasterized, and only the picture kept."""
    drawn = pymupdf.open()
    page = drawn.new_page(width=595, height=842)
    page.insert_text((72, 120), "Admission Control", fontsize=22)
    page.insert_text((72, 170), "Kubernetes admission controllers validate every request", fontsize=14)
    page.insert_text((72, 195), "before the API server stores the object in etcd.", fontsize=14)
    pix = page.get_pixmap(dpi=200)
    scan = pymupdf.open()
    for _ in range(pages):
        scan.new_page(width=595, height=842).insert_image(pymupdf.Rect(0, 0, 595, 842), pixmap=pix)
    path = tmp_path / "scanned.pdf"
    scan.save(path)
    assert scan[0].get_text().strip() == ""  # no text layer at all
    return path


needs_tesseract = pytest.mark.skipif(
    not ocr_engine().available, reason=f"Tesseract OCR not usable here: {ocr_engine().why_not}"
)


@needs_tesseract
def test_scanned_pdf_is_read_by_ocr(tmp_path):
    parsed = _parse_file(_scanned_pdf(tmp_path))
    assert parsed.status == STATUS_OK, parsed.reason
    assert "OCR (Tesseract, eng, 300 dpi) read pages [1]" in parsed.reason
    words = set(re.findall(r"\w+", parsed.text))
    assert set(SCANNED_WORDS) <= words, parsed.text
    assert parsed.parser_version == parser_version() == "2+ocr"
    assert check_spans(parsed) == [] and parsed.page_spans[0].page == 1


@needs_tesseract
def test_ocr_stops_at_its_time_budget_and_says_which_pages_it_skipped(tmp_path, monkeypatch):
    from infra_rag_assets.rag.ingest.parse import pdf_layout

    monkeypatch.setattr(pdf_layout, "OCR_BUDGET_S", 0.001)  # spent by the first page
    parsed = _parse_file(_scanned_pdf(tmp_path, pages=2))
    assert parsed.status == STATUS_OK and "read pages [1]" in parsed.reason
    assert "image-only pages [2] not OCR'd (OCR time budget of" in parsed.reason
    assert [s.page for s in parsed.page_spans] == [1]


@pytest.mark.parametrize(
    ("env", "hint"),
    [
        ({"TESSDATA_PREFIX": "/nonexistent/tessdata"}, "no eng.traineddata in /nonexistent/tessdata (TESSDATA_PREFIX)"),
        ({"INFRA_RAG_OCR": "0"}, "OCR is off (INFRA_RAG_OCR=0); unset it to OCR scanned pages"),
    ],
    ids=["no-language-files", "ocr-off"],
)
def test_without_tesseract_a_scan_has_no_text_layer_and_says_how_to_enable_ocr(tmp_path, monkeypatch, env, hint):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    parsed = _parse_file(_scanned_pdf(tmp_path))
    assert parsed.status == STATUS_NO_CONTENT
    assert parsed.reason.startswith("no text layer (1 image-only page(s) not OCR'd: ") and hint in parsed.reason
    if "TESSDATA_PREFIX" in env:
        assert "apt-get install tesseract-ocr tesseract-ocr-eng" in parsed.reason
    assert parsed.parser_version == "2"  # never reused by a build that can OCR


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (random.Random(7).randbytes(4096), "not a PDF (no %PDF header)"),
        (b"", "not a PDF (empty file)"),
        (b"%PDF-1.7\n" + random.Random(8).randbytes(4096), "corrupt PDF"),
    ],
    ids=["random-bytes", "empty", "pdf-header-then-junk"],
)
def test_garbage_is_error(raw, expected):
    parsed = parse_pdf(raw, path="junk.pdf")
    assert parsed.status == STATUS_ERROR and parsed.reason.startswith(expected)
    assert parsed.title == "junk"


def test_big_junk_is_fast(tmp_path):
    path = tmp_path / "big.pdf"
    path.write_bytes(b"%PDF-1.4\n" + random.Random(9).randbytes(20_000_000))
    started = time.monotonic()
    default = _parse_file(path)
    limited = _parse_file(path, max_bytes=10_000_000)
    assert time.monotonic() - started < 5
    assert default.status == STATUS_ERROR
    assert limited.status == STATUS_TOO_LARGE and "exceeds limit" in limited.reason


def test_non_bytes_input_never_raises():
    assert parse_pdf("not bytes").status == STATUS_ERROR  # type: ignore[arg-type]


@needs_corpus
@pytest.mark.parametrize("path", REAL_PDFS, ids=lambda p: p.stem)
def test_real_whitepapers(path):
    doc = _parse_file(path)
    assert doc.status == STATUS_OK, doc.reason
    assert check_spans(doc) == []
    assert len(doc.text) > 50_000 and doc.title
    with pymupdf.open(path) as pdf:
        page_count = pdf.page_count
    pages = [p.page for p in doc.page_spans]
    assert pages == sorted(set(pages)) and len(pages) >= page_count - 3  # only contents pages go
    assert all(a.end <= b.start for a, b in zip(doc.page_spans, doc.page_spans[1:]))
    outside = "".join(doc.text[a.end : b.start] for a, b in zip(doc.page_spans, doc.page_spans[1:]))
    assert not outside.strip() and doc.page_spans[0].start == 0
    assert doc.page_spans[-1].end == len(doc.text)
    assert not re.search(r"\.{4,}\s*\d+", doc.text), "dot-leader TOC lines must be gone"
    assert "TABLE OF CONTENTS" not in doc.text.upper()
    assert "Executive Summary 4" not in doc.text  # tab-separated contents entry (security paper)
    assert not re.search(r"(?m)^\d{1,3}$", doc.text), "bare page numbers must be gone"
    assert 30 <= len(doc.sections) <= 300
    assert all(s.anchor.startswith("page-") for s in doc.sections)
    assert len({s.anchor for s in doc.sections}) == len(doc.sections)


@needs_corpus
def test_real_running_footer_removed():
    path = next((p for p in REAL_PDFS if "supply-chain" in p.name), None)
    if path is None:
        pytest.skip("supply-chain whitepaper not in corpus")
    doc = _parse_file(path)
    assert "SOFTWARE SUPPLY CHAIN BEST PRACTICES V2" not in doc.text  # footer on every page
    assert any(s.heading == "Non-goals" and s.path == ("INTRODUCTION", "Non-goals") for s in doc.sections)
