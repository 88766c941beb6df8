"""Pick the parser for a source kind; the one entry point the documents stage calls."""

from __future__ import annotations

from ..models import STATUS_ERROR, ParsedDocument
from . import html, markdown, pdf

PARSERS = {
    "markdown_tree": (markdown.PARSER_NAME, markdown.PARSER_VERSION),
    "html_pages": (html.PARSER_NAME, html.PARSER_VERSION),
    "pdf_files": (pdf.PARSER_NAME, pdf.PARSER_VERSION),
}


def parser_versions() -> dict[str, str]:
    return {kind: f"{name}@{version}" for kind, (name, version) in PARSERS.items()}


def parse_page(kind: str, raw: bytes, *, path: str = "", url: str = "", appendix: str = "") -> ParsedDocument:
    """Parse one page's bytes; never raises (a parser bug becomes an ``error`` record).
    ``appendix``: Markdown the published page shows after the source body (a section listing)."""
    try:
        if kind == "markdown_tree":
            doc = markdown.parse_markdown(raw, path=path, appendix=appendix)
        elif kind == "html_pages":
            doc = html.parse_html(raw, path=path, url=url)
        elif kind == "pdf_files":
            doc = pdf.parse_pdf(raw, path=path)
        else:
            return ParsedDocument(text="", title="", status=STATUS_ERROR, reason=f"unknown kind {kind}")
    except Exception as exc:  # noqa: BLE001 - one bad page must not end the run
        name, version = PARSERS.get(kind, ("?", "?"))
        return ParsedDocument(text="", title="", status=STATUS_ERROR, parser=name,
                              parser_version=version, reason=f"parser crashed: {type(exc).__name__}: {exc}"[:300])
    return doc
