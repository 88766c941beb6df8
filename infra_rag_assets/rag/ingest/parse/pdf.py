"""PDF whitepaper parser: PyMuPDF text layer -> cleaned text, page spans and sections.

Layout comes from ``page.get_text("dict")``: MuPDF lines are merged into visual rows, running
headers/footers and table-of-contents pages are dropped, wrapped lines are re-joined into
paragraphs, and headings are taken from the PDF outline when it matches the text, otherwise
from font size (plus short standalone bold lines). The text stays plain: headings are
ordinary paragraphs whose offsets are recorded as ``Section`` objects. Rows come from
``pdf_layout``, headings from ``pdf_headings``; this module filters and assembles.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from itertools import dropwhile, takewhile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pymupdf

from infra_rag_assets.rag.ingest.models import (
    STATUS_ERROR,
    STATUS_NO_CONTENT,
    STATUS_OK,
    STATUS_TOO_LARGE,
    PageSpan,
    ParsedDocument,
    Section,
)
from infra_rag_assets.rag.ingest.parse.guard import never_raise
from infra_rag_assets.rag.ingest.parse.pdf_headings import mark_from_fonts, mark_from_outline
from infra_rag_assets.rag.ingest.parse.pdf_layout import BAND, Extraction, Row, breaks, extract_rows, load_pymupdf
from infra_rag_assets.rag.ingest.parse.pdf_ocr import (
    DPI,
    LANGUAGE,
    OCR_BUDGET_S,
    OcrEngine,
    ocr_engine,
    version_suffix,
)
from infra_rag_assets.rag.ingest.parse.sections import slugify

PARSER_NAME = "pdf"
PARSER_VERSION = "2"  # 2: scanned pages read by OCR (pdf_ocr)
PAGE_KIND = "whitepaper"

_PAGE_NUMBER = re.compile(r"^(page\s*)?\d{1,4}(\s*(of|/)\s*\d{1,4})?$|^[ivxlc]{1,5}$", re.I)
_LEADER = re.compile(r"(\.\s?){4,}\s*\d{0,4}$|[…·]{3,}\s*\d{0,4}$")  # "Intro ....... 4"
_TOC_ENTRY = re.compile(r"^\D.{0,120}?\s\d{1,4}$")  # "Threat Modeling 31" (on a contents page)
_TOC_TITLE = re.compile(r"^(table of )?contents$", re.I)
_BAD_TITLE = re.compile(  # placeholder or file-name-like metadata titles
    r"^(untitled.*|document\d*|microsoft \w+ - .*|.*\.(pdf|docx?|indd|pptx?|tex)|\S*_\S*)$", re.I
)
_Head = tuple[int, int, int, int]  # (heading_start, heading_end, level, page)


def parse_pdf(raw: bytes, *, path: str = "", max_bytes: int = 50_000_000) -> ParsedDocument:
    """Parse PDF bytes. Never raises: unreadable input comes back as a status and reason."""
    try:
        return never_raise(
            lambda: _parse(raw, path, max_bytes),
            lambda reason: _failed(STATUS_ERROR, reason, path),
            "parse failed",
            limit=None,
        )
    finally:
        load_pymupdf().TOOLS.reset_mupdf_warnings()  # MuPDF keeps warnings globally; don't let them pile up


def parser_version() -> str:
    """``PARSER_VERSION``, plus ``+ocr`` where scanned pages can be read: the reuse key of a parse."""
    return PARSER_VERSION + version_suffix()


def _failed(status: str, reason: str, path: str) -> ParsedDocument:
    return ParsedDocument(
        text="",
        title=_stem(path),
        status=status,
        reason=reason,
        page_kind=PAGE_KIND,
        parser=PARSER_NAME,
        parser_version=parser_version(),
    )


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name[:-4] if name.lower().endswith(".pdf") else name


def _parse(raw: bytes, path: str, max_bytes: int) -> ParsedDocument:
    raw = bytes(raw)
    if len(raw) > max_bytes:
        return _failed(STATUS_TOO_LARGE, f"{len(raw)} bytes exceeds limit of {max_bytes}", path)
    if not raw:
        return _failed(STATUS_ERROR, "not a PDF (empty file)", path)
    if b"%PDF" not in raw[:1024]:  # cheap check so junk never reaches MuPDF's repair logic
        return _failed(STATUS_ERROR, "not a PDF (no %PDF header)", path)
    try:
        doc = load_pymupdf().open(stream=raw, filetype="pdf")
    except Exception as exc:  # noqa: BLE001
        return _failed(STATUS_ERROR, f"corrupt PDF ({type(exc).__name__}: {exc})", path)
    with doc:
        if doc.needs_pass and not doc.authenticate(""):  # owner-password-only PDFs still open
            return _failed(STATUS_ERROR, "encrypted PDF", path)
        if doc.page_count == 0:
            return _failed(STATUS_ERROR, "corrupt or truncated PDF (no readable pages)", path)
        return _parse_document(doc, path)


def _parse_document(doc: pymupdf.Document, path: str) -> ParsedDocument:
    engine = ocr_engine()
    found = extract_rows(doc, engine)
    rows, heights, bad = found.rows, found.heights, found.bad
    if len(bad) == doc.page_count:
        return _failed(STATUS_ERROR, "corrupt PDF (no page could be read)", path)
    if not rows:
        return _failed(STATUS_NO_CONTENT, _no_text_reason(found, engine), path)
    rows = _drop_running(rows, heights)
    title = _title(doc, rows) or _stem(path)
    rows = _drop_toc(rows)
    if not rows:
        return _failed(STATUS_NO_CONTENT, "no body text (only headers, footers, contents)", path)
    if not mark_from_outline(rows, doc):
        mark_from_fonts(rows)
    text, spans, heads = _assemble(rows)
    notes = [f"repaired damaged PDF, {doc.page_count} pages recovered"] if doc.is_repaired else []
    notes += [f"pages {bad} unreadable"] if bad else []
    notes += _ocr_notes(found, engine)
    return ParsedDocument(
        text=text,
        title=title,
        status=STATUS_OK,
        reason="; ".join(notes),
        page_kind=PAGE_KIND,
        sections=_sections(text, heads),
        page_spans=spans,
        parser=PARSER_NAME,
        parser_version=parser_version(),
    )


def _no_text_reason(found: Extraction, engine: OcrEngine) -> str:
    if found.scanned and not found.ocr and not found.ocr_failed:
        return f"no text layer ({len(found.scanned)} image-only page(s) not OCR'd: {_why_not(engine)})"
    if found.ocr:
        return f"no text layer (OCR found no text on {len(found.ocr)} image-only page(s))"
    return "no text layer"


def _why_not(engine: OcrEngine) -> str:
    return engine.why_not or f"OCR time budget of {OCR_BUDGET_S:.0f} s spent"


def _ocr_notes(found: Extraction, engine: OcrEngine) -> list[str]:
    """What the parse note says about scans: pages OCR'd, failed, or skipped and why."""
    notes = [f"OCR (Tesseract, {LANGUAGE}, {DPI} dpi) read pages {found.ocr}: no text layer"] if found.ocr else []
    notes += [f"OCR failed on pages {found.ocr_failed}"] if found.ocr_failed else []
    skipped = [p for p in found.scanned if p not in found.ocr and p not in found.ocr_failed]
    if skipped:
        notes.append(f"image-only pages {skipped} not OCR'd ({_why_not(engine)})")
    return notes


def _drop_running(rows: list[Row], heights: dict[int, float]) -> list[Row]:
    """Remove bare page numbers and top/bottom-band lines that repeat (digits ignored) on
    at least 30% of the pages."""

    def key(r: Row) -> tuple[str, str] | None:
        h = heights[r.page]
        zone = "top" if r.y1 <= BAND * h else "bottom" if r.y0 >= (1 - BAND) * h else None
        return (zone, re.sub(r"\d+", "#", r.text.lower())) if zone else None

    pages_with: dict[tuple[str, str], set[int]] = {}
    for r in rows:
        if (k := key(r)) is not None:
            pages_with.setdefault(k, set()).add(r.page)
    min_pages = max(2, math.ceil(0.3 * len({r.page for r in rows})))
    return [
        r for r in rows if (k := key(r)) is None or not (_PAGE_NUMBER.match(r.text) or len(pages_with[k]) >= min_pages)
    ]


def _drop_toc(rows: list[Row]) -> list[Row]:
    """Drop contents pages (titled, or mostly 'entry 12' lines) and any dot-leader line."""
    by_page: dict[int, list[Row]] = {}
    for r in rows:
        by_page.setdefault(r.page, []).append(r)
    kept: list[Row] = []
    for page_rows in by_page.values():
        entries = sum(bool(_LEADER.search(r.text) or _TOC_ENTRY.match(r.text)) for r in page_rows)
        titled = any(_TOC_TITLE.match(r.text) for r in page_rows[:3])
        if (titled and entries >= 0.5 * (len(page_rows) - 1)) or (
            len(page_rows) >= 5 and entries >= 0.6 * len(page_rows)
        ):
            continue
        kept.extend(r for r in page_rows if not _LEADER.search(r.text))
    return kept


def _title(doc: pymupdf.Document, rows: list[Row]) -> str:
    """Metadata title when it looks like a real one, else the largest text on the first page."""
    meta = " ".join(((doc.metadata or {}).get("title") or "").split())
    if sum(c.isalpha() for c in meta) >= 3 and not _BAD_TITLE.match(meta):
        return meta
    first = [r for r in rows if r.page == rows[0].page] if rows else []
    top = max((r.size for r in first), default=0.0) - 0.5
    run = takewhile(lambda r: r.size >= top, dropwhile(lambda r: r.size < top, first))
    return " ".join(r.text.rstrip("\xad") for r in run)[:200]  # first run of largest rows


def _assemble(rows: list[Row]) -> tuple[str, list[PageSpan], list[_Head]]:
    """Join paragraphs with blank lines; return the text, page spans and heading offsets."""
    parts: list[str] = []
    spans: list[PageSpan] = []
    heads: list[_Head] = []
    pos = 0
    for page, level, unit in _units(rows):
        pos += 2 if parts else 0
        parts.append(("\n\n" if parts else "") + unit)
        if level:
            heads.append((pos, pos + len(unit), level, page))
        start = spans.pop().start if spans and spans[-1].page == page else pos
        spans.append(PageSpan(page=page, start=start, end=pos + len(unit)))
        pos += len(unit)
    return "".join(parts), spans, heads


def _units(rows: list[Row]) -> list[tuple[int, int, str]]:
    """(page, level, text) per paragraph or heading, with wrapped lines re-joined."""
    units: list[tuple[int, int, str]] = []
    for i, r in enumerate(rows):
        prev = rows[i - 1] if i else None
        if prev is not None and (
            (r.level and r.head_id == prev.head_id) or (not r.level and not prev.level and not breaks(rows, i))
        ):
            page, level, text = units[-1]
            units[-1] = (page, level, _join(text, r.text))
        else:
            units.append((r.page, r.level, r.text))
    return [(p, lv, t.replace("\xad", "").strip()) for p, lv, t in units]


def _join(left: str, right: str) -> str:
    """Undo line wrapping: a soft hyphen vanishes; a wrapped hard hyphen (``year-`` +
    ``over``) is kept and joined without a space."""
    if left.endswith("\xad"):
        return left[:-1] + right
    if left.endswith("-") and len(left) > 1 and left[-2].isalnum():
        return left + right
    return f"{left} {right}"


def _sections(text: str, heads: list[_Head]) -> list[Section]:
    """A section runs to the next heading of the same or a higher level (or the end)."""
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    anchors: Counter[str] = Counter()
    for i, (start, end, level, page) in enumerate(heads):
        heading = text[start:end]
        stop = next((h[0] for h in heads[i + 1 :] if h[2] <= level), len(text))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        anchor = f"page-{page}-{slugify(heading)[:60].strip('-') or 'section'}"
        anchors[anchor] += 1
        anchor += f"-{anchors[anchor] - 1}" if anchors[anchor] > 1 else ""  # x, x-1, x-2
        sections.append(
            Section(
                heading=heading,
                level=level,
                path=tuple(h for _, h in stack),
                anchor=anchor,
                start=start,
                end=stop,
                heading_start=start,
                heading_end=end,
            )
        )
    return sections
