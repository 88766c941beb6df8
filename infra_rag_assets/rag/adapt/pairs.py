"""Label-free training queries from the docs themselves: (query, the chunk it names).

Only Kubernetes has labelled train questions; Prometheus, Argo CD and the CNCF papers have
none. But every page says what its parts are about, in a form a user would ask for:

* ``title``: a page title as a question: "What is a ReplicaSet?" (concepts, glossary, references),
  "How do I configure liveness probes?" (tasks), "Argo CD: declarative setup" (guides) → the page's
  first body chunk.
* ``heading``: a section heading asked in its page and project ("How does grouping work in
  Alertmanager routing (prometheus)?") → the section's first chunk. Boilerplate headings
  ("What's next", "Before you begin", ...) ask nothing and are skipped.
* ``description``: a front-matter description, with "This page shows how to ..." rewritten as
  "how to ..." → the page's first body chunk (descriptions are not in the chunk text).
* ``identifier``: an API field (``- **spec.replicas** (int32)``), a flag (``--goaway-chance``), a
  table key (``| argocd.argoproj.io/sync-wave |``) or a config key (``[ scrape_interval: <duration> ]``)
  *defined* at the start of a line → "What does --goaway-chance do in kube-apiserver?" → that chunk.

Why not the trivial pair (a heading → the chunk that starts with it): every chunk's context line
already carries its title and heading, so such a pair teaches the model nothing it could not
copy. The queries are phrased as questions and the title pairs point at the body, not at a
heading-only chunk. Queries that two pages would claim (two pages titled "Pod") are dropped:
with in-batch negatives they would teach that either answer is wrong.

Pure functions: deterministic for a seed, no model, no I/O. A change to these rules bumps
``PAIRS_VERSION`` (rag/versions.py), which addresses adapted models.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

KINDS = ("title", "heading", "description", "identifier")
MAX_HEADINGS_PER_DOC = 3
MAX_IDENTIFIERS_PER_DOC = 3
MAX_IDENTIFIER_PAGES = 2
BOILERPLATE_HEADINGS = {
    "before you begin",
    "what's next",
    "whats next",
    "cleaning up",
    "clean up",
    "cleanup",
    "overview",
    "introduction",
    "summary",
    "examples",
    "example",
    "prerequisites",
    "see also",
    "references",
    "reference",
    "next steps",
    "objectives",
    "feedback",
    "notes",
    "note",
    "options",
    "synopsis",
    "usage",
    "flags",
    "options inherited from parent commands",
    "pages in this section",
    "background",
    "motivation",
    "goals",
    "non-goals",
    "table of contents",
    "contents",
    "conclusion",
    "appendix",
    "faq",
    "further reading",
}
_DESCRIPTION_LEAD = re.compile(
    r"^\s*this (?:page|document|task|tutorial|guide|section)\s+(?:shows|explains|describes|demonstrates|"
    r"covers|outlines|provides)(?:\s+you)?\s+(?:how\s+to\s+)?",
    re.IGNORECASE,
)
_IDENTIFIER = (
    r"--?[a-z][\w.-]*[\w]"  # --flag, -n
    r"|[A-Za-z][\w-]*(?:[./][\w-]+)+"  # spec.replicas, argocd.argoproj.io/sync-wave
    r"|[a-z]+[A-Z]\w*"  # camelCase
    r"|[a-z][a-z0-9]*_[a-z0-9_]+"  # snake_case
)
_DEFINED = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?:\|[ \t]*)?(?:\[[ \t]*)?[`*]{0,2}(?P<id>" + _IDENTIFIER + r")[`*]{0,2}"
    r"(?=[ \t]*(?:\(|\||:|[ \t]\S|$))",
    re.MULTILINE,
)
_TITLE_FORMS = {
    "task": ("{t} in {p}", "steps: {t}"),
    "tutorial": ("{t} tutorial", "{p} tutorial: {t}"),
    "guide": ("{t} in {p}", "How do I use {t} in {p}?"),
    "upgrade": ("upgrading {p} {t}", "What changes when upgrading {p} {t}?"),
    "proposal": ("{p} proposal: {t}", "design of {t} in {p}"),
}
# A heading that starts with one of these (or an -ing form) is a task: "How do I <heading>?".
_TASK_VERBS = {
    "add",
    "allow",
    "apply",
    "assign",
    "build",
    "change",
    "check",
    "configure",
    "connect",
    "create",
    "debug",
    "define",
    "delete",
    "deploy",
    "disable",
    "enable",
    "expose",
    "find",
    "generate",
    "get",
    "install",
    "list",
    "manage",
    "migrate",
    "monitor",
    "mount",
    "prepare",
    "register",
    "remove",
    "restart",
    "restrict",
    "rotate",
    "run",
    "scale",
    "set",
    "specify",
    "start",
    "stop",
    "troubleshoot",
    "update",
    "upgrade",
    "use",
    "verify",
    "view",
    "write",
}
_DEFINE_FORMS = ("What is {t}?", "What is a {t} in {p}?", "explain {t}")
_HEADING_FORMS = ("How does {h} work in {t}?", "{h} ({p} {t})", "What about {h} in {t}?")
_IDENT_FORMS = ("What does {i} do in {t}?", "how do I set {i} ({p})", "{i} {t}")


@dataclass(frozen=True)
class DocPair:
    """A label-free query and the chunk it names (``kind`` says how it was made)."""

    query: str
    chunk_id: str
    doc_id: str
    project: str
    kind: str


def doc_pairs(
    chunks: Iterable[Mapping], descriptions: Mapping[str, str] | None = None, *, seed: int = 0
) -> list[DocPair]:
    """Every label-free pair of ``chunks`` (rows with chunk_id, doc_id, project, title,
    section_path, page_kind, ordinal, text), in document order; ambiguous queries dropped."""
    rng = random.Random(seed)
    by_doc: dict[str, list[Mapping]] = defaultdict(list)
    for row in chunks:
        by_doc[row["doc_id"]].append(row)
    ordered = {doc_id: sorted(by_doc[doc_id], key=lambda r: r["ordinal"]) for doc_id in sorted(by_doc)}
    common = _common_identifiers(ordered.values())
    pairs: list[DocPair] = []
    for doc_id, rows in ordered.items():
        pairs += _page_pairs(rows, (descriptions or {}).get(doc_id, ""), rng, common)
    return _unambiguous(pairs)


def _common_identifiers(pages: Iterable[list[Mapping]]) -> set[str]:
    """Identifiers defined on more than ``MAX_IDENTIFIER_PAGES`` pages (``apiVersion``, ``--help``):
    a question about one of them names no page."""
    pages_of: dict[str, int] = defaultdict(int)
    for rows in pages:
        for ident in {i for i, _ in defined_identifiers(rows)}:
            pages_of[ident] += 1
    return {i for i, n in pages_of.items() if n > MAX_IDENTIFIER_PAGES}


def _page_pairs(
    rows: list[Mapping], description: str, rng: random.Random, common: set[str] | None = None
) -> list[DocPair]:
    first = rows[0]
    title, project, kind = _clean(first["title"]), first["project"], first["page_kind"] or ""
    body = _first_body(rows)

    def pair(query: str, row: Mapping, how: str) -> DocPair:
        return DocPair(
            query=" ".join(query.split()), chunk_id=row["chunk_id"], doc_id=row["doc_id"], project=project, kind=how
        )

    out = []
    if title and body is not None:
        out.append(pair(_title_query(title, kind, project, rng), body, "title"))
    if body is not None and (query := description_query(description)):
        out.append(pair(query, body, "description"))
    headings = _section_starts(rows)
    for heading, row in rng.sample(headings, min(MAX_HEADINGS_PER_DOC, len(headings))):
        out.append(pair(heading_query(heading, title, project, rng), row, "heading"))
    idents = [(i, r) for i, r in defined_identifiers(rows) if common is None or i not in common]
    for ident, row in rng.sample(idents, min(MAX_IDENTIFIERS_PER_DOC, len(idents))):
        out.append(pair(rng.choice(_IDENT_FORMS).format(i=ident, t=title, p=project), row, "identifier"))
    return out


def heading_query(heading: str, title: str, project: str, rng: random.Random) -> str:
    """A task-like heading ("Create a Secret", "Scaling a Deployment") as "How do I ...?",
    anything else as a question about it in its page."""
    if task := task_query(heading):
        return f"{task} ({title})"
    return rng.choice(_HEADING_FORMS).format(h=heading, t=title, p=project)


def task_query(text: str) -> str:
    """ "Create a Secret" → "How do I create a Secret?"; "Scaling a Deployment" → "guide to
    scaling a Deployment"; "" when ``text`` does not start with a task verb."""
    first = text.split()[0].lower() if text.split() else ""
    lowered = text[:1].lower() + text[1:]
    if first in _TASK_VERBS:
        return f"How do I {lowered}?"
    if first.endswith("ing") and len(first) > 5:
        return f"guide to {lowered}"
    return ""


def _title_query(title: str, page_kind: str, project: str, rng: random.Random) -> str:
    if page_kind in ("task", "tutorial", "guide") and (task := task_query(title)):
        return task
    forms = _TITLE_FORMS.get(page_kind, _DEFINE_FORMS)
    return rng.choice(forms).format(t=title, p=project)


def description_query(description: str) -> str:
    """A front-matter description as a query: "This page shows how to X." → "how to X"."""
    text = " ".join((description or "").split()).strip()
    if len(text.split()) < 3:
        return ""
    rewritten = _DESCRIPTION_LEAD.sub("how to ", text, count=1) if _DESCRIPTION_LEAD.match(text) else text
    return rewritten.rstrip(".")


def _first_body(rows: list[Mapping]) -> Mapping | None:
    """The page's first chunk with more than a heading in it."""
    return next((r for r in rows if len(_strip_heading(r["text"]).split()) >= 8), None)


def _strip_heading(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _section_starts(rows: list[Mapping]) -> list[tuple[str, Mapping]]:
    """(heading, the section's first body chunk) for each non-boilerplate subsection heading."""
    seen, found = set(), []
    for row in rows:
        parts = [p.strip() for p in (row["section_path"] or "").split("›")]
        if len(parts) < 2 or parts[-1] in seen:
            continue
        seen.add(parts[-1])
        heading = _clean(parts[-1])
        if heading.lower().rstrip("?:.") in BOILERPLATE_HEADINGS or len(heading) < 4:
            continue
        if len(_strip_heading(row["text"]).split()) >= 8:
            found.append((heading, row))
    return found


def defined_identifiers(rows: list[Mapping]) -> list[tuple[str, Mapping]]:
    """(identifier, chunk) for identifiers a chunk defines at a line start, first definition wins."""
    seen, found = set(), []
    for row in rows:
        for match in _DEFINED.finditer(row["text"]):
            ident = match.group("id")
            if ident not in seen and _looks_like_identifier(ident):
                seen.add(ident)
                found.append((ident, row))
    return found


_FILE_SUFFIXES = (".md", ".html", ".png", ".yaml", ".yml", ".go")


def _looks_like_identifier(token: str) -> bool:
    """Flags, dotted/slashed names, camelCase and snake_case; not URLs, paths, versions or prose."""
    if len(token) < 4 or "://" in token or token.startswith(("http", "www.")) or token.count("/") > 2:
        return False
    return not (re.fullmatch(r"[\d.v-]+", token) or token.endswith(_FILE_SUFFIXES))


def _clean(text: str) -> str:
    return " ".join((text or "").replace("`", "").split())


def _unambiguous(pairs: list[DocPair]) -> list[DocPair]:
    """Drop queries that name chunks of different pages (e.g. two pages titled "Pod")."""
    pages: dict[str, set[str]] = defaultdict(set)
    for p in pairs:
        pages[p.query.lower()].add(p.doc_id)
    return [p for p in pairs if len(pages[p.query.lower()]) == 1]


def balanced_sample(pairs: list[DocPair], budget: int, seed: int = 0) -> list[DocPair]:
    """At most ``budget`` pairs, shared as evenly as possible between projects (a small project
    gives all it has, the rest is split among the others), in input order."""
    if budget <= 0 or budget >= len(pairs):
        return list(pairs) if budget != 0 else []
    by_project: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        by_project[p.project].append(i)
    quota, left = {}, budget
    for n, project in enumerate(sorted(by_project, key=lambda k: len(by_project[k]))):
        quota[project] = min(len(by_project[project]), left // (len(by_project) - n))
        left -= quota[project]
    rng = random.Random(seed)
    keep = {i for project, rows in by_project.items() for i in rng.sample(rows, quota[project])}
    return [p for i, p in enumerate(pairs) if i in keep]
