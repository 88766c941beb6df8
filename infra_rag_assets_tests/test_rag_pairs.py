"""Label-free training pairs: what each kind of query names, and what is left out."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from infra_rag_assets.rag.adapt.pairs import (
    DocPair,
    balanced_sample,
    defined_identifiers,
    description_query,
    doc_pairs,
    heading_query,
    task_query,
)

pytestmark = pytest.mark.unit

BODY = "The controller keeps the desired number of replicas running and replaces failed ones quickly."


def _row(
    doc: str, ordinal: int, section: str, text: str, *, title: str, kind: str = "concept", project: str = "kubernetes"
) -> dict:
    return {
        "chunk_id": f"{doc}#{ordinal}",
        "doc_id": doc,
        "project": project,
        "title": title,
        "section_path": section,
        "page_kind": kind,
        "ordinal": ordinal,
        "text": text,
    }


def _page(doc: str, title: str, kind: str = "concept", project: str = "kubernetes") -> list[dict]:
    return [
        _row(doc, 0, title, f"# {title}", title=title, kind=kind, project=project),  # heading only
        _row(doc, 1, title, BODY, title=title, kind=kind, project=project),
        _row(
            doc,
            2,
            f"{title} › Scaling a {title}",
            f"## Scaling a {title}\n\n{BODY}",
            title=title,
            kind=kind,
            project=project,
        ),
        _row(doc, 3, f"{title} › What's next", f"## What's next\n\n{BODY}", title=title, kind=kind, project=project),
        _row(
            doc,
            4,
            f"{title} › Fields",
            f"- **spec.minReadySeconds** (int32)\n\n  {BODY}\n"
            f"| --goaway-chance | fraction of requests sent a GOAWAY |\n  apiVersion: apps/v1",
            title=title,
            kind=kind,
            project=project,
        ),
    ]


def test_each_kind_names_the_chunk_a_user_would_want():
    pairs = doc_pairs(_page("k:rs", "ReplicaSet"), {"k:rs": "This page shows how to run a ReplicaSet."})
    by_kind = {k: [p for p in pairs if p.kind == k] for k in ("title", "description", "heading", "identifier")}
    [title] = by_kind["title"]
    assert title.query.rstrip("?").endswith("ReplicaSet") or "ReplicaSet" in title.query
    assert title.chunk_id == "k:rs#1"  # the body, not the heading-only chunk that starts with the title
    [description] = by_kind["description"]
    assert description.query == "how to run a ReplicaSet" and description.chunk_id == "k:rs#1"
    headings = {p.chunk_id: p.query for p in by_kind["heading"]}  # "What's next" is boilerplate: asks nothing
    assert sorted(headings) == ["k:rs#2", "k:rs#4"]
    assert headings["k:rs#2"].startswith("guide to scaling a ReplicaSet")
    identifiers = {p.query.split()[2] if p.query.startswith("What does") else p.query for p in by_kind["identifier"]}
    assert {p.chunk_id for p in by_kind["identifier"]} == {"k:rs#4"}
    assert any("spec.minReadySeconds" in q for q in identifiers) and any("--goaway-chance" in q for q in identifiers)
    assert all(p.query != p.chunk_id and not BODY.startswith(p.query) for p in pairs)


def test_queries_two_pages_would_claim_and_common_identifiers_are_dropped():
    pages = _page("k:a", "Pod") + _page("k:b", "Pod", kind="glossary") + _page("k:c", "Service")
    for doc in ("k:d", "k:e"):
        pages += _page(doc, f"Other {doc}")
    pairs = doc_pairs(pages, seed=3)
    titles = Counter(p.doc_id for p in pairs if p.kind == "title")
    assert "k:c" in titles and all(titles[d] == 1 for d in titles)
    queries = Counter(p.query.lower() for p in pairs)
    docs_per_query = {q: {p.doc_id for p in pairs if p.query.lower() == q} for q in queries}
    assert all(len(d) == 1 for d in docs_per_query.values())
    # spec.minReadySeconds is defined on all 5 pages: names no page, so no pair asks for it.
    assert not any("minReadySeconds" in p.query for p in pairs)
    assert not any("apiVersion" in p.query for p in pairs)


def test_pairs_are_deterministic_for_a_seed():
    pages = [r for d in range(6) for r in _page(f"k:{d}", f"Thing {d}")]
    assert doc_pairs(pages, seed=1) == doc_pairs(pages, seed=1)


def test_task_titles_and_headings_become_how_to_questions():
    assert task_query("Configure Liveness Probes") == "How do I configure Liveness Probes?"
    assert task_query("Scaling a Deployment") == "guide to scaling a Deployment"
    assert task_query("Pod Lifecycle") == ""
    rng = random.Random(0)
    assert heading_query("Create a Secret", "Secrets", "kubernetes", rng) == "How do I create a Secret? (Secrets)"
    assert heading_query("Grouping", "Alertmanager", "prometheus", rng) == "guide to grouping (Alertmanager)"
    assert "Pod Lifecycle" in heading_query("Pod Lifecycle", "Pods", "kubernetes", rng)
    pairs = doc_pairs(_page("k:t", "Configure Liveness Probes", kind="task"))
    assert next(p for p in pairs if p.kind == "title").query == "How do I configure Liveness Probes?"


def test_description_queries():
    assert (
        description_query("This page explains how to configure DNS for a cluster.")
        == "how to configure DNS for a cluster"
    )
    assert (
        description_query("PersistentVolumeClaim is a user's request for storage.")
        == "PersistentVolumeClaim is a user's request for storage"
    )
    assert description_query("Short one") == "" and description_query("") == ""


def test_defined_identifiers_are_at_line_starts_and_look_like_identifiers():
    rows = [
        _row(
            "k:x",
            0,
            "X",
            "- **spec.replicas** (int32)\n| `argocd.argoproj.io/sync-wave` | order |\n"
            "  [ scrape_interval: <duration> ]\n--goaway-chance float\nSee https://example.com/a/b for more.\n"
            "Use the maxSurge field to bound extra pods.\n- v1.2.3\n| docs/index.md | page |",
            title="X",
        )
    ]
    found = [i for i, _ in defined_identifiers(rows)]
    assert found == ["spec.replicas", "argocd.argoproj.io/sync-wave", "scrape_interval", "--goaway-chance"]


def test_balanced_sample_shares_the_budget_between_projects():
    def pairs_of(project: str, n: int) -> list[DocPair]:
        return [DocPair(f"q{project}{i}", f"{project}{i}", f"{project}:{i}", project, "title") for i in range(n)]

    pool = pairs_of("kubernetes", 500) + pairs_of("argocd", 300) + pairs_of("prometheus", 100) + pairs_of("cncf", 5)
    sample = balanced_sample(pool, 300, seed=0)
    counts = Counter(p.project for p in sample)
    assert len(sample) == 300 and counts["cncf"] == 5  # a small project gives all it has
    assert sorted(counts[p] for p in ("prometheus", "argocd", "kubernetes")) == [98, 98, 99]  # 295 split evenly
    assert [p for p in pool if p in set(sample)] == sample  # input order kept
    assert balanced_sample(pool, 10_000) == pool and balanced_sample(pool, 0) == []
