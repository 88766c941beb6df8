"""Rendered HTML page -> main-content text with exact section spans.

Boilerplate (menus, headers, footers, cookie banners) would pollute every chunk of a site,
so the main content is found by trafilatura and rendered as Markdown, which keeps headings
and code fences; sections are then built on that text by the same rules as Markdown sources.
A page that is only navigation is recorded as ``no_content`` rather than indexed as an empty
(or link-soup) document.
"""

from __future__ import annotations

import copy
import re
from typing import Any
from urllib.parse import urlparse

from ..models import STATUS_ERROR, STATUS_NO_CONTENT, STATUS_OK, STATUS_TOO_LARGE, ParsedDocument
from .guard import never_raise
from .markdown import page_kind, title_from_path
from .sections import build_sections, ensure_title, has_prose, iter_headings, split_fenced

PARSER_NAME = "html"
PARSER_VERSION = "2"  # 2: a <form>/<a> wrapping <main> is not navigation

# Fewer words than this outside links and page chrome means there is nothing to read.
MIN_PROSE_WORDS = 5
_CHROME_TAGS = (
    "nav",
    "header",
    "footer",
    "aside",
    "script",
    "style",
    "noscript",
    "template",
    "form",
    "button",
    "select",
    "a",
)
_HEADING_XPATH = "//h1|//h2|//h3|//h4|//h5|//h6"
# trafilatura escapes CommonMark syntax in prose (``max\_items``); readers and embedders
# want the plain characters back.
_MD_ESCAPE_RE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")
_INLINE_CODE_RE = re.compile(r"(`[^`\n]+`)")


def parse_html(raw: bytes, *, path: str = "", url: str = "", max_bytes: int = 10_000_000) -> ParsedDocument:
    """Parse one HTML page. Never raises: failures come back as an ``error`` record."""
    return never_raise(
        lambda: _parse(raw, path, url, max_bytes),
        lambda reason: _doc("", "", STATUS_ERROR, reason),
        "html parser failed",
    )


def _doc(text: str, title: str, status: str, reason: str = "", **extra: Any) -> ParsedDocument:
    return ParsedDocument(
        text=text, title=title, status=status, reason=reason, parser=PARSER_NAME, parser_version=PARSER_VERSION, **extra
    )


def _parse(raw: bytes, path: str, url: str, max_bytes: int) -> ParsedDocument:
    if len(raw) > max_bytes:
        return _doc("", "", STATUS_TOO_LARGE, f"{len(raw)} bytes exceeds the {max_bytes}-byte limit")
    if not raw.strip():
        return _doc("", "", STATUS_NO_CONTENT, "empty file")
    if b"\x00" in raw:
        return _doc("", "", STATUS_ERROR, "NUL bytes: binary file, not HTML")
    try:
        import trafilatura  # deferred: a broken install costs error records, not the package import
    except ImportError as exc:
        return _doc("", "", STATUS_ERROR, f"trafilatura unavailable: {exc}"[:300])
    # load_html rejects bare fragments (``<p>..</p>``) as "dubious"; an html wrapper admits them.
    tree = trafilatura.load_html(raw)
    if tree is None:
        tree = trafilatura.load_html(b"<html><body>" + raw + b"</body></html>")
    if tree is None:
        return _doc("", "", STATUS_ERROR, "not parseable as an HTML document")
    where = path or urlparse(url).path
    meta = trafilatura.extract_metadata(copy.deepcopy(tree), default_url=url or None, extensive=False)
    info = {"description": " ".join((meta.description or "").split()), "page_kind": page_kind("", where)}
    title = _title(meta, tree, where)
    words = prose_word_count(tree)
    if words < MIN_PROSE_WORDS:
        return _doc(
            "", title, STATUS_NO_CONTENT, f"navigation-only page: {words} words outside links and menus", **info
        )
    body = _main_content(trafilatura, tree, url)
    if not has_prose(body):
        return _doc("", title, STATUS_NO_CONTENT, "no main content found", **info)
    text = ensure_title(body, title, info["description"])
    return _doc(text, title, STATUS_OK, sections=build_sections(text, _anchors_for(text, heading_ids(tree))), **info)


def _main_content(trafilatura: Any, tree: Any, url: str) -> str:
    """Main content as Markdown: headings, lists, tables and code fences survive, chrome does not."""
    body = trafilatura.extract(
        copy.deepcopy(tree),
        url=url or None,
        output_format="markdown",
        include_tables=True,
        include_formatting=True,
        include_comments=False,
        favor_recall=True,
        with_metadata=False,
    )
    lines = unescape_markdown(body or "").strip().split("\n")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _title(meta: Any, tree: Any, path: str) -> str:
    """Metadata title (og:title / <title> minus the site name), else the first <h1>, else path."""
    if meta.title and meta.title.strip():
        return " ".join(meta.title.split())
    h1 = tree.xpath("//h1")
    if h1 and h1[0].text_content().strip():
        return " ".join(h1[0].text_content().split())
    return title_from_path(path)


def prose_word_count(tree: Any) -> int:
    """Words on the page outside links, menus, headers and footers.

    A navigation page is *all* link text, so this is what tells it apart from a short article
    (trafilatura's recall mode happily returns a menu's link labels as "content").
    """
    body = copy.deepcopy(tree)
    for element in body.xpath(" | ".join(f"//{tag}" for tag in _CHROME_TAGS)):
        if _wraps_content(element):
            continue  # a <form> or <a> around the whole <main> (ASP.NET, link-card pages) is no menu
        element.drop_tree()  # keeps the element's tail text, which is not part of it
    body_el = body.find(".//body")
    text = (body_el if body_el is not None else body).text_content()
    return sum(1 for word in text.split() if any(ch.isalnum() for ch in word))


def _wraps_content(element: Any) -> bool:
    if element.tag in ("script", "style", "template", "noscript"):
        return False
    if element.xpath(".//main | .//article | .//*[@role='main']"):
        return True
    return element.tag in ("form", "a") and bool(element.xpath(".//p"))


def heading_ids(tree: Any) -> dict[str, str]:
    """``{normalized heading text: id}`` for headings carrying an ``id`` (their real anchors)."""
    ids: dict[str, str] = {}
    for element in tree.xpath(_HEADING_XPATH):
        anchor = element.get("id") or next(
            (a.get("id") or a.get("name") for a in element.xpath(".//a") if a.get("id") or a.get("name")), None
        )
        if anchor:
            ids.setdefault(_heading_key(element.text_content()), anchor)
    return ids


def _anchors_for(text: str, ids: dict[str, str]) -> dict[int, str]:
    """Map heading ordinals of the extracted text to the page's own heading ids."""
    return {
        ordinal: ids[key]
        for ordinal, head in enumerate(iter_headings(text))
        if (key := _heading_key(head.heading)) in ids
    }


def _heading_key(heading: str) -> str:
    return " ".join(heading.replace("`", "").replace("*", "").split()).lower()


def unescape_markdown(text: str) -> str:
    """Undo trafilatura's backslash escapes in prose; code blocks and spans stay verbatim."""
    out: list[str] = []
    for run, is_code in split_fenced(text):
        if is_code:
            out.append(run)
            continue
        parts = _INLINE_CODE_RE.split(run)
        out.append("".join(p if i % 2 else _MD_ESCAPE_RE.sub(r"\1", p) for i, p in enumerate(parts)))
    return "".join(out)
