"""PDF layout: MuPDF text blocks -> visual rows (the unit every later PDF step works on).

Split from ``pdf.py`` so extraction, heading detection and text assembly each stay small;
behaviour is the parser's (``pdf.PARSER_VERSION``).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .pdf_ocr import OCR_BUDGET_S, OcrEngine, ocr_textpage

if TYPE_CHECKING:
    import pymupdf

BAND = 0.12  # top/bottom fraction of a page where running headers/footers live
BULLET = re.compile(r"^[•◦▪●‣○■\-–*]\s")
_BOLD_FONT = re.compile(r"bold|black|heavy|demi", re.I)


@dataclass
class Row:
    """One visual text line: the MuPDF lines of a block that share a baseline."""

    page: int
    block: int
    x0: float
    y0: float
    y1: float
    text: str
    size: float  # dominant font size (character-weighted)
    bold: bool
    level: int = 0  # heading level once detected; 0 = body text
    head_id: int = -1  # rows of one wrapped heading share an id


def load_pymupdf():
    """MuPDF, imported on first use: loading it costs ~1.4 s, paid by every process that imports
    the Definitions (code servers, run workers) although only PDF parsing needs it."""
    import pymupdf

    return pymupdf


@dataclass
class Extraction:
    """The rows of a document, per-page heights, and which pages failed, were scans, were OCR'd."""

    rows: list[Row] = field(default_factory=list)
    heights: dict[int, float] = field(default_factory=dict)
    bad: list[int] = field(default_factory=list)
    scanned: list[int] = field(default_factory=list)  # images and no text layer
    ocr: list[int] = field(default_factory=list)  # scanned pages whose text came from OCR
    ocr_failed: list[int] = field(default_factory=list)
    ocr_seconds: float = 0.0


def extract_rows(doc: pymupdf.Document, engine: OcrEngine | None = None) -> Extraction:
    """Rows of every readable page (a page that fails to load is listed, not fatal); a page with
    images but no text is read by OCR when ``engine`` is available, until ``OCR_BUDGET_S`` is spent."""
    mupdf = load_pymupdf()
    # Ligatures expanded and images skipped: only searchable text matters here.
    flags = mupdf.TEXTFLAGS_DICT & ~mupdf.TEXT_PRESERVE_LIGATURES & ~mupdf.TEXT_PRESERVE_IMAGES
    out = Extraction()
    for index in range(doc.page_count):
        try:
            page = doc.load_page(index)
            height = page.rect.height or 1.0
            blocks = page.get_text("dict", flags=flags).get("blocks", [])
            scanned = not _has_text(blocks) and bool(page.get_images())
        except Exception:  # noqa: BLE001 - salvage the other pages
            out.bad.append(index + 1)
            continue
        if scanned:
            out.scanned.append(index + 1)
            if engine is not None and engine.available and out.ocr_seconds < OCR_BUDGET_S:
                blocks = _ocr_blocks(page, flags, engine, index + 1, out)
        out.heights[index + 1] = height
        for bno, block in enumerate(_reading_order(blocks, height)):
            out.rows.extend(_block_rows(block, index + 1, bno))
    return out


def _has_text(blocks: list[dict]) -> bool:
    return any(
        span.get("text", "").strip() for b in blocks for ln in b.get("lines", []) for span in ln.get("spans", [])
    )


def _ocr_blocks(page, flags: int, engine: OcrEngine, number: int, out: Extraction) -> list[dict]:
    started = time.perf_counter()
    try:
        blocks = page.get_text("dict", flags=flags, textpage=ocr_textpage(page, flags, engine)).get("blocks", [])
    except Exception:  # noqa: BLE001 - Tesseract failing on one page must not lose the others
        out.ocr_failed.append(number)
        return []
    finally:
        out.ocr_seconds += time.perf_counter() - started
    out.ocr.append(number)
    return blocks


def _reading_order(blocks: list[dict], height: float) -> list[dict]:
    """Top-to-bottom for single-column pages (InDesign often draws the page heading last);
    content-stream order when body blocks sit side by side (columns, tables), except that
    blocks above all others (a page heading) still come first."""
    text = [
        b
        for b in blocks
        if b.get("type") == 0
        and any(s.get("text", "").strip() for ln in b.get("lines", []) for s in ln.get("spans", []))
    ]
    body = [b["bbox"] for b in text if b["bbox"][3] > BAND * height and b["bbox"][1] < (1 - BAND) * height]
    columns = any(
        (a[2] <= b[0] or b[2] <= a[0]) and min(a[3], b[3]) - max(a[1], b[1]) > 2
        for i, a in enumerate(body)
        for b in body[i + 1 :]
    )
    if not columns:
        return sorted(text, key=lambda b: (round(b["bbox"][1]), b["bbox"][0]))
    top = [b for b in text if all(b["bbox"][3] <= o[1] + 1 for o in body if o is not b["bbox"])]
    hoisted = {id(b) for b in top}
    return sorted(top, key=lambda b: b["bbox"][1]) + [b for b in text if id(b) not in hoisted]


def _block_rows(block: dict, page: int, bno: int) -> list[Row]:
    """Merge a block's lines that overlap vertically (tab-separated cells) into rows."""
    groups: list[list[dict]] = []
    for line in block.get("lines", []):
        if not any(s.get("text", "").strip() for s in line.get("spans", [])):
            continue
        top, bottom = line["bbox"][1], line["bbox"][3]
        if groups:
            g0 = min(ln["bbox"][1] for ln in groups[-1])
            g1 = max(ln["bbox"][3] for ln in groups[-1])
            if min(g1, bottom) - max(g0, top) > 0.5 * min(g1 - g0, bottom - top):
                groups[-1].append(line)
                continue
        groups.append([line])
    return [r for r in (_make_row(g, page, bno) for g in groups) if r.text]


def _make_row(lines: list[dict], page: int, bno: int) -> Row:
    """Spans of a line are contiguous; separate lines on one row are joined by a space."""
    lines = sorted(lines, key=lambda ln: ln["bbox"][0])
    sizes: Counter[float] = Counter()
    bold = 0
    for s in (s for ln in lines for s in ln["spans"]):
        n = len(s.get("text", "").strip())
        sizes[round(s.get("size", 0.0), 1)] += n
        bold += n if s.get("flags", 0) & 16 or _BOLD_FONT.search(s.get("font", "")) else 0
    text = " ".join("".join(s.get("text", "") for s in ln["spans"]) for ln in lines)
    return Row(
        page=page,
        block=bno,
        x0=lines[0]["bbox"][0],
        y0=min(ln["bbox"][1] for ln in lines),
        y1=max(ln["bbox"][3] for ln in lines),
        text=_clean(text),
        size=sizes.most_common(1)[0][0],
        bold=bold >= 0.8 * sum(sizes.values()),
    )


def _clean(text: str) -> str:
    """Collapse whitespace, turn runs of unmapped glyphs (dot leaders) into dots, and keep
    only a trailing soft hyphen so the paragraph joiner can dehyphenate."""
    text = re.sub(r"\ufffd{2,}", "....", text).replace("\ufffd", "")
    text = " ".join(re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", " ", text).split())
    return text.replace("\xad", "") + ("\xad" if text.endswith("\xad") and len(text) > 1 else "")


def breaks(rows: list[Row], i: int) -> bool:
    """True when row ``i`` starts a new paragraph: new page, a jump up (next column), a size
    change, a vertical gap, a bullet, or a new block that is not left-aligned with the last."""
    if i == 0:
        return True
    a, b = rows[i - 1], rows[i]
    return (
        a.page != b.page
        or b.y0 < a.y0 - 1
        or abs(a.size - b.size) > 1
        or b.y0 - a.y1 > 0.45 * min(a.y1 - a.y0, b.y1 - b.y0)
        or bool(BULLET.match(b.text))
        or (a.block != b.block and abs(a.x0 - b.x0) > 1.5 * b.size)
    )
