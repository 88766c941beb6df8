"""Hugo section index pages (``_index.md``) as readers see them: with their list of child pages.

Why: a section's ``_index.md`` source often holds only front matter ("Authorization
Resources", no body), yet the published page at kubernetes.io lists every child page with its
title and description (Docsy's section index, unless the section sets ``no_list: true``).
Parsed from source alone, such pages came out ``no_content`` (11 k8s eval questions target
one) or as a one-line stub, so neither retriever could ever find them. Appending the same
listing the site renders restores the page's published content; nothing is invented.

Pure functions over (rel_path, front matter) pairs; the documents stage reads the bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

INDEX_NAMES = ("_index.md", "_index.markdown")
LISTING_HEADING = "## Pages in this section"


def is_section_index(rel_path: str) -> bool:
    return PurePosixPath(rel_path).name in INDEX_NAMES


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("true", "yes", "1")


def _child_key(rel_path: str) -> tuple[str, bool] | None:
    """(parent section dir, is a sub-section) for a page that a section lists, else None."""
    path = PurePosixPath(rel_path)
    if path.name in INDEX_NAMES:
        parent = path.parent.parent
        return (str(parent), True) if str(path.parent) not in ("", ".") else None
    return str(path.parent), False


def _weight(meta: Mapping[str, Any]) -> float:
    weight = meta.get("weight")
    try:
        return float("inf") if weight is None else float(weight)  # Hugo's ByWeight puts unweighted pages last
    except (TypeError, ValueError):
        return float("inf")


def section_listings(
    pages: Iterable[tuple[str, Mapping[str, Any]]], clean: Callable[[str], str] = str
) -> dict[str, str]:
    """``{index rel_path: markdown listing}`` for every section index that lists its children.

    ``pages`` is every Markdown page of one source as (rel_path, front matter). A child is a
    page in the section's directory or a sub-section's own index; it is listed as
    ``- **Title**: description`` ordered by weight then title, as Hugo's ``ByWeight`` does.
    Sections with ``no_list: true``, children with ``hide_summary: true`` and sections with
    no child are left out. ``clean`` turns a front-matter string into plain text.
    """
    pages = list(pages)
    children: dict[str, list[tuple[float, str, str]]] = {}
    for rel_path, meta in pages:
        key = _child_key(rel_path)
        if key is None or _truthy(meta.get("hide_summary", False)):
            continue
        title = clean(str(meta.get("title") or "")).strip()
        if title:
            description = clean(str(meta.get("description") or "")).strip()
            children.setdefault(key[0], []).append((_weight(meta), title, description))
    listings = {}
    for rel_path, meta in pages:
        section = str(PurePosixPath(rel_path).parent)
        if not is_section_index(rel_path) or _truthy(meta.get("no_list", False)) or not children.get(section):
            continue
        lines = [
            f"- **{title}**: {desc}" if desc else f"- **{title}**"
            for _, title, desc in sorted(children[section], key=lambda c: (c[0], c[1].lower()))
        ]
        listings[rel_path] = "\n\n" + LISTING_HEADING + "\n\n" + "\n".join(lines) + "\n"
    return listings
