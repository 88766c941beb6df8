"""Hugo / MkDocs Markdown source -> cleaned text with exact section spans.

The corpus is *source* Markdown, not rendered pages: it carries YAML front matter, Hugo
shortcodes, HTML comments and MkDocs admonitions that a reader never sees. We turn it into
the text a reader would see (still Markdown-ish: headings, lists, tables and code kept), so
that chunks embed the prose rather than template syntax. Sections are computed last, on the
final text, so their offsets are exact.
"""

from __future__ import annotations

import html
import re
import tomllib
from pathlib import PurePosixPath
from typing import Any

import yaml

from ..models import STATUS_ERROR, STATUS_NO_CONTENT, STATUS_OK, STATUS_TOO_LARGE, ParsedDocument
from .guard import never_raise
from .sections import (
    build_sections,
    ensure_title,
    has_prose,
    leading_h1,
    split_anchor,
    split_fenced,
    strip_heading_anchors,
)

PARSER_NAME = "markdown"
PARSER_VERSION = "2"  # 2: unclosed front matter never reaches the text

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster
_FRONT_MATTER_RE = re.compile(r"\A(---|\+\+\+)[ \t]*\n(.*?\n)?\1[ \t]*(?:\n|\Z)", re.DOTALL)
_OPEN_FENCE_RE = re.compile(r"\A(---|\+\+\+)[ \t]*\n")
_SIMPLE_FIELD_RE = re.compile(r"^(title|description|content_type):[ \t]*(\S.*)$", re.MULTILINE)
_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
_HIDDEN_SHORTCODE_RE = re.compile(r"\{\{[<%]\s*comment\s*[>%]\}\}.*?\{\{[<%]\s*/comment\s*[>%]\}\}", re.DOTALL)
# Bounded so an unclosed ``{{<`` cannot swallow the rest of a page.
_SHORTCODE_RE = re.compile(r"\{\{[<%](.{0,2000}?)[>%]\}\}", re.DOTALL)
_SHORTCODE_DEBRIS_RE = re.compile(r"\{\{[<%]|[>%]\}\}")
_ARG_RE = re.compile(r'([\w-]+)\s*=\s*"([^"]*)"')
_MKDOCS_INCLUDE_RE = re.compile(r"\{!.*?!\}")
_ADMONITION_RE = re.compile(r'^([ \t]*)(?:!!!|\?\?\?\+?)[ \t]+([\w-]+)(?:[ \t]+"([^"]*)")?[ \t]*$')
# Link parts: text with one level of nested brackets, target with one level of nested parens,
# optional "title" or 'title'; the target may start on the next line.
_LINK_TEXT = r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]"
_URL = r"\(\s*(?:[^()\s]|\([^()]*\))*(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
_IMAGE_RE = re.compile("!" + _LINK_TEXT + _URL)
_LINK_RE = re.compile(_LINK_TEXT + _URL)
_REF_LINK_RE = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_LINK_DEF_RE = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]+\S+.*\n?", re.MULTILINE)
_AUTOLINK_RE = re.compile(r"<(https?://[^>\s]+)>")
_INLINE_CODE_RE = re.compile(r"(``[^\n]*?``|`[^`\n]+`)")
_PRE_RE = re.compile(r"<pre\b[^>]*>(.*?)</pre\s*>", re.DOTALL | re.IGNORECASE)
_SCRIPT_RE = re.compile(r"<(script|style)\b.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
_TAG_RE = re.compile(r"</?([a-zA-Z][a-zA-Z0-9]*)(?:\s[^<>]*)?/?>")
# Only real HTML tags are touched: ``<pod-name>``-style placeholders in prose must survive.
_TAG_REPLACEMENTS = {
    **dict.fromkeys(
        "p div hr table thead tbody tfoot tr ul ol li dl dt dd pre blockquote details "
        "summary caption figure figcaption section center h1 h2 h3 h4 h5 h6".split(),
        "\n",
    ),
    **dict.fromkeys("td th br".split(), " "),  # keep Markdown table rows on one line
    **dict.fromkeys(
        "a b i em strong code tt span sup sub small kbd img col colgroup iframe input font u del ins mark abbr".split(),
        "",
    ),
}
_PLACEHOLDER_LOOKALIKES = {"label"}  # ``<label>`` is also a placeholder: only ``</label>`` is safe
_BLANK_RUN_RE = re.compile(r"\n(?:[ \t]*\n){3,}")

_CALLOUTS = {"note": "Note:", "caution": "Caution:", "warning": "Warning:"}
_HEADING_LABELS = {
    "whatsnext": "What's next",
    "prerequisites": "Before you begin",
    "objectives": "Objectives",
    "cleanup": "Clean up",
    "synopsis": "Synopsis",
    "options": "Options",
    "seealso": "See also",
    "envvars": "Environment variables",
}
_SILENT_SHORTCODES = {"ref", "relref", "tabs"}  # link targets and tab-set ids are not prose
_VERSION_SHORTCODES = {"skew", "param", "latest-version", "latest-semver", "release-branch"}
_TEXT_ARGS = ("text", "caption", "title", "name", "prepend", "alt")
_KINDS = {"concept", "task", "tutorial", "reference", "glossary", "proposal", "upgrade", "guide"}
_KIND_ALIASES = {"api_reference": "reference", "tool_reference": "reference"}
_PATH_KINDS = (  # first match wins: the glossary lives under reference/
    ("glossary", "glossary"),
    ("proposals", "proposal"),
    ("upgrading", "upgrade"),
    ("reference", "reference"),
    ("commands", "reference"),
    ("generated", "reference"),
    ("tasks", "task"),
    ("tutorials", "tutorial"),
    ("concepts", "concept"),
)


def parse_markdown(raw: bytes, *, path: str = "", max_bytes: int = 10_000_000, appendix: str = "") -> ParsedDocument:
    """Parse one Markdown page. Never raises: failures come back as an ``error`` record.
    ``appendix`` is Markdown appended to the body before cleaning (see ``section_index``)."""
    return never_raise(
        lambda: _parse(raw, path, max_bytes, appendix),
        lambda reason: _doc("", "", STATUS_ERROR, reason),
        "markdown parser failed",
    )


def _doc(text: str, title: str, status: str, reason: str = "", **extra: Any) -> ParsedDocument:
    return ParsedDocument(
        text=text, title=title, status=status, reason=reason, parser=PARSER_NAME, parser_version=PARSER_VERSION, **extra
    )


def _parse(raw: bytes, path: str, max_bytes: int, appendix: str = "") -> ParsedDocument:
    if len(raw) > max_bytes:
        return _doc("", "", STATUS_TOO_LARGE, f"{len(raw)} bytes exceeds the {max_bytes}-byte limit")
    if b"\x00" in raw:
        return _doc("", "", STATUS_ERROR, "NUL bytes: binary file, not Markdown")
    source, reasons = decode_text(raw)
    if not source.strip():
        return _doc("", "", STATUS_NO_CONTENT, "empty file")
    meta, body, fm_problem = split_front_matter(source)
    if fm_problem:
        reasons.append(fm_problem)
    body = clean_markdown(body.rstrip("\n") + appendix if appendix else body)
    description = clean_inline(str(meta.get("description") or ""))
    title = clean_inline(str(meta.get("title") or "")) or _first_h1(body) or title_from_path(path)
    text, anchors = strip_heading_anchors(ensure_title(body, title, description))
    kind = page_kind(str(meta.get("content_type") or ""), path)
    status = STATUS_OK if (description or has_prose(body)) else STATUS_NO_CONTENT
    if status == STATUS_NO_CONTENT:
        reasons.append("no text beyond the title")
    return _doc(
        text,
        title,
        status,
        "; ".join(reasons),
        description=description,
        page_kind=kind,
        sections=build_sections(text, anchors),
    )


def decode_text(raw: bytes) -> tuple[str, list[str]]:
    """Decode UTF-8 (dropping a BOM); fall back to latin-1 so a stray byte never loses a page."""
    try:
        text, reasons = raw.decode("utf-8-sig"), []
    except UnicodeDecodeError as exc:
        text, reasons = raw.decode("latin-1"), [f"invalid UTF-8 at byte {exc.start}; decoded as latin-1"]
    return text.replace("\r\n", "\n").replace("\r", "\n"), reasons


def split_front_matter(source: str) -> tuple[dict[str, Any], str, str]:
    """Return ``(metadata, body, problem)``; a malformed block is dropped, never fatal."""
    match = _FRONT_MATTER_RE.match(source)
    if not match:
        return _unclosed_front_matter(source)
    block, body = match.group(2) or "", source[match.end() :]
    try:
        meta = tomllib.loads(block) if match.group(1) == "+++" else yaml.load(block, Loader=_YAML_LOADER)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return _salvage_fields(block), body, f"malformed front matter ignored: {first_line}"[:200]
    if meta is None:
        return {}, body, ""
    if not isinstance(meta, dict):
        return {}, body, "malformed front matter ignored: not a mapping"
    return meta, body, ""


def _unclosed_front_matter(source: str) -> tuple[dict[str, Any], str, str]:
    """A block opened by ``---``/``+++`` that never closes: its lines (up to the first blank
    line) are dropped from the body, so keys like ``weight: 3`` never read as prose; plain
    ``title:``-style fields are still salvaged. A fence followed by a blank line is a rule."""
    opening = _OPEN_FENCE_RE.match(source)
    if not opening:
        return {}, source, ""
    rest = source[opening.end() :]
    if not rest.split("\n", 1)[0].strip():
        return {}, source, ""
    block, blank, body = rest.partition("\n\n")
    lines = len(block.strip("\n").split("\n"))
    return (
        _salvage_fields(block),
        body if blank else "",
        f"unclosed front matter (no closing {opening.group(1)}): {lines} lines dropped",
    )


def _salvage_fields(block: str) -> dict[str, str]:
    """Recover plain one-line ``title:``-style fields from front matter YAML cannot parse."""
    found = _SIMPLE_FIELD_RE.findall(block)
    return {key: value.strip().strip("\"'") for key, value in found}


def clean_markdown(body: str) -> str:
    """Strip source-only syntax (comments, shortcodes, links, HTML tags) but keep code as is."""
    body = _COMMENT_RE.sub("", body)
    body = replace_shortcodes(_HIDDEN_SHORTCODE_RE.sub("", body))
    body = _MKDOCS_INCLUDE_RE.sub("", convert_admonitions(body))
    body = "".join(run if is_code else _PRE_RE.sub(_fence_pre, run) for run, is_code in split_fenced(body))
    body = "".join(run if is_code else _clean_prose(run) for run, is_code in split_fenced(body))
    body = "\n".join(line.rstrip() for line in body.split("\n"))
    return _BLANK_RUN_RE.sub("\n\n\n", body).strip("\n") + "\n"


def _fence_pre(match: re.Match[str]) -> str:
    """Raw ``<pre>`` blocks (pre-highlighted YAML in generated pages) become fenced code, so
    their ``# comment`` lines are not mistaken for headings once the tags are gone."""
    code = _strip_html(match.group(1)).strip("\n")
    return f"\n```\n{code}\n```\n"


def clean_inline(value: str) -> str:
    """Clean a one-line value (front-matter title/description) and collapse its whitespace."""
    return " ".join(_clean_prose(replace_shortcodes(value)).split())


def _clean_prose(text: str) -> str:
    """Links/images -> their text everywhere (link text often holds code); then HTML tags and
    entities, but not inside inline code, where ``<table>`` is the subject, not markup."""
    text = _IMAGE_RE.sub(r"\1", text)
    text = _LINK_RE.sub(r"\1", text)
    text = _REF_LINK_RE.sub(r"\1", text)
    text = _LINK_DEF_RE.sub("", text)
    text = _AUTOLINK_RE.sub(r"\1", text)
    parts = _INLINE_CODE_RE.split(text)
    return "".join(part if i % 2 else _strip_html(part) for i, part in enumerate(parts))


def _strip_html(text: str) -> str:
    text = _SCRIPT_RE.sub("", text)
    return html.unescape(_TAG_RE.sub(_replace_tag, text))


def _replace_tag(match: re.Match[str]) -> str:
    """Known HTML tags go; so does any tag with ``attr="..."`` (placeholders never have one)."""
    tag, name = match.group(0), match.group(1).lower()
    if name in _TAG_REPLACEMENTS:
        return _TAG_REPLACEMENTS[name]
    if '="' in tag or (tag.startswith("</") and name in _PLACEHOLDER_LOOKALIKES):
        return ""
    return tag


def replace_shortcodes(text: str) -> str:
    """Render Hugo shortcodes as the words a reader sees; anything unknown disappears.

    Paired shortcodes (note, tabs, table, ...) only lose their delimiters, so their inner
    content stays. A final sweep removes leftover ``{{<`` debris from malformed markup.
    """
    return _SHORTCODE_DEBRIS_RE.sub("", _SHORTCODE_RE.sub(_render_shortcode, text))


def _render_shortcode(match: re.Match[str]) -> str:
    inner = match.group(1).strip()
    if inner.startswith("/*") or inner.endswith("*/"):  # escaped example: {{</* note */>}}
        return "[" + " ".join(re.sub(r"^/\*|\*/$", "", inner).split()) + "]"
    name, rest = (re.split(r"\s+", inner, maxsplit=1) + [""])[:2]
    name = name.lower()
    args = dict(_ARG_RE.findall(rest))
    if name.startswith("/") or name in _SILENT_SHORTCODES:
        return ""
    if name in _CALLOUTS:
        return _CALLOUTS[name]
    if name == "heading":
        key = rest.strip().strip('"')
        return _HEADING_LABELS.get(key, key.replace("_", " ").capitalize())
    if name == "feature-state":
        version = args.get("for_k8s_version", "")
        return f"FEATURE STATE: Kubernetes {version} [{args.get('state', '')}]".replace("  ", " ")
    if name == "glossary_tooltip" and "text" not in args:
        return args.get("term_id", "").replace("-", " ")
    if name in _VERSION_SHORTCODES:
        return "<version>"
    return next((args[key] for key in _TEXT_ARGS if args.get(key)), "")


def convert_admonitions(body: str) -> str:
    """``!!! note "Title"`` -> ``Note: Title`` and un-indent its body (MkDocs admonitions)."""
    out: list[str] = []
    body_indent: str | None = None
    for line in body.split("\n"):
        if body_indent is not None:
            if not line.strip() or line.startswith(body_indent):
                out.append(line[len(body_indent) :] if line.strip() else line)
                continue
            body_indent = None
        match = _ADMONITION_RE.match(line)
        if match:
            indent, kind, title = match.groups()
            out.append(f"{indent}{kind.capitalize()}:" + (f" {title}" if title else ""))
            body_indent = indent + "    "
        else:
            out.append(line)
    return "\n".join(out)


def _first_h1(body: str) -> str:
    head = leading_h1(body)
    return split_anchor(head.heading)[0] if head else ""


def title_from_path(path: str) -> str:
    """``kubeadm_config_images_pull.md`` -> ``Kubeadm config images pull`` (index -> folder)."""
    p = PurePosixPath(path)
    stem = p.stem
    if stem.lower() in ("_index", "index", "readme") and p.parent.name:
        stem = p.parent.name
    words = " ".join(stem.replace("_", " ").replace("-", " ").split())
    return words[:1].upper() + words[1:] if words else "Untitled"


def page_kind(content_type: str, path: str) -> str:
    """Front-matter ``content_type`` when it is a known kind, else a guess from the path."""
    kind = content_type.strip().lower().replace("-", "_")
    kind = _KIND_ALIASES.get(kind, kind)
    if kind in _KINDS:
        return kind
    parts = set(PurePosixPath(path.lower()).parts[:-1])
    return next((k for folder, k in _PATH_KINDS if folder in parts), "guide")
