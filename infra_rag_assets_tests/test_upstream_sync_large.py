"""A 2 GB page added upstream: refused from its blob size before anything is written.

Real git, a real 2 GiB blob (a sparse file upstream, so the disk holds ~2 MB of pack); git
still hashes and compresses 2 GiB of zeros on commit and on fetch, hence the slow tier.
"""

from __future__ import annotations

import os
import shutil

import pytest
from upstream_repo import Upstream, sources_yaml

from infra_rag_assets.rag.ingest.sources import MAX_PAGE_BYTES, iter_pages, load_sources
from infra_rag_assets.rag.ingest.upstream_sync import sync_source

pytestmark = pytest.mark.slow

TWO_GB = 2 * 1024**3


def test_two_gb_page_upstream_is_refused_and_the_rest_syncs(tmp_path):
    upstream = Upstream(tmp_path / "up", {"index.md": b"# Docs\n\nStart.\n"})
    sha = upstream.add_sparse_file("huge.md", TWO_GB)
    path = sources_yaml(
        tmp_path / "s.yaml", tmp_path / "mirror" / "docs", {"git": upstream.url, "commit": sha, "subpath": "docs"}
    )
    free_before = shutil.disk_usage(tmp_path).free
    report = sync_source(load_sources(path)[0])
    assert report.status == "updated" and report.files == 1, report.line()
    [refused] = report.refused
    assert (refused.path, refused.status) == ("docs/huge.md", "too_large")
    assert refused.reason == f"{TWO_GB} bytes > {MAX_PAGE_BYTES}: not fetched into the mirror"
    source = load_sources(path)[0]
    assert [p.rel_path for p in iter_pages(source)] == ["index.md"]
    assert not os.path.exists(source.mirror / "huge.md")
    assert free_before - shutil.disk_usage(tmp_path).free < 200_000_000  # nothing near 2 GB was written
