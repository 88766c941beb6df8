"""A real git upstream for sync tests: a bare repository served over file:// (no network).

A work repository commits pages under ``docs/`` and pushes to the bare one, which plays
GitHub; ``rewrite_history`` force-pushes an amended tip and prunes the old objects, so the
replaced commit is really gone upstream (as after a force-push and a server-side gc).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ENV = {
    "GIT_AUTHOR_NAME": "upstream",
    "GIT_AUTHOR_EMAIL": "upstream@example.invalid",
    "GIT_COMMITTER_NAME": "upstream",
    "GIT_COMMITTER_EMAIL": "upstream@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def run_git(*args: str, cwd: Path, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, input=stdin, capture_output=True, check=True, env={**os.environ, **ENV}
    )
    return done.stdout.decode().strip()


class Upstream:
    def __init__(self, root: Path, pages: dict[str, bytes]):
        self.work, self.bare = root / "work", root / "upstream.git"
        root.mkdir(parents=True, exist_ok=True)
        run_git("init", "-q", "--bare", "-b", "main", str(self.bare), cwd=root)
        run_git("init", "-q", "-b", "main", str(self.work), cwd=root)
        run_git("remote", "add", "origin", str(self.bare), cwd=self.work)
        self.commit("initial pages", pages)

    @property
    def url(self) -> str:
        return self.bare.as_uri()  # file:///...

    def commit(self, message: str, changes: dict[str, bytes | None]) -> str:
        """Write (bytes) or delete (None) files under docs/, commit, push; the new sha."""
        for rel, data in changes.items():
            path = self.work / "docs" / rel
            if data is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        run_git("add", "--all", "docs", cwd=self.work)
        run_git("commit", "-q", "-m", message, cwd=self.work)
        run_git("push", "-q", "origin", "main", cwd=self.work)
        return self.head()

    def head(self) -> str:
        return run_git("rev-parse", "HEAD", cwd=self.work)

    def add_symlink(self, rel: str, target: str) -> str:
        (self.work / "docs" / rel).symlink_to(target)
        return self.commit(f"symlink {rel}", {})

    def add_sparse_file(self, rel: str, size: int) -> str:
        """Commit a file of ``size`` zero bytes that takes no disk (git stores it compressed, ~0.1 %)."""
        for repo in (self.work, self.bare):
            run_git("config", "core.compression", "1", cwd=repo)  # zeros: level 1 is as small, and fast
        path = self.work / "docs" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            handle.truncate(size)
        sha = self.commit(f"sparse {rel}", {})
        path.unlink()
        return sha

    def rewrite_history(self, changes: dict[str, bytes | None]) -> str:
        """Amend the tip with ``changes``, force-push, and prune the replaced commit upstream."""
        for rel, data in changes.items():
            (self.work / "docs" / rel).write_bytes(data or b"")
        run_git("add", "--all", "docs", cwd=self.work)
        run_git("commit", "-q", "--amend", "-m", "rewritten", cwd=self.work)
        run_git("push", "-q", "--force", "origin", "main", cwd=self.work)
        run_git("reflog", "expire", "--expire=now", "--all", cwd=self.bare)
        run_git("gc", "-q", "--prune=now", cwd=self.bare)
        return self.head()


def sources_yaml(path: Path, mirror: Path, upstream: dict, kind: str = "markdown_tree", name: str = "docs") -> Path:
    """A one-source sources.yaml syncing ``upstream`` (a mapping) into ``mirror``."""
    import yaml

    suffix = "{page_path}.pdf" if kind == "pdf_files" else "{page_path}/"
    entry = {
        "name": name,
        "project": "prometheus",
        "kind": kind,
        "license": "Apache-2.0",
        "upstream": upstream,
        "url_template": f"https://docs.example.invalid/{suffix}",
        "mirror": str(mirror),
    }
    path.write_text(yaml.safe_dump({"sources": [entry]}, sort_keys=False))
    return path
