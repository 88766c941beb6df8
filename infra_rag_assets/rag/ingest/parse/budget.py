"""Parse pages under a time budget, in a child process that can be killed.

Why a process: the slow paths of a hostile page are C code (regex backtracking, lxml,
MuPDF) that neither a signal nor a thread can interrupt. One long-lived worker parses page
after page (started once per documents run, ~1 s); a page that overruns its budget gets an
``error`` record and the worker is killed and restarted; a worker that crashes (a MuPDF
segfault) costs that one page, not the run. Frames are length-prefixed pickles over pipes,
so the worker is a plain ``python -m`` process, independent of how the parent was started.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
from pathlib import Path
from typing import IO, Any, Self

from ..models import ParsedDocument
from .dispatch import failed, parse_page

# Measured on the real corpus: the slowest page parses in 0.35 s (the 1.5 MB CNCF whitepaper).
PARSE_BUDGET_S = 20.0
_START_TIMEOUT_S = 120.0
_HEADER = struct.Struct("!Q")
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[4])


class ParseWorker:
    """``parse(kind, raw, ...)`` like :func:`dispatch.parse_page`, stopped after ``budget_s``."""

    def __init__(self, budget_s: float = PARSE_BUDGET_S):
        self.budget_s = budget_s
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        self._proc = self._start()  # started up front, so no page's parse_ms includes it
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (_PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")) if p),
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        _, stdout = _pipes(proc)
        # The worker says "ready" once its imports are done, so no page's budget pays for them.
        ready, _, _ = select.select([stdout], [], [], _START_TIMEOUT_S)
        if not ready or _read(stdout) != "ready":
            proc.kill()
            proc.wait()
            raise RuntimeError(f"parser worker ({sys.executable} -m {__name__}) did not start")
        return proc

    def parse(self, kind: str, raw: bytes, **kwargs: str) -> ParsedDocument:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()  # a worker that cannot start fails the run, not each page
        stdin, stdout = _pipes(self._proc)
        try:
            _write(stdin, (kind, raw, kwargs))
            ready, _, _ = select.select([stdout], [], [], self.budget_s)
            if not ready:
                self.close()
                return failed(kind, f"parse exceeded the {self.budget_s:g} s time budget; stopped")
            return _read(stdout)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            self.close()
            return failed(kind, f"parser process died ({type(exc).__name__}); page skipped")

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            for pipe in _pipes(self._proc):
                pipe.close()
            self._proc = None


def _pipes(proc: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    """The worker's (stdin, stdout): both were opened as pipes, so neither is None."""
    assert proc.stdin is not None and proc.stdout is not None
    return proc.stdin, proc.stdout


def _write(stream: IO[bytes], value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read(stream: IO[bytes]) -> Any:  # whatever the other side pickled
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("worker closed its pipe")
    size = _HEADER.unpack(header)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("short frame")
    return pickle.loads(data)


def _serve() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a parser's stray print must not corrupt the frames
    _write(stdout, "ready")
    while True:
        try:
            kind, raw, kwargs = _read(stdin)
        except EOFError:
            return
        _write(stdout, parse_page(kind, raw, **kwargs))


if __name__ == "__main__":
    _serve()
