"""Read a mirror as hostile input: nothing outside its root, nothing but regular files.

Mirrors come from third-party repositories and people's folders, so a page may be a symlink
to ``/etc/os-release``, a loop, a FIFO (opening one blocks) or a sparse 10 GB file. The walk
never follows folder symlinks and gives every matching entry exactly one :class:`Entry`;
problems become a status and reason instead of an exception or a silent skip.

Choices: a file symlink whose target resolves inside the mirror is followed (its record keeps
the link's own path; dedup then marks it a duplicate of its target). A folder symlink is
never followed (a loop or a second copy of a subtree): one ``skipped`` record when it stays
inside the mirror, one ``error`` record when it leaves it or is broken. Reads open the
resolved target with ``O_NOFOLLOW | O_NONBLOCK``, check with ``fstat`` that it is still the
regular file the walk saw (same device and inode, so a swap after the walk is refused) and
that the size is under the cap, and only then read, in fixed-size blocks.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BLOCK = 1 << 20  # bytes read at a time: hashing a file costs this much memory, whatever its size
STATUS_SKIPPED = "skipped"  # not a page (a FIFO, a device, a folder symlink): recorded, never read


class UnsafePath(OSError):
    """The entry may not be read (outside the mirror, not a regular file, changed since the walk)."""


@dataclass(frozen=True)
class Entry:
    """One listed entry of a mirror. ``target`` is what a read opens (None when it must not)."""

    rel_path: str
    target: Path | None
    status: str = "ok"
    reason: str = ""
    size: int = 0
    identity: tuple[int, int] = (0, 0)  # (st_dev, st_ino) of the target at walk time


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def walk_mirror(root: Path, suffixes: tuple[str, ...]) -> Iterator[Entry]:
    """Entries whose name ends in one of ``suffixes`` (plus every folder symlink), sorted."""
    real_root = os.path.realpath(root)
    found: list[Entry] = []

    def onerror(exc: OSError) -> None:
        rel = os.path.relpath(exc.filename or str(root), real_root)
        found.append(Entry(rel.replace(os.sep, "/"), None, "error", f"folder not readable: {exc.strerror}"))

    for folder, dirs, files in os.walk(real_root, onerror=onerror, followlinks=False):
        for name in list(dirs):
            path = os.path.join(folder, name)
            if os.path.islink(path):  # os.walk lists folder symlinks as dirs but never enters them
                found.append(_folder_link(path, real_root))
        for name in files:
            if name.lower().endswith(suffixes):
                found.append(_file_entry(os.path.join(folder, name), real_root))
    yield from sorted(found, key=lambda e: e.rel_path.split("/"))  # Path order, as before


def _rel(path: str, root: str) -> str:
    return os.path.relpath(path, root).replace(os.sep, "/")


def _folder_link(path: str, root: str) -> Entry:
    rel = _rel(path, root)
    try:
        target = os.path.realpath(path, strict=True)
    except OSError as exc:
        kind = "folder symlink loop" if exc.errno == errno.ELOOP else "dangling folder symlink"
        return Entry(rel, None, "error", f"{kind}: not followed")
    if not _inside(target, root):
        return Entry(rel, None, "error", "folder symlink points outside the mirror; not followed")
    return Entry(rel, None, STATUS_SKIPPED, "folder symlink inside the mirror; not followed (read at its own path)")


def _file_entry(path: str, root: str) -> Entry:
    rel = _rel(path, root)
    try:
        target = os.path.realpath(path, strict=True) if os.path.islink(path) else path
    except OSError as exc:  # ELOOP for loops and self-loops, ENOENT for dangling links
        kind = "symlink loop" if exc.errno == errno.ELOOP else "dangling symlink"
        return Entry(rel, None, "error", f"{kind}: not read")
    if not _inside(target, root):
        return Entry(rel, None, "error", "symlink points outside the mirror: not read")
    try:
        st = os.stat(target, follow_symlinks=False)
    except OSError as exc:
        return Entry(rel, None, "error", f"{type(exc).__name__}: {exc.strerror}")
    if not stat.S_ISREG(st.st_mode):
        return Entry(rel, None, STATUS_SKIPPED, f"not a regular file ({_file_kind(st.st_mode)}): not read")
    return Entry(rel, Path(target), size=st.st_size, identity=(st.st_dev, st.st_ino))


def entry_for(root: Path, path: Path) -> Entry:
    """The entry for one file path under ``root`` (for callers that built a page by hand)."""
    return _file_entry(str(path), os.path.realpath(root))


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISDIR, "folder"),
    ):
        if test(mode):
            return name
    return "special file"


def open_entry(entry: Entry, max_bytes: int) -> tuple[int, int]:
    """Open the entry's target for reading: ``(fd, size)``. Raises :class:`UnsafePath` or
    ``OSError``; the size cap is checked on the open file (``fstat``) before any byte is read."""
    if entry.target is None:
        raise UnsafePath(entry.reason or "not readable")
    fd = os.open(entry.target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"not a regular file ({_file_kind(st.st_mode)})")
        if entry.identity != (0, 0) and (st.st_dev, st.st_ino) != entry.identity:
            raise UnsafePath("file replaced since the mirror was listed")
        if st.st_size > max_bytes:
            raise TooLarge(st.st_size, max_bytes)
        return fd, st.st_size
    except BaseException:
        os.close(fd)
        raise


class TooLarge(UnsafePath):
    def __init__(self, size: int, limit: int):
        super().__init__(f"{size} bytes > {limit}")
        self.size = size


def iter_blocks(fd: int, limit: int) -> Iterator[bytes]:
    """The file's bytes in ``BLOCK``-sized pieces, never more than ``limit`` bytes in total
    (a file that grows after ``fstat`` is refused rather than read past the cap)."""
    total = 0
    while True:
        block = os.read(fd, BLOCK)
        if not block:
            return
        total += len(block)
        if total > limit:
            raise TooLarge(total, limit)
        yield block


def hash_entry(entry: Entry, max_bytes: int) -> str:
    """sha256 hex of the entry's bytes, streamed; an entry over the cap hashes as its size
    (it is recorded ``too_large`` without being read, so only its size can change its record)."""
    try:
        fd, _ = open_entry(entry, max_bytes)
    except TooLarge as exc:
        return f"too_large:{exc.size}"
    try:
        digest = hashlib.sha256()
        for block in iter_blocks(fd, max_bytes):
            digest.update(block)
        return digest.hexdigest()
    finally:
        os.close(fd)
