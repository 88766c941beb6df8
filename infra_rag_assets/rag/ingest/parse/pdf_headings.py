"""PDF headings: from the document outline when it matches the text, else from font size
(plus short standalone bold lines). Marks ``Row.level`` / ``Row.head_id`` in place."""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

from infra_rag_assets.rag.ingest.parse.pdf_layout import BULLET, Row, breaks

if TYPE_CHECKING:
    import pymupdf

_HEADING_RATIO = 1.15  # text this much larger than the body size is a heading candidate
_MAX_LEVEL = 6


def mark_from_outline(rows: list[Row], doc: pymupdf.Document) -> bool:
    """Use the PDF outline for headings when >= 60% of its entries are found in the text."""
    try:
        toc = doc.get_toc(simple=True)
    except Exception:  # noqa: BLE001 - a broken outline is just ignored
        return False
    hits: list[tuple[list[Row], int]] = []
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


def _find_title(rows: list[Row], want: str, page: int, used: set[int]) -> list[Row]:
    """The unused row on ``page`` (or two rows, for a wrapped title) equal to an outline title."""
    for i, r in enumerate(rows):
        if r.page != page or i in used or not want:
            continue
        for n in (1, 2):
            group = [g for g in rows[i : i + n] if g.page == page]
            if len(group) == n and _norm(" ".join(g.text for g in group)) == want:
                used.update(range(i, i + n))
                return group
    return []


def _norm(text: str) -> str:
    return " ".join(re.sub(r"\W+", " ", text.lower()).split())


def mark_from_fonts(rows: list[Row]) -> None:
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


def _rank_size(r: Row, body: float) -> float:
    size = round(r.size * 2) / 2
    return size if size >= body * _HEADING_RATIO else body + 0.1  # bold body-size headings


def _heading_groups(rows: list[Row], body: float) -> list[list[Row]]:
    """Adjacent candidate rows of one style, stacked tightly, are one wrapped heading;
    more than three such rows is display prose, not a heading."""
    groups: list[list[Row]] = []
    for i, r in enumerate(rows):
        if not _is_candidate(rows, i, body):
            continue
        prev = groups[-1][-1] if groups else None
        if (
            prev is rows[i - 1]
            and prev.page == r.page
            and abs(prev.size - r.size) < 0.3
            and prev.bold == r.bold
            and r.y0 - prev.y1 < 0.3 * (r.y1 - r.y0)
        ):
            groups[-1].append(r)
        else:
            groups.append([r])
    return [g for g in groups if len(g) <= 3]


def _is_candidate(rows: list[Row], i: int, body: float) -> bool:
    r = rows[i]
    if len(r.text) > 150 or sum(c.isalpha() for c in r.text) < 2 or BULLET.match(r.text):
        return False
    if r.size >= body * _HEADING_RATIO:
        return True
    standalone = breaks(rows, i) and (i + 1 == len(rows) or breaks(rows, i + 1))
    return (
        r.bold
        and r.size >= body * 0.95
        and len(r.text) <= 80
        and standalone
        and not r.text.endswith((".", ",", ";", ":"))
    )
