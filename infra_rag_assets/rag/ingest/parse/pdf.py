"""PDF whitepaper parser: PyMuPDF text layer -> cleaned text, page spans and sections.

Layout comes from ``page.get_text("dict")``: MuPDF lines are merged into visual rows, running
headers/footers and table-of-contents pages are dropped, wrapped lines are re-joined into
paragraphs, and headings are taken from the PDF outline when it matches the text, otherwise
from font size (plus short standalone bold lines). The text stays plain: headings are
ordinary paragraphs whose offsets are recorded as ``Section`` objects.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
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
from infra_rag_assets.rag.ingest.parse.sections import slugify

PARSER_NAME = "pdf"
PARSER_VERSION = "1"
PAGE_KIND = "whitepaper"

# Ligatures expanded and images skipped: only searchable text matters here.


def _pymupdf():
    """MuPDF, imported on first use: loading it costs ~1.4 s, paid by every process that imports
    the Definitions (code servers, run workers) although only PDF parsing needs it."""
    import pymupdf

    return pymupdf
_BAND = 0.12  # top/bottom fraction of a page where running headers/footers live
_HEADING_RATIO = 1.15  # text this much larger than the body size is a heading candidate
_MAX_LEVEL = 6
_BOLD_FONT = re.compile(r"bold|black|heavy|demi", re.I)
_PAGE_NUMBER = re.compile(r"^(page\s*)?\d{1,4}(\s*(of|/)\s*\d{1,4})?$|^[ivxlc]{1,5}$", re.I)
_LEADER = re.compile(r"(\.\s?){4,}\s*\d{0,4}$|[…·]{3,}\s*\d{0,4}$")  # "Intro ....... 4"
_TOC_ENTRY = re.compile(r"^\D.{0,120}?\s\d{1,4}$")  # "Threat Modeling 31" (on a contents page)
_TOC_TITLE = re.compile(r"^(table of )?contents$", re.I)
_BULLET = re.compile(r"^[•◦▪●‣○■\-–*]\s")
_BAD_TITLE = re.compile(  # placeholder or file-name-like metadata titles
    r"^(untitled.*|document\d*|microsoft \w+ - .*|.*\.(pdf|docx?|indd|pptx?|tex)|\S*_\S*)$", re.I)
_Head = tuple[int, int, int, int]  # (heading_start, heading_end, level, page)


@dataclass
class _Row:
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


def parse_pdf(raw: bytes, *, path: str = "", max_bytes: int = 50_000_000) -> ParsedDocument:
    """Parse PDF bytes. Never raises: unreadable input comes back as a status and reason."""
    try:
        return never_raise(lambda: _parse(raw, path, max_bytes),
                           lambda reason: _failed(STATUS_ERROR, reason, path), "parse failed", limit=None)
    finally:
        _pymupdf().TOOLS.reset_mupdf_warnings()  # MuPDF keeps warnings globally; don't let them pile up


def _failed(status: str, reason: str, path: str) -> ParsedDocument:
    return ParsedDocument(text="", title=_stem(path), status=status, reason=reason,
                          page_kind=PAGE_KIND, parser=PARSER_NAME, parser_version=PARSER_VERSION)


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
        doc = _pymupdf().open(stream=raw, filetype="pdf")
    except Exception as exc:  # noqa: BLE001
        return _failed(STATUS_ERROR, f"corrupt PDF ({type(exc).__name__}: {exc})", path)
    with doc:
        if doc.needs_pass and not doc.authenticate(""):  # owner-password-only PDFs still open
            return _failed(STATUS_ERROR, "encrypted PDF", path)
        if doc.page_count == 0:
            return _failed(STATUS_ERROR, "corrupt or truncated PDF (no readable pages)", path)
        return _parse_document(doc, path)


def _parse_document(doc: pymupdf.Document, path: str) -> ParsedDocument:
    rows, heights, bad = _extract(doc)
    if len(bad) == doc.page_count:
        return _failed(STATUS_ERROR, "corrupt PDF (no page could be read)", path)
    if not rows:
        return _failed(STATUS_NO_CONTENT, "no text layer", path)
    rows = _drop_running(rows, heights)
    title = _title(doc, rows) or _stem(path)
    rows = _drop_toc(rows)
    if not rows:
        return _failed(STATUS_NO_CONTENT, "no body text (only headers, footers, contents)", path)
    if not _mark_from_outline(rows, doc):
        _mark_from_fonts(rows)
    text, spans, heads = _assemble(rows)
    notes = [f"repaired damaged PDF, {doc.page_count} pages recovered"] if doc.is_repaired else []
    notes += [f"pages {bad} unreadable"] if bad else []
    return ParsedDocument(text=text, title=title, status=STATUS_OK, reason="; ".join(notes),
                          page_kind=PAGE_KIND, sections=_sections(text, heads), page_spans=spans,
                          parser=PARSER_NAME, parser_version=PARSER_VERSION)


def _extract(doc: pymupdf.Document) -> tuple[list[_Row], dict[int, float], list[int]]:
    """Rows of every readable page; a page that fails to load is listed, not fatal."""
    mupdf = _pymupdf()
    flags = mupdf.TEXTFLAGS_DICT & ~mupdf.TEXT_PRESERVE_LIGATURES & ~mupdf.TEXT_PRESERVE_IMAGES
    rows: list[_Row] = []
    heights: dict[int, float] = {}
    bad: list[int] = []
    for index in range(doc.page_count):
        try:
            page = doc.load_page(index)
            height = page.rect.height or 1.0
            blocks = page.get_text("dict", flags=flags).get("blocks", [])
        except Exception:  # noqa: BLE001 - salvage the other pages
            bad.append(index + 1)
            continue
        heights[index + 1] = height
        for bno, block in enumerate(_reading_order(blocks, height)):
            rows.extend(_block_rows(block, index + 1, bno))
    return rows, heights, bad


def _reading_order(blocks: list[dict], height: float) -> list[dict]:
    """Top-to-bottom for single-column pages (InDesign often draws the page heading last);
    content-stream order when body blocks sit side by side (columns, tables), except that
    blocks above all others (a page heading) still come first."""
    text = [b for b in blocks if b.get("type") == 0 and any(
        s.get("text", "").strip() for ln in b.get("lines", []) for s in ln.get("spans", []))]
    body = [b["bbox"] for b in text if b["bbox"][3] > _BAND * height
            and b["bbox"][1] < (1 - _BAND) * height]
    columns = any((a[2] <= b[0] or b[2] <= a[0]) and min(a[3], b[3]) - max(a[1], b[1]) > 2
                  for i, a in enumerate(body) for b in body[i + 1:])
    if not columns:
        return sorted(text, key=lambda b: (round(b["bbox"][1]), b["bbox"][0]))
    top = [b for b in text if all(b["bbox"][3] <= o[1] + 1 for o in body if o is not b["bbox"])]
    hoisted = {id(b) for b in top}
    return sorted(top, key=lambda b: b["bbox"][1]) + [b for b in text if id(b) not in hoisted]


def _block_rows(block: dict, page: int, bno: int) -> list[_Row]:
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


def _make_row(lines: list[dict], page: int, bno: int) -> _Row:
    """Spans of a line are contiguous; separate lines on one row are joined by a space."""
    lines = sorted(lines, key=lambda ln: ln["bbox"][0])
    sizes: Counter[float] = Counter()
    bold = 0
    for s in (s for ln in lines for s in ln["spans"]):
        n = len(s.get("text", "").strip())
        sizes[round(s.get("size", 0.0), 1)] += n
        bold += n if s.get("flags", 0) & 16 or _BOLD_FONT.search(s.get("font", "")) else 0
    text = " ".join("".join(s.get("text", "") for s in ln["spans"]) for ln in lines)
    return _Row(page=page, block=bno, x0=lines[0]["bbox"][0], y0=min(ln["bbox"][1] for ln in lines),
                y1=max(ln["bbox"][3] for ln in lines), text=_clean(text),
                size=sizes.most_common(1)[0][0], bold=bold >= 0.8 * sum(sizes.values()))


def _clean(text: str) -> str:
    """Collapse whitespace, turn runs of unmapped glyphs (dot leaders) into dots, and keep
    only a trailing soft hyphen so the paragraph joiner can dehyphenate."""
    text = re.sub(r"\ufffd{2,}", "....", text).replace("\ufffd", "")
    text = " ".join(re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", " ", text).split())
    return text.replace("\xad", "") + ("\xad" if text.endswith("\xad") and len(text) > 1 else "")


def _drop_running(rows: list[_Row], heights: dict[int, float]) -> list[_Row]:
    """Remove bare page numbers and top/bottom-band lines that repeat (digits ignored) on
    at least 30% of the pages."""
    def key(r: _Row) -> tuple[str, str] | None:
        h = heights[r.page]
        zone = "top" if r.y1 <= _BAND * h else "bottom" if r.y0 >= (1 - _BAND) * h else None
        return (zone, re.sub(r"\d+", "#", r.text.lower())) if zone else None

    pages_with: dict[tuple[str, str], set[int]] = {}
    for r in rows:
        if (k := key(r)) is not None:
            pages_with.setdefault(k, set()).add(r.page)
    min_pages = max(2, math.ceil(0.3 * len({r.page for r in rows})))
    return [r for r in rows if (k := key(r)) is None
            or not (_PAGE_NUMBER.match(r.text) or len(pages_with[k]) >= min_pages)]


def _drop_toc(rows: list[_Row]) -> list[_Row]:
    """Drop contents pages (titled, or mostly 'entry 12' lines) and any dot-leader line."""
    by_page: dict[int, list[_Row]] = {}
    for r in rows:
        by_page.setdefault(r.page, []).append(r)
    kept: list[_Row] = []
    for page_rows in by_page.values():
        entries = sum(bool(_LEADER.search(r.text) or _TOC_ENTRY.match(r.text)) for r in page_rows)
        titled = any(_TOC_TITLE.match(r.text) for r in page_rows[:3])
        if (titled and entries >= 0.5 * (len(page_rows) - 1)) or (
                len(page_rows) >= 5 and entries >= 0.6 * len(page_rows)):
            continue
        kept.extend(r for r in page_rows if not _LEADER.search(r.text))
    return kept


def _title(doc: pymupdf.Document, rows: list[_Row]) -> str:
    """Metadata title when it looks like a real one, else the largest text on the first page."""
    meta = " ".join(((doc.metadata or {}).get("title") or "").split())
    if sum(c.isalpha() for c in meta) >= 3 and not _BAD_TITLE.match(meta):
        return meta
    first = [r for r in rows if r.page == rows[0].page] if rows else []
    top = max((r.size for r in first), default=0.0) - 0.5
    run = takewhile(lambda r: r.size >= top, dropwhile(lambda r: r.size < top, first))
    return " ".join(r.text.rstrip("\xad") for r in run)[:200]  # first run of largest rows


def _mark_from_outline(rows: list[_Row], doc: pymupdf.Document) -> bool:
    """Use the PDF outline for headings when >= 60% of its entries are found in the text."""
    try:
        toc = doc.get_toc(simple=True)
    except Exception:  # noqa: BLE001 - a broken outline is just ignored
        return False
    hits: list[tuple[list[_Row], int]] = []
    used: set[int] = set()
    for level, title, page in toc:
        if group := _find_title(rows, _norm(title), page, used):
            hits.append((group, min(max(level, 1), _MAX_LEVEL)))
    if not toc or len(hits) < 0.6 * len(toc):
        return False
    for head_id, (group, level) in enumerate(hits):
        for r in group:
            r.level, r.head_id = level, head_id
    return True


def _find_title(rows: list[_Row], want: str, page: int, used: set[int]) -> list[_Row]:
    """The unused row on ``page`` (or two rows, for a wrapped title) equal to an outline title."""
    for i, r in enumerate(rows):
        if r.page != page or i in used or not want:
            continue
        for n in (1, 2):
            group = [g for g in rows[i:i + n] if g.page == page]
            if len(group) == n and _norm(" ".join(g.text for g in group)) == want:
                used.update(range(i, i + n))
                return group
    return []


def _norm(text: str) -> str:
    return " ".join(re.sub(r"\W+", " ", text.lower()).split())


def _mark_from_fonts(rows: list[_Row]) -> None:
    """Headings are short lines in a larger size (or standalone bold body-size lines); the
    level is the size rank. Sizes seen only on the front or back cover get level 1 without
    taking a rank, so a huge cover title does not push every body heading down a level."""
    sizes: Counter[float] = Counter()
    for r in rows:
        sizes[round(r.size * 2) / 2] += len(r.text)
    body = sizes.most_common(1)[0][0]
    groups = _heading_groups(rows, body)
    pages = {r.page for r in rows}
    covers = ({min(pages)}, {max(pages)}) if len(pages) > 2 else ()
    seen: dict[float, set[int]] = {}
    for g in groups:
        seen.setdefault(_rank_size(g[0], body), set()).add(g[0].page)
    ranked = sorted((s for s, p in seen.items() if p not in covers), reverse=True)
    for head_id, g in enumerate(groups):
        s = _rank_size(g[0], body)
        for r in g:
            r.level, r.head_id = min(ranked.index(s) + 1 if s in ranked else 1, _MAX_LEVEL), head_id


def _rank_size(r: _Row, body: float) -> float:
    size = round(r.size * 2) / 2
    return size if size >= body * _HEADING_RATIO else body + 0.1  # bold body-size headings


def _heading_groups(rows: list[_Row], body: float) -> list[list[_Row]]:
    """Adjacent candidate rows of one style, stacked tightly, are one wrapped heading;
    more than three such rows is display prose, not a heading."""
    groups: list[list[_Row]] = []
    for i, r in enumerate(rows):
        if not _is_candidate(rows, i, body):
            continue
        prev = groups[-1][-1] if groups else None
        if (prev is rows[i - 1] and prev.page == r.page and abs(prev.size - r.size) < 0.3
                and prev.bold == r.bold and r.y0 - prev.y1 < 0.3 * (r.y1 - r.y0)):
            groups[-1].append(r)
        else:
            groups.append([r])
    return [g for g in groups if len(g) <= 3]


def _is_candidate(rows: list[_Row], i: int, body: float) -> bool:
    r = rows[i]
    if len(r.text) > 150 or sum(c.isalpha() for c in r.text) < 2 or _BULLET.match(r.text):
        return False
    if r.size >= body * _HEADING_RATIO:
        return True
    standalone = _breaks(rows, i) and (i + 1 == len(rows) or _breaks(rows, i + 1))
    return (r.bold and r.size >= body * 0.95 and len(r.text) <= 80 and standalone
            and not r.text.endswith((".", ",", ";", ":")))


def _breaks(rows: list[_Row], i: int) -> bool:
    """True when row ``i`` starts a new paragraph: new page, a jump up (next column), a size
    change, a vertical gap, a bullet, or a new block that is not left-aligned with the last."""
    if i == 0:
        return True
    a, b = rows[i - 1], rows[i]
    return (a.page != b.page or b.y0 < a.y0 - 1 or abs(a.size - b.size) > 1
            or b.y0 - a.y1 > 0.45 * min(a.y1 - a.y0, b.y1 - b.y0) or bool(_BULLET.match(b.text))
            or (a.block != b.block and abs(a.x0 - b.x0) > 1.5 * b.size))


def _assemble(rows: list[_Row]) -> tuple[str, list[PageSpan], list[_Head]]:
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


def _units(rows: list[_Row]) -> list[tuple[int, int, str]]:
    """(page, level, text) per paragraph or heading, with wrapped lines re-joined."""
    units: list[tuple[int, int, str]] = []
    for i, r in enumerate(rows):
        prev = rows[i - 1] if i else None
        if prev is not None and ((r.level and r.head_id == prev.head_id) or (
                not r.level and not prev.level and not _breaks(rows, i))):
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
        stop = next((h[0] for h in heads[i + 1:] if h[2] <= level), len(text))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        anchor = f"page-{page}-{slugify(heading)[:60].strip('-') or 'section'}"
        anchors[anchor] += 1
        anchor += f"-{anchors[anchor] - 1}" if anchors[anchor] > 1 else ""  # x, x-1, x-2
        sections.append(Section(heading=heading, level=level, path=tuple(h for _, h in stack),
                                anchor=anchor, start=start, end=stop,
                                heading_start=start, heading_end=end))
    return sections
