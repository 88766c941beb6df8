"""Hundreds of syncs keep one readable mirror and a bounded number of trees; a kill -9 mid-swap is safe.

Real git (a bare repository over file://). Each sync reloads sources.yaml as the CLI does on
every run: the mirror link must be replaced each time, never resolved into a chain of links
(which broke reads with "Too many levels of symbolic links" after 41 syncs).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from upstream_repo import Upstream, sources_yaml

from infra_rag_assets.rag.ingest.sources import iter_pages, load_sources
from infra_rag_assets.rag.ingest.upstream_sync import KEEP_PREVIOUS, sync_source, versions_dir


def _sync_and_read(config: Path) -> tuple[str, dict[str, bytes]]:
    """One CLI-like run: load sources.yaml, sync, load again and read every page of the mirror."""
    report = sync_source(load_sources(config)[0])
    assert report.status in {"updated", "unchanged"}, report.line()
    source = load_sources(config)[0]
    return report.status, {p.rel_path: p.abs_path.read_bytes() for p in iter_pages(source)}


def _trees(mirror: Path) -> list[str]:
    return sorted(p.name for p in versions_dir(mirror).iterdir() if not p.name.startswith("."))


def _temps(mirror: Path) -> list[str]:
    return sorted(p.name for p in versions_dir(mirror).iterdir() if p.name.startswith((".link-", ".staging-")))


@pytest.mark.slow
def test_a_pinned_source_moving_back_and_forth_1000_times_stays_readable_and_bounded(tmp_path):
    upstream = Upstream(tmp_path / "up", {"index.md": b"# Docs\n\nVersion A.\n"})
    pins = [upstream.head(), upstream.commit("b", {"index.md": b"# Docs\n\nVersion B.\n"})]
    mirror = tmp_path / "mirror" / "docs"
    for i in range(1000):  # the bound: 1,000 consecutive updates (34 s on quiet cores)
        config = sources_yaml(
            tmp_path / "s.yaml", mirror, {"git": upstream.url, "commit": pins[i % 2], "subpath": "docs"}
        )
        status, pages = _sync_and_read(config)
        assert status == "updated", i
        assert pages == {"index.md": f"# Docs\n\nVersion {'AB'[i % 2]}.\n".encode()}, i
        assert len(_trees(mirror)) <= 1 + KEEP_PREVIOUS, (i, _trees(mirror))
        assert mirror.is_symlink() and not Path(os.readlink(mirror)).is_symlink(), i
    assert not list(versions_dir(mirror).rglob(".*.versions"))  # nothing nested in a tree


@pytest.mark.slow
def test_a_branch_source_with_60_new_commits_and_keep_3(tmp_path):
    upstream = Upstream(tmp_path / "up", {"index.md": b"# 0\n"})
    mirror = tmp_path / "mirror" / "docs"
    config = sources_yaml(tmp_path / "s.yaml", mirror, {"git": upstream.url, "branch": "main", "subpath": "docs"})
    for i in range(1, 61):
        upstream.commit(f"c{i}", {"index.md": f"# {i}\n".encode()})
        report = sync_source(load_sources(config)[0], keep_previous=3)
        assert report.status == "updated", (i, report.line())
        pages = {p.rel_path: p.abs_path.read_bytes() for p in iter_pages(load_sources(config)[0])}
        assert pages == {"index.md": f"# {i}\n".encode()}, i
        assert len(_trees(mirror)) <= 4, (i, _trees(mirror))
    assert _sync_and_read(config)[0] == "unchanged"


CRASH = """
import os, signal, sys
from infra_rag_assets.rag.ingest import upstream_sync
from infra_rag_assets.rag.ingest.sources import load_sources

def die(src, dst):  # the swap point: the new tree is in place, the temp link made, not yet renamed
    os.kill(os.getpid(), signal.SIGKILL)

upstream_sync.os.replace = die
upstream_sync.sync_source(load_sources(sys.argv[1])[0])
"""


@pytest.mark.unit
def test_kill_9_at_the_swap_leaves_the_previous_tree_serving_and_the_next_sync_cleans_up(tmp_path):
    upstream = Upstream(tmp_path / "up", {"index.md": b"# old\n"})
    old = upstream.head()
    new = upstream.commit("new", {"index.md": b"# new\n"})
    mirror = tmp_path / "mirror" / "docs"
    config = sources_yaml(tmp_path / "s.yaml", mirror, {"git": upstream.url, "commit": old, "subpath": "docs"})
    assert _sync_and_read(config)[1] == {"index.md": b"# old\n"}
    sources_yaml(tmp_path / "s.yaml", mirror, {"git": upstream.url, "commit": new, "subpath": "docs"})
    crashed = subprocess.run([sys.executable, "-c", CRASH, str(config)], capture_output=True, timeout=120)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr.decode()[-2000:]
    source = load_sources(config)[0]
    assert source.synced["commit"] == old  # the previous tree still serves, whole
    assert {p.rel_path: p.abs_path.read_bytes() for p in iter_pages(source)} == {"index.md": b"# old\n"}
    assert _temps(mirror) and len(_trees(mirror)) == 2  # what the crash left: a temp link, a staging folder
    status, pages = _sync_and_read(config)
    assert (status, pages) == ("updated", {"index.md": b"# new\n"})
    assert _temps(mirror) == [] and len(_trees(mirror)) <= 1 + KEEP_PREVIOUS


@pytest.mark.unit
def test_a_resolved_mirror_path_is_refused_not_nested(tmp_path):
    upstream = Upstream(tmp_path / "up", {"index.md": b"# a\n"})
    mirror = tmp_path / "mirror" / "docs"
    config = sources_yaml(tmp_path / "s.yaml", mirror, {"git": upstream.url, "branch": "main", "subpath": "docs"})
    _sync_and_read(config)
    assert load_sources(config)[0].mirror == mirror  # the link, not the tree it names
    source = dataclasses.replace(load_sources(config)[0], mirror=mirror.resolve())  # what the old loader gave
    upstream.commit("b", {"index.md": b"# b\n"})
    report = sync_source(source)
    assert report.status == "error" and "versions folder" in report.error
    assert _sync_and_read(config)[1] == {"index.md": b"# b\n"}
