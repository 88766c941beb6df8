"""Publishing files so readers never see half of them: fsync, then rename into place.

Shared by every immutable artifact a reader may open while it is being replaced: Tantivy
indexes, serving snapshots, the release pointer and the files fitted into a snapshot.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: Path) -> None:
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            fsync_path(Path(dirpath) / name)
        fsync_path(Path(dirpath))


def swap_into_place(staging: Path, final_dir: Path, aside: Path) -> None:
    """Rename ``staging`` to ``final_dir``; an older one is moved to ``aside`` first (put back if
    the rename fails), then deleted. Readers holding the old files keep them open."""
    moved = final_dir.exists()
    if moved:
        os.rename(final_dir, aside)
    try:
        os.rename(staging, final_dir)
    except BaseException:
        if moved:
            os.rename(aside, final_dir)
        raise
    fsync_path(final_dir.parent)
    if moved:
        shutil.rmtree(aside, ignore_errors=True)


def write_json(path: Path, value: Any) -> None:
    """Write and fsync one JSON file (sorted keys)."""
    with open(path, "w", encoding="utf-8") as stream:
        json.dump(value, stream, sort_keys=True, default=str)
        stream.flush()
        os.fsync(stream.fileno())


def write_atomic(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Replace ``path`` with what ``write`` puts in a temp file of the same directory (fsynced,
    then renamed): readers see the old content or the new, never a torn file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json_atomic(path: Path, value: Any) -> None:
    """``write_atomic`` of one JSON value (sorted keys, as ``write_json``)."""
    write_atomic(path, lambda stream: stream.write(json.dumps(value, sort_keys=True, default=str).encode()))


def write_model_pointer(path: Path, key: str, record: dict) -> Path:
    """A snapshot's pointer to a trained model ``key`` (the judge's, the reader's), replaced whole."""
    write_atomic(path, lambda stream: stream.write(json.dumps({"key": key, **record}, indent=1).encode()))
    return path
