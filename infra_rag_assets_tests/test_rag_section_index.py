"""Hugo section index pages get the child listing their published page shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra_rag_assets.rag.ingest.blobs import BlobStore
from infra_rag_assets.rag.ingest.parse.section_index import LISTING_HEADING, section_listings
from infra_rag_assets.rag.ingest.pipeline import list_pages, parse_documents, parser_tag, snapshot_pages
from infra_rag_assets.rag.ingest.sources import Source

pytestmark = pytest.mark.unit

PAGES = {
    "_index.md": "---\ntitle: Docs\n---\n",
    "sec/_index.md": "---\ntitle: Authorization Resources\nweight: 5\n---\n",
    "sec/b.md": "---\ntitle: RoleBinding\ndescription: RoleBinding references a role.\nweight: 2\n---\nBody of b.\n",
    "sec/a.md": "---\ntitle: Role\ndescription: Role is a namespaced grouping of rules.\nweight: 1\n---\nBody.\n",
    "sec/hidden.md": "---\ntitle: Hidden\nhide_summary: true\n---\nNot listed.\n",
    "sec/sub/_index.md": "---\ntitle: Sub Section\ndescription: Nested pages.\nweight: 9\n---\n",
    "sec/sub/leaf.md": "---\ntitle: Leaf\n---\nA leaf page with text.\n",
    "quiet/_index.md": "---\ntitle: Quiet\nno_list: true\n---\n",
    "quiet/child.md": "---\ntitle: Child\ndescription: Never listed.\n---\nText.\n",
}


def _meta(rel: str) -> dict:
    import yaml

    return yaml.safe_load(PAGES[rel].split("---")[1])


def test_listing_orders_children_by_weight_and_honours_no_list_and_hide_summary():
    listings = section_listings([(rel, _meta(rel)) for rel in PAGES])
    assert set(listings) == {"_index.md", "sec/_index.md", "sec/sub/_index.md"}  # quiet: no_list
    lines = listings["sec/_index.md"].strip().splitlines()
    assert lines[0] == LISTING_HEADING
    assert [line for line in lines[1:] if line] == [
        "- **Role**: Role is a namespaced grouping of rules.",
        "- **RoleBinding**: RoleBinding references a role.",
        "- **Sub Section**: Nested pages.",
    ]
    # Sub-sections are children too; unweighted ones come last (Hugo's ByWeight).
    assert listings["_index.md"].strip().splitlines()[2:] == ["- **Authorization Resources**", "- **Quiet**"]
    assert "Leaf" in listings["sec/sub/_index.md"] and "Leaf" not in listings["sec/_index.md"]


def test_title_only_section_index_becomes_a_page_with_its_listing(tmp_path: Path):
    root = tmp_path / "docs"
    for rel, text in PAGES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    source = Source(
        name="k8s",
        project="kubernetes",
        kind="markdown_tree",
        license="CC-BY-4.0",
        url_template="https://example.test/{page_path}/",
        mirror=root,
    )
    blobs = BlobStore(tmp_path / "blobs")
    pages = snapshot_pages(list_pages([source]), blobs)
    docs, _ = parse_documents(pages, blobs)
    by_id = {d["doc_id"]: d for d in docs.to_dicts()}
    sec = by_id["k8s:sec"]
    assert sec["status"] == "ok"  # was no_content: title only
    assert "Role is a namespaced grouping of rules." in sec["text"] and "Hidden" not in sec["text"]
    assert by_id["k8s:quiet"]["status"] == "no_content"  # no_list: the site shows nothing either
    assert "Pages in this section" in [s["heading"] for s in _sections(sec)]

    # Re-parsing with every page reusable still recomputes the listing (it depends on siblings).
    (root / "sec" / "a.md").write_text(PAGES["sec/a.md"].replace("namespaced grouping", "renamed group"))
    pages2 = snapshot_pages(list_pages([source]), blobs)
    reusable = {(d["source_hash"], parser_tag("markdown_tree")): d for d in docs.to_dicts()}
    docs2, reused = parse_documents(pages2, blobs, reusable)
    sec2 = {d["doc_id"]: d for d in docs2.to_dicts()}["k8s:sec"]
    assert "Role is a renamed group of rules." in sec2["text"] and reused > 0


def _sections(doc: dict) -> list[dict]:
    import json

    return json.loads(doc["sections_json"])
