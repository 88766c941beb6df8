"""Plain records passed between pipeline stages.

Framework-free on purpose: parsers, chunkers and stores exchange these dataclasses, and the
Dagster layer only moves them into DuckDB. Every span is a half-open [start, end) character
range into the owning document's cleaned ``text``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Parse outcomes. Anything that is not OK carries a human-readable ``reason``.
STATUS_OK = "ok"
STATUS_NO_CONTENT = "no_content"  # navigation-only / empty page: recorded, never indexed
STATUS_ERROR = "error"  # unreadable input (encrypted, truncated, not a PDF, bad encoding)
STATUS_TOO_LARGE = "too_large"  # over the parser's byte limit
DUPLICATE_PREFIX = "duplicate_of:"  # status "duplicate_of:<doc_id>" set by dedup


@dataclass(frozen=True)
class Section:
    """A heading and the text it governs.

    ``text[heading_start:heading_end] == heading`` and ``[start, end)`` covers the heading
    line and the body up to the next heading of the same or higher level.
    ``path`` is the chain of headings from the top-level one down to this one.
    """

    heading: str
    level: int
    path: tuple[str, ...]
    anchor: str
    start: int
    end: int
    heading_start: int
    heading_end: int


@dataclass(frozen=True)
class PageSpan:
    """PDF page ``page`` (1-based) occupies ``text[start:end]``."""

    page: int
    start: int
    end: int


@dataclass
class ParsedDocument:
    """What a parser returns for one page's bytes."""

    text: str
    title: str
    status: str = STATUS_OK
    reason: str = ""
    description: str = ""
    page_kind: str = "unknown"
    sections: list[Section] = field(default_factory=list)
    page_spans: list[PageSpan] = field(default_factory=list)
    parser: str = ""
    parser_version: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_spans(doc: ParsedDocument) -> list[str]:
    """Return human-readable violations of the span invariants (empty list when sound)."""
    problems: list[str] = []
    n = len(doc.text)
    for s in doc.sections:
        if not (0 <= s.start <= s.heading_start <= s.heading_end <= s.end <= n):
            problems.append(f"section {s.heading!r} span out of bounds")
        elif doc.text[s.heading_start : s.heading_end] != s.heading:
            problems.append(f"section {s.heading!r} heading span does not slice its heading")
    for p in doc.page_spans:
        if not (0 <= p.start <= p.end <= n):
            problems.append(f"page {p.page} span out of bounds")
    return problems
