"""Stopping cleanly on SIGTERM: drain, then refuse late connections at once.

Why: with several workers the listening socket is shared with uvicorn's supervisor, so after a
worker's graceful shutdown stopped accepting, the kernel still completed new connections into a
backlog nobody read: they hung until the process exited and were then reset. After the drain a
worker now shuts the listening socket down itself (``shutdown(2)`` acts on the one socket every
process shares), so a late client is refused at connect (``ECONNREFUSED``) and retries elsewhere.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import stat
import threading
from typing import Any

log = logging.getLogger("infra_rag_assets.service")


def drain_on_sigterm(state: Any) -> None:
    """SIGTERM: for ``drain_s`` keep answering, with /readyz 503 (the balancer stops sending)
    and ``Connection: close`` on every response (clients reconnect elsewhere), then stop
    listening (late connects are refused) and hand the signal to uvicorn, whose graceful
    shutdown finishes running requests. Repeats of SIGTERM (a process-group kill reaches the
    workers twice) are ignored; SIGINT still stops at once. Only under a server that handles
    SIGTERM itself (uvicorn); otherwise nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return
    server_handler = signal.getsignal(signal.SIGTERM)
    if not callable(server_handler):
        return

    def stop(sig, frame) -> None:
        # Only a worker of several shares its listener with uvicorn's supervisor; a single-process
        # server closes its own socket in its shutdown, as before.
        if multiprocessing.parent_process() is not None:
            log.info("drained: %d shared listening socket(s) shut", stop_listening())
        server_handler(sig, frame)

    def drain(sig, frame) -> None:
        if state.draining:
            return
        state.draining = True
        log.info("SIGTERM: draining for %.1f s before shutting down", state.settings.drain_s)
        timer = threading.Timer(state.settings.drain_s, stop, args=(sig, frame))
        timer.daemon = True
        timer.start()

    signal.signal(signal.SIGTERM, drain)


def stop_listening() -> int:
    """Shut down every listening TCP socket of this process (shared ones for all their holders);
    the number shut. Established connections are untouched: running requests finish."""
    closed = 0
    for name in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []:
        fd = int(name)
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            probe = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        with probe:
            try:
                if probe.type == socket.SOCK_STREAM and probe.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                    probe.shutdown(socket.SHUT_RDWR)
                    closed += 1
            except OSError:
                continue
    return closed
