"""Features of one question's candidate pages for the learned ranker (pure, numpy only).

A candidate page is any page with a chunk among the dense or lexical candidates (the same
chunk candidates every hybrid config fuses). Each page gets one row of named features in
groups, so an ablation can switch a group off by name:

* ``base``: the page's ``hybrid-page`` score (its best chunk's weighted fusion + page terms)
  and reciprocal page rank under it, so the learned ranker starts where serving is;
* ``dense`` / ``lexical`` / ``page``: each side's best raw score, min-max score, reciprocal
  page rank and how many of the page's chunks it found;
* ``agree``: whether, and how closely, the two chunk sides agree on the page;
* ``intent``: what the asker means. A definitional question ("what is X", "what does X do")
  names a subject; a page whose title *is* that subject is what a person wants, not the API
  reference or glossary entry that also mentions it. Title and heading coverage of the
  question's terms, title-in-question, and those crossed with the definitional flag;
* ``type``: the near-twin page types: glossary entry, API reference;
* ``project``: how many of the top candidates share the page's source (the question's project);
* ``hier``: parent/child relations among the candidates (children present, the parent
  present, parent or child of the top candidate), since a parent and a child page often both
  match;
* ``audience``: whether the page is written for the project's contributors rather than its users (a
  contributor guide or design proposal answers how the project is built, rarely how to use it);
* ``centroid``: how much the whole page is about the question: the cosine of the question to the
  page's centroid vector (``page_vectors``), min-max scaled and ranked among the candidates
  (zeros when the version has no page vectors).

Every feature is relative to the question's own candidates or to the page's title and type,
never to a project's name: the ranker is trained on Kubernetes questions only and must carry
over to Prometheus, Argo CD and CNCF pages.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...index.analysis import prose_terms
from ..fusion import FusionSettings, Ranking, best_per_page, hybrid_page_scores, minmax
from ..retrieval_settings import HYBRID_PAGE

GROUPS: dict[str, tuple[str, ...]] = {
    "base": ("hp_score", "hp_rrank"),
    "dense": ("d_cos", "d_mm", "d_rrank", "d_count"),
    "lexical": ("l_ratio", "l_mm", "l_rrank", "l_count"),
    "page": ("p_ratio", "p_mm", "p_rrank"),
    "agree": ("both", "rank_gap", "both_top3"),
    "intent": (
        "title_cover",
        "q_in_title",
        "title_in_q",
        "head_cover",
        "def_q",
        "def_title",
        "def_title_in_q",
        "def_glossary",
        "def_api",
        "ident_api",
        "ident_title",
        "howto_task",
    ),
    "type": ("t_glossary", "t_api"),
    "project": ("proj_share", "proj_top"),
    "hier": ("children", "has_parent", "parent_of_top", "child_of_top"),
    "audience": ("t_contrib",),
    "centroid": ("c_cos", "c_mm", "c_rrank"),
}
FEATURE_NAMES: tuple[str, ...] = tuple(name for names in GROUPS.values() for name in names)

# "what is X", "what are X", "what does X do|mean", "define X", "explain X"
_DEFINITIONAL = re.compile(
    r"^\s*(?:what\s+(?:is|are)\b|what's\b|define\b|explain\b|"
    r"what\s+does\s+.+\s+(?:do|mean)\W*$)",
    re.IGNORECASE,
)
_ALNUM = re.compile(r"[^a-z0-9]+")
# an identifier in the question: `code`, camelCase / PascalCase inside a word, a.dotted.path or a --flag
_IDENT = re.compile(r"`[^`]+`|\b[a-z]+[A-Z]\w*|\b[A-Z][a-z]+[A-Z]\w*|\b\w+\.\w+\.\w+|(?<!\w)--\w")
_HOWTO = re.compile(r"^\s*(?:how\s+(?:do|can|should|would)\s+(?:i|you|we)\b|how\s+to\b)", re.IGNORECASE)


@dataclass
class PageCandidates:
    """One question's candidate pages: ids, feature rows, and each page's chunks best first."""

    pages: list[str]
    features: np.ndarray  # (len(pages), len(FEATURE_NAMES))
    chunks: dict[str, list[str]]


def is_definitional(question: str) -> bool:
    return bool(_DEFINITIONAL.match(question))


@lru_cache(maxsize=65536)
def _terms(text: str) -> frozenset[str]:
    return frozenset(prose_terms(text))


def _squash(text: str) -> str:
    return _ALNUM.sub("", text.lower())


def page_type(row: Mapping) -> str:
    """glossary / api / reference / concept / task / tutorial / other, from kind and URL path."""
    kind, url = row.get("page_kind") or "", row.get("url") or ""
    if kind == "glossary" or "/glossary/" in url:
        return "glossary"
    if "/kubernetes-api/" in url or "/config-api/" in url:
        return "api"
    return kind if kind in ("reference", "concept", "task", "tutorial") else "other"


_CONTRIBUTOR_PATH = re.compile(r"/(?:contribute|developer-guide|proposals)/|/contributing/?$", re.IGNORECASE)


def for_contributors(row: Mapping) -> bool:
    """A page written for the project's own contributors (contributor guides, design
    proposals), not for its users: Kubernetes ``/contribute/``, Argo CD ``/developer-guide/``
    and ``/proposals/``. They share a feature, so a weight learned on Kubernetes questions
    carries over to Argo CD's design proposals."""
    url = (row.get("url") or "").split("#")[0]
    return row.get("page_kind") == "proposal" or bool(_CONTRIBUTOR_PATH.search(url))


def _side(ranking: Ranking, page_of: Callable[[str], str | None]) -> dict[str, tuple[float, float, float, int]]:
    """page -> (best raw score, best min-max score, 1 / page rank, chunks found)."""
    scaled, out, order = minmax(ranking), {}, 0
    for cid, score in ranking:
        page = page_of(cid)
        if page is None:
            continue
        if page not in out:
            order += 1
            out[page] = (score, scaled[cid], 1.0 / order, 1)
        else:
            raw, mm, rr, n = out[page]
            out[page] = (raw, mm, rr, n + 1)
    return out


def _page_side(page_lexical: Ranking) -> dict[str, tuple[float, float, float]]:
    scaled = minmax(page_lexical)
    top = max((s for _, s in page_lexical), default=0.0) or 1.0
    return {p: (s / top, scaled[p], 1.0 / r) for r, (p, s) in enumerate(page_lexical, 1) if p in scaled}


def _is_parent(parent: str, child: str) -> bool:
    """Hierarchy by page id path: ``concepts_workloads`` is the parent of ``concepts_workloads_pods``."""
    return child.startswith(parent + "_")


def _hier(page: str, pages: Sequence[str]) -> tuple[float, ...]:
    """Children and parent among the candidates; parent or child of the top candidate.

    (Path depth itself, even relative to the shallowest candidate, was measured and left
    out: it learned the benchmark's preference for shallow Kubernetes pages, +0.002 k8s MRR@10
    and -0.008 on the own set, where deep Argo CD pages are the answers.)"""
    children = sum(1 for other in pages if _is_parent(page, other))
    has_parent = any(_is_parent(other, page) for other in pages)
    return (
        math.log1p(children),
        float(has_parent),
        float(_is_parent(page, pages[0])),
        float(_is_parent(pages[0], page)),
    )


def _project(project: str, top_projects: Sequence[str]) -> tuple[float, float]:
    """Share of the top-10 candidates from the page's project, and whether the top one is: the
    question's project, as the candidates say, whatever project the ranker was trained on.
    By project, not source: Prometheus is two sources (site and server docs)."""
    return sum(p == project for p in top_projects) / len(top_projects), float(top_projects[0] == project)


def asks_identifier(question: str) -> bool:
    """Names a field, kind, flag or path the way reference pages spell it."""
    return bool(_IDENT.search(question))


def asks_how_to(question: str) -> bool:
    """Asks for a procedure ("how do I ...", "how to ..."), which task pages give."""
    return bool(_HOWTO.match(question))


def _intent(question: str, title: str, headings: Sequence[str], kind: str) -> tuple[float, ...]:
    q, t = _terms(question), _terms(title)
    title_cover = len(q & t) / len(t) if t else 0.0
    q_in_title = len(q & t) / len(q) if q else 0.0
    squashed = _squash(title)
    title_in_q = float(bool(squashed) and squashed in _squash(question))
    head_cover = max((len(q & h) / len(h) for h in map(_terms, headings) if h), default=0.0)
    definitional, ident = float(is_definitional(question)), float(asks_identifier(question))
    return (
        title_cover,
        q_in_title,
        title_in_q,
        head_cover,
        definitional,
        definitional * title_cover,
        definitional * title_in_q,
        definitional * (kind == "glossary"),
        definitional * (kind == "api"),
        ident * (kind == "api"),
        ident * title_in_q,
        float(asks_how_to(question) and kind == "task"),
    )


def page_candidates(
    question: str,
    dense: Ranking,
    lexical: Ranking,
    page_lexical: Ranking,
    catalog: Mapping[str, Mapping],
    fusion: FusionSettings | None = None,
    page_cosines: Mapping[str, float] | None = None,
) -> PageCandidates:
    """Candidate pages of one question with their feature rows (see the module docstring).
    ``fusion``: the base group's weights, serving's hybrid-page ones unless given.
    ``page_cosines``: page id -> cosine of the question to the page's centroid, when known."""

    def page_of(cid: str) -> str | None:
        row = catalog.get(cid)
        return row.get("doc_id") if row else None

    fused = hybrid_page_scores(dense, lexical, page_lexical, page_of, fusion or HYBRID_PAGE.fusion_settings)
    chunks: dict[str, list[str]] = {}
    for cid, _ in fused:
        page = page_of(cid)
        if page is not None:
            chunks.setdefault(page, []).append(cid)
    pages = list(chunks)
    if not pages:
        return PageCandidates([], np.zeros((0, len(FEATURE_NAMES))), {})
    base = best_per_page(fused, page_of)
    d_side, l_side, p_side = _side(dense, page_of), _side(lexical, page_of), _page_side(page_lexical)
    top_projects = [catalog[chunks[p][0]].get("project") or "" for p in pages[:10]]
    centroid = _centroid(pages, page_cosines)
    rows = [
        _row(question, page, rank, base[page], (d_side, l_side, p_side), chunks[page], catalog, pages, top_projects)
        + centroid[i]
        for i, (rank, page) in enumerate(enumerate(pages, 1))
    ]
    return PageCandidates(pages, np.asarray(rows, dtype=np.float64), chunks)


def _centroid(pages: Sequence[str], page_cosines: Mapping[str, float] | None) -> list[list[float]]:
    """Per page: centroid cosine, its min-max among the candidates, its reciprocal rank."""
    if page_cosines is None:
        return [[0.0, 0.0, 0.0] for _ in pages]
    cos = [float(page_cosines.get(p, 0.0)) for p in pages]
    low, high = min(cos), max(cos)
    order = sorted(range(len(cos)), key=lambda i: (-cos[i], i))
    rrank = [0.0] * len(cos)
    for position, i in enumerate(order, 1):
        rrank[i] = 1.0 / position
    return [[c, (c - low) / (high - low) if high > low else 0.0, r] for c, r in zip(cos, rrank)]


def _row(
    question: str,
    page: str,
    rank: int,
    base: float,
    sides: tuple[dict, dict, dict],
    page_chunks: Sequence[str],
    catalog: Mapping[str, Mapping],
    pages: Sequence[str],
    top_projects: Sequence[str],
) -> list[float]:
    d_side, l_side, p_side = sides
    d = d_side.get(page, (0.0, 0.0, 0.0, 0))
    lx = l_side.get(page, (0.0, 0.0, 0.0, 0))
    l_top = max((v[0] for v in l_side.values()), default=0.0) or 1.0
    p = p_side.get(page, (0.0, 0.0, 0.0))
    both = float(page in d_side and page in l_side)
    gap = abs(math.log(1 / d[2]) - math.log(1 / lx[2])) if both else 3.0
    first = catalog[page_chunks[0]]
    kind = page_type(first)
    headings = [(catalog[c].get("section_path") or "").split(" › ")[-1] for c in page_chunks[:5]]
    return [
        base,
        1.0 / rank,
        d[0],
        d[1],
        d[2],
        math.log1p(d[3]),
        lx[0] / l_top,
        lx[1],
        lx[2],
        math.log1p(lx[3]),
        *p,
        both,
        gap,
        float(both and d[2] >= 1 / 3 and lx[2] >= 1 / 3),
        *_intent(question, first.get("title") or "", headings, kind),
        float(kind == "glossary"),
        float(kind == "api"),
        *_project(first.get("project") or "", top_projects),
        *_hier(page, pages),
        float(for_contributors(first)),
    ]
