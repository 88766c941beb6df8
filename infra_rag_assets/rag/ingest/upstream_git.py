"""One upstream commit, shallow-fetched and exported file by file: git as hostile input.

Why not ``git checkout``: a checkout writes whatever the commit holds (a symlink pointing out
of the mirror, a multi-GB blob) before anything can look at it. Here the commit is fetched at
depth 1 into a scratch bare repository, its tree is listed with blob sizes (``ls-tree -l``
reads object headers; nothing is inflated), and only regular files are written, each from
``cat-file`` into a fresh file opened with ``O_EXCL | O_NOFOLLOW``. Symlinks, submodules,
unsafe paths and blobs over the page cap become a per-file status and are never written.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
MISSING_COMMIT = ("not our ref", "no such remote ref", "couldn't find remote ref", "unadvertised object")
_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_ASKPASS": "echo", "LC_ALL": "C"}


class SyncError(RuntimeError):
    """A sync that could not happen (the message is one line); the mirror is left as it was."""


class GitFailed(SyncError):
    """A git command exited non-zero; ``detail`` is git's own one-line reason."""

    def __init__(self, command: str, detail: str):
        super().__init__(f"git {command} failed: {detail}")
        self.detail = detail


@dataclass(frozen=True)
class TreeFile:
    """One entry of the commit's tree: git mode, object id, blob size (-1 for no blob) and path."""

    mode: str
    oid: str
    size: int
    path: str


@dataclass(frozen=True)
class FileStatus:
    """What happened to one upstream file: ``ok`` or why it was not written."""

    path: str
    status: str  # ok | symlink | submodule | too_large | unsafe_path
    reason: str = ""


def git(args: list[str], cwd: Path | None, timeout: float) -> bytes:
    """Run git without prompts or system config; a failure is one :class:`GitFailed` line."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=timeout, env={**os.environ, **_ENV})
    except subprocess.TimeoutExpired:
        raise SyncError(f"git {args[0]} timed out after {timeout:.0f} s") from None
    except FileNotFoundError:
        raise SyncError("git is not installed (apt-get install git)") from None
    if done.returncode:
        lines = [ln.strip() for ln in done.stderr.decode(errors="replace").splitlines() if ln.strip()]
        fatal = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
        raise GitFailed(args[0], (fatal or lines or [f"exit {done.returncode}"])[0][:300])
    return done.stdout


def resolve_commit(url: str, commit: str, branch: str, timeout: float) -> str:
    """The full sha to fetch: the pinned commit as is, else the branch's (or HEAD's) tip now."""
    if commit:
        if not FULL_SHA.match(commit.lower()):
            raise SyncError(f"commit {commit!r} is not a full 40-hex sha (a server is only asked for full ones)")
        return commit.lower()
    ref = f"refs/heads/{branch}" if branch else "HEAD"
    try:
        listing = git(["ls-remote", "--", url, ref], None, timeout).decode()
    except GitFailed as exc:
        raise SyncError(f"upstream unreachable: {url} ({exc.detail})") from None
    tips = [line.split("\t") for line in listing.splitlines() if line.strip()]
    tip = next((sha for sha, name in tips if name == ref), "")
    if not tip:
        raise SyncError(f"branch {branch or 'HEAD'!r} not found in {url}")
    return tip


def fetch_commit(url: str, sha: str, repo: Path, timeout: float) -> None:
    """Fetch exactly ``sha`` at depth 1 (no history, no tags) into a new bare repository."""
    git(["init", "-q", "--bare", str(repo)], None, timeout)
    try:
        # unpackLimit=1: keep the pack (index-pack streams big blobs) instead of loose objects
        git(["-c", "fetch.unpackLimit=1", "fetch", "-q", "--depth", "1", "--no-tags", "--", url, sha], repo, timeout)
    except GitFailed as exc:
        if any(marker in exc.detail for marker in MISSING_COMMIT):
            raise SyncError(
                f"commit {sha[:12]} is not in {url} (never pushed, or removed from history by a force-push)"
            ) from None
        raise SyncError(f"upstream unreachable: {url} ({exc.detail})") from None


def list_tree(repo: Path, sha: str, paths: Iterable[str], timeout: float) -> list[TreeFile]:
    """Every file under ``paths`` in the commit (all of it for none), with sizes from headers."""
    raw = git(["ls-tree", "-r", "-l", "-z", "--full-tree", sha, "--", *paths], repo, timeout)
    files = []
    for record in raw.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, _kind, oid, size = meta.decode().split()
        files.append(TreeFile(mode, oid, int(size) if size.isdigit() else -1, path.decode(errors="surrogateescape")))
    return files


def vet(file: TreeFile, max_bytes: int) -> FileStatus:
    """Whether a tree entry may be written: regular, under the cap, a plain relative path."""
    parts = file.path.split("/")
    if file.mode == "120000":
        return FileStatus(file.path, "symlink", "symlink in upstream: not written (could point out of the mirror)")
    if file.mode == "160000":
        return FileStatus(file.path, "submodule", "submodule: not fetched")
    if file.mode not in ("100644", "100755"):
        return FileStatus(file.path, "unsafe_path", f"git mode {file.mode}: not a regular file")
    if any(p in ("", ".", "..", ".git") for p in parts) or "\\" in file.path:
        return FileStatus(file.path, "unsafe_path", "path leaves or escapes the mirror: not written")
    if file.size > max_bytes:
        return FileStatus(file.path, "too_large", f"{file.size} bytes > {max_bytes}: not fetched into the mirror")
    return FileStatus(file.path, "ok")


def export_files(repo: Path, wanted: list[tuple[TreeFile, str]], dest: Path, timeout: float) -> None:
    """Write each (tree file, path under ``dest``) from one ``cat-file --batch`` process."""
    with subprocess.Popen(
        ["git", "cat-file", "--batch"],
        cwd=repo,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, **_ENV},
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            for file, rel in wanted:
                proc.stdin.write(file.oid.encode() + b"\n")
                proc.stdin.flush()
                header = proc.stdout.readline().split()
                if len(header) != 3 or header[1] != b"blob":
                    raise SyncError(f"git cat-file: {file.path} is not a readable blob ({b' '.join(header)!r})")
                _write_new(dest, rel, proc.stdout, int(header[2]))
                proc.stdout.read(1)  # the newline after each object
        finally:
            proc.stdin.close()
            proc.wait(timeout=timeout)


def _write_new(dest: Path, rel: str, stream, size: int) -> None:
    target = dest / rel
    target.parent.mkdir(parents=True, exist_ok=True)  # only folders this export made: no symlinks here
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as out:
        left = size
        while left:
            block = stream.read(min(left, 1 << 20))
            if not block:
                raise SyncError(f"git cat-file ended early in {rel}")
            out.write(block)
            left -= len(block)
