"""Content-addressed blob store for source page bytes.

An index version must stay reproducible after its mirror changes, so ``source_pages``
snapshots each page's bytes here, keyed by sha256. Identical bytes across versions are
stored once; writes go through a temp file and rename, so a crash never leaves a torn blob.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path


class BlobStore:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    def path_for(self, digest: str) -> Path:
        return self.root / digest[:2] / digest

    def put(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        target = self.path_for(digest)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{digest}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
        return digest

    def put_stream(self, blocks: Iterable[bytes]) -> str:
        """Store bytes arriving in blocks (hashed while written): memory is one block, not a file."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".incoming.{os.getpid()}.{id(blocks)}.tmp"
        digest = hashlib.sha256()
        try:
            with open(tmp, "wb") as out:
                for block in blocks:
                    digest.update(block)
                    out.write(block)
            target = self.path_for(digest.hexdigest())
            if target.exists():
                tmp.unlink()
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return digest.hexdigest()

    def get(self, digest: str) -> bytes:
        data = self.path_for(digest).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise ValueError(f"blob {digest[:12]} is corrupt")
        return data

    def has(self, digest: str) -> bool:
        return self.path_for(digest).exists()
