"""Heading detection and section spans for Markdown-ish text.

Shared by every parser so that all documents get sections by the same rules, computed on the
*final* cleaned text: chunkers and citations slice ``text`` with these offsets, so a span built
on an intermediate string would silently point at the wrong characters.

Only ATX headings (``#`` .. ``######``) count, and never inside fenced code blocks, where
``# comment`` lines of shell or YAML samples are common.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from infra_rag_assets.rag.ingest.models import Section

# A fence opener: up to any indentation (list items indent fences), 3+ backticks or tildes.
_FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
# An ATX heading: at most 3 spaces of indentation, 1-6 hashes, then a space or end of line.
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?=[ \t]|$)[ \t]*(.*?)[ \t]*$")
# Optional closing hashes (``## Title ##``) must be preceded by whitespace.
_CLOSING_HASHES_RE = re.compile(r"(?:^|[ \t]+)#+$")
# Explicit Hugo/kramdown heading anchor: ``## Title {#my-id}`` (extra attributes tolerated).
_ANCHOR_RE = re.compile(r"[ \t]*\{#([^\s}]+)[^}]*\}[ \t]*$")


@dataclass(frozen=True)
class HeadingLine:
    """One detected heading: ``text[heading_start:heading_end] == heading``."""

    level: int
    heading: str
    line_start: int
    heading_start: int
    heading_end: int


def iter_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """Yield ``(offset, line_without_newline, in_code)`` for every line.

    ``in_code`` is True for fence lines and everything between them, so callers can skip code
    without re-implementing fence matching. An unclosed fence runs to the end (CommonMark).
    """
    fence: str | None = None
    offset = 0
    for raw in text.splitlines(keepends=True):
        line = raw.rstrip("\r\n")
        match = _FENCE_RE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
                yield offset, line, True
            else:
                yield offset, line, False
        else:
            closes = match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence)
            if closes and not line.strip().strip(fence[0]):
                fence = None
            yield offset, line, True
        offset += len(raw)


def split_fenced(text: str) -> list[tuple[str, bool]]:
    """Split ``text`` into consecutive ``(chunk, is_code)`` runs; joining them gives ``text``.

    Lets cleaners rewrite prose (links, HTML tags) while leaving code samples byte-identical.
    """
    runs: list[tuple[list[str], bool]] = []
    for (_, _, in_code), raw in zip(iter_lines(text), text.splitlines(keepends=True)):
        if runs and runs[-1][1] == in_code:
            runs[-1][0].append(raw)
        else:
            runs.append(([raw], in_code))
    return [("".join(lines), in_code) for lines, in_code in runs]


def iter_headings(text: str) -> Iterator[HeadingLine]:
    """Yield the ATX headings outside fenced code, in document order."""
    for offset, line, in_code in iter_lines(text):
        if in_code:
            continue
        match = _HEADING_RE.match(line)
        if not match:
            continue
        content = _CLOSING_HASHES_RE.sub("", match.group(2)).rstrip()
        if not content:
            continue
        start = offset + match.start(2)
        yield HeadingLine(len(match.group(1)), content, offset, start, start + len(content))


def split_anchor(heading: str) -> tuple[str, str | None]:
    """Return ``(heading_without_anchor, explicit_anchor_or_None)`` for ``Title {#id}``."""
    match = _ANCHOR_RE.search(heading)
    if not match:
        return heading, None
    return heading[: match.start()].rstrip(), match.group(1)


def strip_heading_anchors(text: str) -> tuple[str, dict[int, str]]:
    """Remove ``{#id}`` from heading lines; return the text and ``{heading ordinal: id}``.

    The ordinal is the heading's index in :func:`iter_headings` order, which removing the
    anchors does not change, so the result can be handed straight to :func:`build_sections`.
    """
    anchors: dict[int, str] = {}
    pieces: list[str] = []
    cursor = 0
    for ordinal, head in enumerate(iter_headings(text)):
        bare, anchor = split_anchor(head.heading)
        if anchor is None or not bare:  # an anchor-only heading would vanish and shift ordinals
            continue
        anchors[ordinal] = anchor
        pieces.append(text[cursor : head.heading_start] + bare)
        cursor = head.heading_end
    pieces.append(text[cursor:])
    return "".join(pieces), anchors


def slugify(heading: str) -> str:
    """Hugo/GitHub-style anchor: lowercase, punctuation dropped except ``-``/``_``, spaces -> ``-``.

    Matches the ids the published sites generate, so citations can deep-link to a section.
    """
    out: list[str] = []
    for ch in heading.strip().lower():
        if ch in "-_" or ch.isalnum():
            out.append(ch)
        elif ch.isspace():
            out.append("-")
        elif unicodedata.category(ch).startswith("M"):
            out.append(ch)  # combining marks belong to the preceding letter
    return "".join(out)


def leading_h1(text: str) -> HeadingLine | None:
    """The H1 that opens ``text`` (only blank lines before it), else None.

    An H1 further down is a body section (some pages use ``#`` for top-level sections), not
    the page title.
    """
    first = next(iter_headings(text), None)
    if first and first.level == 1 and not text[: first.line_start].strip():
        return first
    return None


def ensure_title(body: str, title: str, description: str = "") -> str:
    """Make the text start with ``# title`` (then the description) unless it opens with an H1.

    Every document then opens with its title, so the first chunk says what the page is, and
    an index page whose only text is its description still has something to index.
    """
    if leading_h1(body):
        return body
    parts = [f"# {title}"]
    if description and " ".join(description.split()) not in " ".join(body.split()):
        parts.append(description)
    head = "\n\n".join(parts)
    return f"{head}\n\n{body}" if body.strip() else f"{head}\n"


def has_prose(text: str) -> bool:
    """True when ``text`` says anything beyond its headings (a title-only page is empty)."""
    heading_lines = {h.line_start for h in iter_headings(text)}
    return any(offset not in heading_lines and any(ch.isalnum() for ch in line) for offset, line, _ in iter_lines(text))


def build_sections(text: str, anchors: Mapping[int, str] | None = None) -> list[Section]:
    """Build one :class:`Section` per heading of ``text`` with exact spans.

    A section runs from its heading line to the next heading of the same or higher level (or
    the end). ``anchors`` maps heading ordinals to explicit ids; other headings get a slug,
    de-duplicated with ``-1``, ``-2`` suffixes the way Hugo does.
    """
    anchors = anchors or {}
    heads = list(iter_headings(text))
    ends = _section_ends(heads, len(text))
    seen: dict[str, int] = {}
    stack: list[HeadingLine] = []
    sections: list[Section] = []
    for ordinal, head in enumerate(heads):
        while stack and stack[-1].level >= head.level:
            stack.pop()
        stack.append(head)
        anchor = anchors.get(ordinal) or _unique(slugify(head.heading), seen)
        sections.append(
            Section(
                heading=head.heading,
                level=head.level,
                path=tuple(h.heading for h in stack),
                anchor=anchor,
                start=head.line_start,
                end=ends[ordinal],
                heading_start=head.heading_start,
                heading_end=head.heading_end,
            )
        )
    return sections


def _section_ends(heads: list[HeadingLine], text_len: int) -> list[int]:
    """End offset of each heading's section: the next heading at the same or a higher level."""
    ends = [text_len] * len(heads)
    open_ordinals: list[int] = []
    for ordinal, head in enumerate(heads):
        while open_ordinals and heads[open_ordinals[-1]].level >= head.level:
            ends[open_ordinals.pop()] = head.line_start
        open_ordinals.append(ordinal)
    return ends


def _unique(slug: str, seen: dict[str, int]) -> str:
    """Suffix repeated slugs (``x``, ``x-1``, ``x-2``) so anchors stay unique within a page."""
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"
