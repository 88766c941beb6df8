"""Per-process folders in the temp folder that never outlive their process for long.

Why: a serving worker copies each version's Tantivy index to the temp folder (Tantivy locks
even to read) and ``serve`` makes a metrics folder per start; worker processes end without
running ``atexit`` (multiprocessing children, kill -9), so those copies piled up (35 MB after
one server). Each folder's name carries its owner's pid: the owner removes its own on
shutdown (``remove_own``) and every new one first removes those of dead pids (``sweep``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path


def make(prefix: str, owner: int | None = None) -> Path:
    """A fresh folder ``<tmp>/<prefix><pid>-<random>``, after sweeping dead owners' folders."""
    sweep(prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{owner or os.getpid()}-"))


def owner_of(path: Path, prefix: str) -> int | None:
    match = re.fullmatch(rf"{re.escape(prefix)}(\d+)-\w+", path.name)
    return int(match.group(1)) if match else None


def sweep(prefix: str) -> int:
    """Remove ``prefix`` folders whose owner process is gone; how many."""
    removed = 0
    for path in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        pid = owner_of(path, prefix)
        if pid is not None and not alive(pid):
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def remove_own(prefix: str, owner: int | None = None) -> int:
    """Remove this process's (or ``owner``'s) ``prefix`` folders; how many."""
    owner = owner or os.getpid()
    mine = [p for p in Path(tempfile.gettempdir()).glob(f"{prefix}{owner}-*") if owner_of(p, prefix) == owner]
    for path in mine:
        shutil.rmtree(path, ignore_errors=True)
    return len(mine)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_after_exit(path: Path) -> None:
    """Fork a watcher that removes ``path`` once this process has exited (it is about to exec
    a server that runs none of our code at its end). The watcher leaves the process group and
    ignores stop signals, so a group SIGTERM stops the server, not it; it polls every 0.5 s."""
    parent = os.getpid()
    if os.fork() != 0:
        return
    try:
        os.setsid()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        while os.getppid() == parent:
            time.sleep(0.5)
        shutil.rmtree(path, ignore_errors=True)
    finally:
        os._exit(0)
