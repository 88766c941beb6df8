"""Process liveness, shared by the stale-build cleanup and the stale Tantivy staging cleanup."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True when a process with ``pid`` exists on this host (signal 0: existence check only)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A killed process whose parent has not reaped it yet still answers signal 0."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
