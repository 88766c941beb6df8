"""Upstream sync against real git (a bare repository over file://): good and bad upstreams.

Every bad upstream ends in one error line or a per-file status, with the old mirror intact.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from upstream_repo import Upstream, sources_yaml

from infra_rag_assets.cli.main import main
from infra_rag_assets.rag.ingest.sources import SYNC_RECORD, iter_pages, load_sources
from infra_rag_assets.rag.ingest.upstream_sync import sync_source

pytestmark = pytest.mark.unit

PAGES = {
    "index.md": b"# Docs\n\nThe start page of the docs.\n",
    "guides/alerting.md": b"# Alerting\n\nRoutes send alerts to receivers.\n",
    "guides/scraping.md": b"# Scraping\n\nTargets are scraped every 15 seconds.\n",
    "img/logo.png": b"\x89PNG not a page",
}


@pytest.fixture
def upstream(tmp_path) -> Upstream:
    return Upstream(tmp_path / "up", PAGES)


def _source(tmp_path: Path, upstream: Upstream, folder: str = "docs", **pin):
    pin = pin or {"commit": upstream.head()}
    path = sources_yaml(
        tmp_path / f"{folder}.yaml", tmp_path / "mirror" / folder, {"git": upstream.url, **pin, "subpath": "docs"}
    )
    return load_sources(path)[0]


def _mirror_state(source) -> dict[str, bytes]:
    root = source.mirror
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_sync_brings_the_mirror_to_the_pinned_commit_then_reports_unchanged(tmp_path, upstream):
    first = upstream.head()
    source = _source(tmp_path, upstream)
    report = sync_source(source)
    assert report.status == "updated" and report.commit == first and report.files == 3, report.line()
    assert source.mirror.is_symlink()  # the swap point
    pages = sorted(p.rel_path for p in iter_pages(source))
    assert pages == ["guides/alerting.md", "guides/scraping.md", "index.md"]  # the png is not a page
    reloaded = load_sources(tmp_path / "docs.yaml")[0]
    assert reloaded.synced["commit"] == first and reloaded.upstream_ref() == f"{upstream.url}@{first}"
    again = sync_source(reloaded)
    assert again.status == "unchanged" and again.line() == f"docs: unchanged at {first[:12]} ({first}), 3 files"


def test_a_new_commit_swaps_the_whole_tree(tmp_path, upstream):
    sync_source(_source(tmp_path, upstream))
    old_tree = os.path.realpath(tmp_path / "mirror" / "docs")
    second = upstream.commit(
        "edit two, delete one",
        {
            "index.md": b"# Docs\n\nNew start.\n",
            "guides/alerting.md": b"# Alerting\n\nNew.\n",
            "guides/scraping.md": None,
        },
    )
    source = _source(tmp_path, upstream, commit=second)
    report = sync_source(source)
    assert report.status == "updated" and report.previous_commit != second and report.commit == second
    assert set(_mirror_state(source)) == {"index.md", "guides/alerting.md", SYNC_RECORD}
    assert Path(old_tree).is_dir()  # the previous tree stays for readers still in it


def _assert_error_keeps_mirror(tmp_path, upstream, expected: str, good_commit: str = "", **pin):
    good = _source(tmp_path, upstream, commit=good_commit or upstream.head())
    assert sync_source(good).status in ("updated", "unchanged")
    before = _mirror_state(good)
    bad = _source(tmp_path, upstream, **pin)
    report = sync_source(bad)
    assert report.status == "error" and expected in report.error, report.line()
    assert "\n" not in report.line()
    assert _mirror_state(bad) == before  # same tree, same record: nothing half-written
    leftovers = [p.name for p in (tmp_path / "mirror" / ".docs.versions").iterdir() if p.name.startswith(".staging")]
    assert leftovers == []
    return report


def test_unreachable_upstream_is_one_error_line(tmp_path, upstream):
    report = _assert_error_keeps_mirror(tmp_path, upstream, "upstream unreachable", git="file:///nonexistent/repo.git")
    assert report.line().startswith("docs: error: upstream unreachable: file:///nonexistent/repo.git (")


def test_a_commit_that_is_not_there(tmp_path, upstream):
    _assert_error_keeps_mirror(tmp_path, upstream, "commit 123456789012 is not in", commit="1234567890" * 4)


def test_short_commit_is_refused_before_any_fetch(tmp_path, upstream):
    _assert_error_keeps_mirror(tmp_path, upstream, "not a full 40-hex sha", commit=upstream.head()[:8])


def test_force_push_pinned_commit_gone_is_an_error_branch_tracking_follows(tmp_path, upstream):
    initial = upstream.head()
    pinned = upstream.commit("second", {"guides/alerting.md": b"# Alerting\n\nSecond.\n"})
    tracking = _source(tmp_path, upstream, "tracking", branch="main")
    assert sync_source(tracking).commit == pinned
    rewritten = upstream.rewrite_history({"guides/alerting.md": b"# Alerting\n\nRewritten.\n"})
    # The pin moves from the synced initial commit to one a force-push has since removed upstream.
    report = _assert_error_keeps_mirror(tmp_path, upstream, "force-push", good_commit=initial, commit=pinned)
    assert f"commit {pinned[:12]} is not in {upstream.url}" in report.error
    followed = sync_source(tracking)  # branch tracking follows the rewritten branch, and says so
    assert followed.status == "updated" and (followed.previous_commit, followed.commit) == (pinned, rewritten)
    assert f"updated {pinned[:12]} → {rewritten[:12]} (branch main)" in followed.line()
    assert (tracking.mirror / "guides" / "alerting.md").read_bytes() == b"# Alerting\n\nRewritten.\n"


def test_symlinks_upstream_are_refused_and_never_written(tmp_path, upstream):
    upstream.add_symlink("passwd.md", "../../../../../../etc/passwd")
    upstream.add_symlink("escape", "/etc")
    source = _source(tmp_path, upstream)
    report = sync_source(source)
    assert report.status == "updated" and report.files == 3
    assert {(f.path, f.status) for f in report.refused} == {("docs/passwd.md", "symlink"), ("docs/escape", "symlink")}
    assert "2 refused (docs/escape: symlink; docs/passwd.md: symlink)" in report.line()
    tree = Path(os.path.realpath(source.mirror))
    assert not [p for p in tree.rglob("*") if p.is_symlink()]
    assert all(e.status == "ok" for e in (p.entry for p in iter_pages(source)))
    record = json.loads((source.mirror / SYNC_RECORD).read_text())
    assert {f["path"] for f in record["refused"]} == {"docs/passwd.md", "docs/escape"}


def test_blob_over_the_page_cap_is_refused_from_its_size_before_checkout(tmp_path, upstream):
    upstream.commit("big page", {"big.md": b"x" * 300_000})
    source = _source(tmp_path, upstream)
    report = sync_source(source, max_bytes=100_000)
    assert [(f.path, f.status) for f in report.refused] == [("docs/big.md", "too_large")]
    assert "300000 bytes > 100000" in report.refused[0].reason and not (source.mirror / "big.md").exists()


def test_a_sync_that_dies_mid_export_leaves_the_old_mirror(tmp_path, upstream, monkeypatch):
    """Half the new tree written, then a failure (disk full): the mirror still shows the old tree."""
    from infra_rag_assets.rag.ingest import upstream_git, upstream_sync

    def half_then_fail(repo, wanted, dest, timeout):
        upstream_git.export_files(repo, wanted[:1], dest, timeout)
        raise OSError(28, "No space left on device", str(dest))

    initial = upstream.head()
    second = upstream.commit("edit", {"index.md": b"# Docs\n\nEdited.\n"})
    good = sync_source(_source(tmp_path, upstream, commit=initial))  # synced before the failure is armed
    monkeypatch.setattr(upstream_sync, "export_files", half_then_fail)
    report = _assert_error_keeps_mirror(tmp_path, upstream, "No space left", good_commit=initial, commit=second)
    assert good.status == "updated"
    assert report.line().startswith("docs: error: cannot write the mirror: No space left on device")


def _pdf(tmp_path: Path) -> tuple[Path, str]:
    import pymupdf

    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Supply chain security whitepaper")
    path = tmp_path / "paper.pdf"
    doc.save(path)
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def test_pdf_urls_need_and_match_their_sha256(tmp_path):
    pdf, digest = _pdf(tmp_path)
    mirror = tmp_path / "mirror" / "pdf"

    def sync(**entry):
        path = sources_yaml(tmp_path / "s.yaml", mirror, {"urls": [{"url": pdf.as_uri(), **entry}]}, kind="pdf_files")
        return sync_source(load_sources(path)[0])

    assert "has no sha256" in sync().error and not mirror.exists()
    report = sync(sha256=digest, name="paper-v1.pdf")
    assert report.status == "updated" and (mirror / "paper-v1.pdf").read_bytes() == pdf.read_bytes()
    assert sync(sha256=digest, name="paper-v1.pdf").status == "unchanged"
    wrong = sync(sha256="0" * 64, name="paper-v1.pdf")
    assert wrong.status == "error" and "is not the 000000000000… sources.yaml pins" in wrong.error
    assert (mirror / "paper-v1.pdf").read_bytes() == pdf.read_bytes()
    gone = sync(sha256=digest, name="paper-v1.pdf", url=(tmp_path / "missing.pdf").as_uri())
    assert gone.status == "error" and gone.error.startswith("upstream unreachable:")


def test_cli_sources_sync(tmp_path, upstream):
    path = sources_yaml(
        tmp_path / "sources.yaml",
        tmp_path / "mirror" / "docs",
        {"git": upstream.url, "branch": "main", "subpath": "docs"},
    )
    runner = CliRunner()
    result = runner.invoke(main, ["--sources", str(path), "sources", "sync", "--json"])
    assert result.exit_code == 0, result.output
    [report] = json.loads(result.stdout)
    assert report["status"] == "updated" and report["commit"] == upstream.head()
    unknown = runner.invoke(main, ["--sources", str(path), "sources", "sync", "--source", "nope"])
    assert unknown.exit_code == 2 and "unknown source nope" in unknown.output
    broken = sources_yaml(
        tmp_path / "broken.yaml", tmp_path / "mirror" / "docs", {"git": "file:///nonexistent.git", "branch": "main"}
    )
    failed = runner.invoke(main, ["--sources", str(broken), "sources", "sync"])
    assert failed.exit_code == 1 and "docs: error: upstream unreachable" in failed.output
