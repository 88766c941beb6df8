"""Bring each source's mirror to what sources.yaml names upstream, atomically.

Why: builds read mirrors only, so without a sync the docs never change in production. A git
source is brought to its pinned ``commit`` or the tip of its ``branch`` (``upstream_git``:
depth-1 fetch, the subpath or ``files`` exported, hostile entries refused per file); a URL
source downloads each URL, checked against its ``sha256`` (required for PDFs).

Layout: the mirror path becomes a symlink into ``.<mirror>.versions/`` beside it. A sync
builds the new tree in a staging folder there, writes the sync record (``SYNC_RECORD``: the
resolved commit, per-file statuses) into it, then swaps the symlink with one ``rename`` — a
reader sees the old tree or the new one, never half of either, and a failed sync leaves the
old mirror (and what serves) as it was. The mirror link is replaced, never resolved; the
previous tree (``KEEP_PREVIOUS`` of them) is kept for readers still in it, older ones go.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from .sources import KINDS, MAX_PAGE_BYTES, SYNC_RECORD, Source, read_sync_record
from .upstream_git import FileStatus, SyncError, export_files, fetch_commit, list_tree, resolve_commit, vet

KEEP_PREVIOUS = 1  # older trees kept beside the served one, for readers still in them
DEFAULT_TIMEOUT_S = 900.0  # one git fetch / download: a depth-1 fetch of kubernetes/website is the longest


@dataclass
class SyncReport:
    """The outcome for one source: ``updated``, ``unchanged`` or ``error`` (the mirror as it was)."""

    source: str
    status: str
    commit: str = ""
    previous_commit: str = ""
    ref: str = ""  # what sources.yaml asks for: a commit, ``branch <name>`` or ``urls``
    files: int = 0
    refused: list[FileStatus] = field(default_factory=list)
    error: str = ""

    def line(self) -> str:
        """One line for a terminal or a log: what moved, from where to where, what was refused."""
        if self.status == "error":
            return f"{self.source}: error: {self.error}"
        if self.status == "unchanged":
            state = f"unchanged at {self.commit[:12]}" if self.commit else "unchanged (checksums match)"
        else:
            moved = f"{self.previous_commit[:12] or 'unsynced'} → {self.commit[:12]}"
            state = f"updated {moved}" if self.commit else "updated (downloaded, checksums match)"
        refused = f", {len(self.refused)} refused ({_refused_summary(self.refused)})" if self.refused else ""
        return f"{self.source}: {state} ({self.ref}), {self.files} files{refused}"

    def to_dict(self) -> dict:
        return asdict(self)


def _refused_summary(refused: list[FileStatus]) -> str:
    return "; ".join(f"{f.path}: {f.status}" for f in refused[:3]) + (" …" if len(refused) > 3 else "")


def sync_sources(
    sources: list[Source], names: list[str] | None = None, timeout: float = DEFAULT_TIMEOUT_S
) -> list[SyncReport]:
    """Sync every source (or those named); one report each, errors included, never a raise."""
    known = {s.name for s in sources}
    unknown = sorted(set(names or []) - known)
    if unknown:
        raise ValueError(f"unknown source {', '.join(unknown)} (sources.yaml has {', '.join(sorted(known))})")
    return [sync_source(s, timeout=timeout) for s in sources if not names or s.name in names]


def sync_source(
    source: Source,
    max_bytes: int = MAX_PAGE_BYTES,
    timeout: float = DEFAULT_TIMEOUT_S,
    keep_previous: int = KEEP_PREVIOUS,
) -> SyncReport:
    """Bring one mirror to its upstream; any failure is an ``error`` report, the mirror untouched."""
    up = source.upstream
    ref = "urls"
    if "git" in up:
        ref = str(up.get("commit") or (f"branch {up['branch']}" if up.get("branch") else "HEAD"))
    previous = read_sync_record(source.mirror)
    report = SyncReport(source.name, "error", ref=ref, previous_commit=previous.get("commit", ""))
    try:
        if source.mirror is None:
            raise SyncError("no 'mirror:' folder configured to sync into")
        if source.mirror.parent.name.endswith(".versions"):  # a resolved link: syncing would nest a chain
            raise SyncError(f"{source.mirror} is a tree inside a versions folder, not the mirror link")
        if not ("git" in up or up.get("urls")):
            raise SyncError("upstream names neither git nor urls: nothing to sync from")
        with _locked(source.mirror):
            sync = _sync_git if "git" in up else _sync_urls
            return sync(source, report, previous, max_bytes, timeout, keep_previous)
    except SyncError as exc:
        report.error = str(exc)
    except OSError as exc:  # a read-only corpus, a full disk: one line, nothing swapped
        report.error = f"cannot write the mirror: {exc.strerror or exc} ({exc.filename or source.mirror})"
    return report


def _sync_git(
    source: Source, report: SyncReport, previous: dict, max_bytes: int, timeout: float, keep: int
) -> SyncReport:
    up = source.upstream
    url = str(up["git"])
    sha = resolve_commit(url, str(up.get("commit") or ""), str(up.get("branch") or ""), timeout)
    selection = {"subpath": up.get("subpath") or "", "files": up.get("files") or {}, "kind": source.kind}
    report.commit = sha
    if (previous.get("url"), previous.get("commit"), previous.get("selection")) == (url, sha, selection):
        report.status, report.files = "unchanged", int(previous.get("files", 0))
        report.refused = [FileStatus(**f) for f in previous.get("refused", [])]
        return report
    mirror = source.mirror
    assert mirror is not None
    with _staging(mirror) as (scratch, tree):
        repo = scratch / "repo.git"
        fetch_commit(url, sha, repo, timeout)
        wanted, refused = _select(source, list_tree(repo, sha, _tree_paths(source), timeout), max_bytes)
        if not wanted:
            where = f"under {selection['subpath']!r}" if selection["subpath"] else "in the listed files"
            raise SyncError(f"commit {sha[:12]} has no {'/'.join(KINDS[source.kind])} files {where}")
        export_files(repo, wanted, tree, timeout)
        report.status, report.files, report.refused = "updated", len(wanted), refused
        record = {"url": url, "commit": sha, "selection": selection}
        _swap_in(mirror, tree, sha[:12], {**record, **_record_tail(report)}, keep)
    return report


def _tree_paths(source: Source) -> list[str]:
    files = source.upstream.get("files") or {}
    if files:
        return [str(p) for p in files.values()]
    subpath = str(source.upstream.get("subpath") or "").strip("/")
    return [subpath] if subpath else []


def _select(source: Source, tree, max_bytes: int):
    """(files to write with their mirror paths, refused statuses) for this source's kind."""
    files = {str(v): str(k) for k, v in (source.upstream.get("files") or {}).items()}
    prefix = str(source.upstream.get("subpath") or "").strip("/")
    missing = sorted(set(files) - {f.path for f in tree})
    if missing:
        raise SyncError(f"{missing[0]} is not in the commit ({len(missing)} listed file(s) missing)")
    wanted, refused = [], []
    for file in tree:
        rel = files.get(file.path) or (file.path[len(prefix) + 1 :] if prefix else file.path)
        status = vet(file, max_bytes)
        if status.status != "ok":
            refused.append(status)
        elif rel.lower().endswith(KINDS[source.kind]):
            wanted.append((file, rel))
    return wanted, refused


def _sync_urls(
    source: Source, report: SyncReport, previous: dict, max_bytes: int, timeout: float, keep: int
) -> SyncReport:
    entries = _url_entries(source)
    if all(e["sha256"] for e in entries) and previous.get("urls") == entries:
        report.status, report.files = "unchanged", len(entries)
        return report
    mirror = source.mirror
    assert mirror is not None
    with _staging(mirror) as (_, tree):
        tree.mkdir()
        for entry in entries:
            _download(entry, tree / entry["name"], max_bytes, timeout)
        report.status, report.files = "updated", len(entries)
        _swap_in(mirror, tree, "urls", {"urls": entries, **_record_tail(report)}, keep)
    return report


def _url_entries(source: Source) -> list[dict]:
    """Each URL as {url, name, sha256}; a PDF without a checksum is refused before any download."""
    entries = []
    for raw in source.upstream.get("urls") or []:
        item = raw if isinstance(raw, dict) else {"url": str(raw)}
        url = str(item.get("url", ""))
        name = str(item.get("name") or Path(urlsplit(url).path).name or "index.html")
        if not re.fullmatch(r"[\w.+-]+", name) or name.startswith("."):
            raise SyncError(f"url {url!r}: file name {name!r} is not a plain file name")
        if not name.lower().endswith(KINDS[source.kind]):
            name += KINDS[source.kind][0]
        sha = str(item.get("sha256") or "").lower()
        if source.kind == "pdf_files" and not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise SyncError(f"url {url!r} has no sha256 (required for pdf_files: a PDF must be the one reviewed)")
        entries.append({"url": url, "name": name, "sha256": sha})
    return entries


def _download(entry: dict, target: Path, max_bytes: int, timeout: float) -> None:
    digest, size = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(entry["url"], timeout=timeout) as resp, target.open("xb") as out:
            while block := resp.read(1 << 20):
                size += len(block)
                if size > max_bytes:
                    raise SyncError(f"{entry['url']}: more than {max_bytes} bytes (the page cap)")
                digest.update(block)
                out.write(block)
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise SyncError(f"upstream unreachable: {entry['url']} ({getattr(exc, 'reason', exc)})") from None
    if entry["sha256"] and digest.hexdigest() != entry["sha256"]:
        raise SyncError(
            f"{entry['url']}: sha256 {digest.hexdigest()[:12]}… is not the {entry['sha256'][:12]}… sources.yaml pins"
        )


def _record_tail(report: SyncReport) -> dict:
    return {
        "source": report.source,
        "ref": report.ref,
        "synced_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": report.files,
        "refused": [asdict(f) for f in report.refused],
    }


def versions_dir(mirror: Path) -> Path:
    """Where a synced mirror's trees live (beside it, so the swap is a same-filesystem rename)."""
    return mirror.parent / f".{mirror.name}.versions"


@contextmanager
def _locked(mirror: Path) -> Iterator[None]:
    folder = versions_dir(mirror)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SyncError(f"another sync of {mirror} is running") from None
        for stale in folder.glob(".staging-*"):  # left by a sync killed mid-way; none can be live here
            shutil.rmtree(stale, ignore_errors=True)
        yield


@contextmanager
def _staging(mirror: Path) -> Iterator[tuple[Path, Path]]:
    """(scratch folder, tree folder to fill); removed afterwards unless the tree was swapped in."""
    scratch = Path(tempfile.mkdtemp(prefix=".staging-", dir=versions_dir(mirror)))
    try:
        yield scratch, scratch / "tree"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _swap_in(mirror: Path, tree: Path, label: str, record: dict, keep_previous: int) -> None:
    """Write the record, move the tree beside the others, point the mirror symlink at it.

    The mirror link itself is replaced (a temp link renamed over it: atomic, so a kill -9 at
    any point leaves the previous tree or the new one serving); it is never resolved, so no
    chain of links can grow. Then all but the newest ``keep_previous`` older trees go.
    """
    (tree / SYNC_RECORD).write_text(json.dumps(record, indent=2, sort_keys=True), encoding="utf-8")
    folder = versions_dir(mirror)
    final = folder / f"{label}-{time.time_ns()}"
    os.rename(tree, final)
    link = folder / f".link-{time.time_ns()}"
    os.symlink(os.path.relpath(final, mirror.parent), link)
    previous = _served_tree(mirror)
    if mirror.exists() and not mirror.is_symlink():  # a mirror copied by hand: moved aside once
        previous = folder / f"pre-sync-{time.time_ns()}"
        os.rename(mirror, previous)
    os.replace(link, mirror)  # atomic: readers see the old tree or the new one
    _prune(folder, final, previous, keep_previous)


def _served_tree(mirror: Path) -> Path | None:
    """The tree the mirror link names now (one readlink, never a chain resolved)."""
    if not mirror.is_symlink():
        return None
    target = Path(os.readlink(mirror))
    return target if target.is_absolute() else mirror.parent / target


def _prune(folder: Path, current: Path, previous: Path | None, keep_previous: int) -> None:
    """Remove stale temp links, and old trees beyond ``keep_previous`` (the last served first kept)."""
    for temp in folder.glob(".link-*"):
        temp.unlink(missing_ok=True)
    olds = sorted(
        (p for p in folder.iterdir() if not p.name.startswith(".") and p.name != current.name),
        key=lambda p: (previous is not None and p.name == previous.name, _stamp(p.name)),
        reverse=True,
    )
    for old in olds[max(keep_previous, 0) :]:
        shutil.rmtree(old, ignore_errors=True)


def _stamp(name: str) -> int:
    """The time_ns a tree's name ends with (0 for a name without one)."""
    digits = re.search(r"(\d+)$", name)
    return int(digits.group(1)) if digits else 0
