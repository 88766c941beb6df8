"""Pick the parser for a source kind; the one entry point the documents stage calls."""

from __future__ import annotations

from ..models import STATUS_ERROR, ParsedDocument
from . import html, markdown, pdf
from .guard import never_raise

PARSERS = {
    "markdown_tree": (markdown.PARSER_NAME, markdown.PARSER_VERSION),
    "html_pages": (html.PARSER_NAME, html.PARSER_VERSION),
    "pdf_files": (pdf.PARSER_NAME, pdf.PARSER_VERSION),
}


def parser_of(kind: str) -> tuple[str, str]:
    """(name, version) of the parser of ``kind``; the PDF one's version says whether OCR runs here."""
    if kind == "pdf_files":
        return pdf.PARSER_NAME, pdf.parser_version()
    return PARSERS.get(kind, ("?", "?"))


def parser_versions() -> dict[str, str]:
    return {kind: "@".join(parser_of(kind)) for kind in PARSERS}


def parse_page(kind: str, raw: bytes, *, path: str = "", url: str = "", appendix: str = "") -> ParsedDocument:
    """Parse one page's bytes; never raises (a parser bug becomes an ``error`` record).
    ``appendix``: Markdown the published page shows after the source body (a section listing)."""
    if kind not in PARSERS:
        return ParsedDocument(text="", title="", status=STATUS_ERROR, reason=f"unknown kind {kind}")
    return never_raise(
        lambda: _parse(kind, raw, path, url, appendix), lambda reason: failed(kind, reason), "parser crashed"
    )


def _parse(kind: str, raw: bytes, path: str, url: str, appendix: str) -> ParsedDocument:
    if kind == "markdown_tree":
        return markdown.parse_markdown(raw, path=path, appendix=appendix)
    if kind == "html_pages":
        return html.parse_html(raw, path=path, url=url)
    return pdf.parse_pdf(raw, path=path)


def failed(kind: str, reason: str) -> ParsedDocument:
    """The ``error`` record of a page of ``kind`` whose parse failed outside the parser's own checks."""
    name, version = parser_of(kind)
    return ParsedDocument(text="", title="", status=STATUS_ERROR, reason=reason, parser=name, parser_version=version)
