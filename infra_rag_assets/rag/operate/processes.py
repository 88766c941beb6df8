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
    return True
