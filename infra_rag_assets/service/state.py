"""What one server process holds: the engine that serves, a watcher that switches releases,
the trace writer and the counters /health reports.

The current release is read from the release pointer file. A watcher thread polls it (every
``poll_s`` seconds, or at once on SIGHUP); when it names another version the new engine is
opened and warmed first and only then swapped in, so requests already running finish on the
engine they started with and no request waits for a model load. A version that fails to open
is reported in /health and the old engine keeps serving.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..rag.operate.home import DataHome
from ..rag.operate.traces import TraceSink
from ..rag.search.engine import QueryEngine, VersionNotFound, resolve_version
from ..rag.search.health import index_check, model_check, release_check

log = logging.getLogger("infra_rag_assets.service")


@dataclass(frozen=True)
class ServiceSettings:
    """Every limit and timeout of the service (`infra-rag serve` passes uvicorn its share)."""

    max_inflight: int = 32  # per worker: past it, 503 + Retry-After at once
    max_body_bytes: int = 64 * 1024
    body_timeout_s: float = 10.0  # the whole body must arrive within this, else 408 (slow-body clients)
    max_header_count: int = 64  # past it 431 from the app (browsers send ~20)
    max_header_bytes: int = 8 * 1024  # names + values; past it 431 from the app
    server_header_buffer_bytes: int = 16 * 1024  # uvicorn (h11) refuses a longer request head itself: 400
    retry_after_s: int = 1
    poll_s: float = 2.0  # how soon a new release is noticed
    pinned_engines: int = 2  # explicitly requested versions kept open besides the current one
    trace_queue: int = 10_000
    drain_s: float = 3.0  # after SIGTERM: /readyz 503 and `Connection: close`, then uvicorn's shutdown
    graceful_shutdown_s: int = 10  # uvicorn's wait for running requests after the drain
    api_keys: tuple[str, ...] = field(default=(), repr=False)  # empty: no authentication


class Unavailable(Exception):
    """Nothing can serve this request right now (503); the message is safe to show."""

    def __init__(self, error_type: str, message: str, status: int = 503):
        super().__init__(message)
        self.error_type, self.message, self.status = error_type, message, status


class ServingState:
    def __init__(self, home: DataHome, settings: ServiceSettings | None = None):
        self.home, self.settings = home, settings or ServiceSettings()
        self.sink = TraceSink(home.traces_dir(), queue_size=self.settings.trace_queue)
        self.current: QueryEngine | None = None
        self.reload_error = ""
        self.switches = 0
        self.rejected = 0  # requests refused by the in-flight bound (set by the middleware)
        self.inflight = 0
        self.draining = False  # SIGTERM seen: finish, tell the balancer, close connections
        self.claude_client: Any = None  # None: the answerer makes its own (tests pass a faked one)
        self.on_switch: Any = None  # called with (old version or None, new version) after a switch
        self._pinned: OrderedDict[str, QueryEngine] = OrderedDict()
        self._open_lock = threading.Lock()
        self._failed: tuple[str, Any] | None = None  # (version, pointer stamp) that failed to open
        self._wake, self._stop = threading.Event(), threading.Event()
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self.refresh()
        self._thread = threading.Thread(target=self._watch, name="release-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(5)
        self.sink.close()

    def wake(self) -> None:
        """Check the release pointer now (SIGHUP)."""
        self._wake.set()

    def _watch(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.settings.poll_s)
            self._wake.clear()
            if not self._stop.is_set():
                self.refresh()

    def refresh(self) -> bool:
        """Switch to what the pointer names if it changed; True when a switch happened."""
        stamp = self._pointer_stamp()
        try:
            version = resolve_version(self.home)
        except (VersionNotFound, OSError, ValueError) as exc:
            self.reload_error = str(exc).splitlines()[0][:300]
            return False
        if self.current is not None and self.current.version == version:
            self.reload_error = ""
            return False
        if self._failed == (version, stamp):
            return False  # already failed for this pointer state; wait for it to change
        try:
            engine = self._open(version)
            engine.warm()
        except Exception as exc:
            self._failed = (version, stamp)
            self.reload_error = f"cannot open {version}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            log.exception(
                "release %s could not be opened; still serving %s",
                version,
                self.current.version if self.current else "nothing",
            )
            return False
        previous, self.current = self.current, engine
        self.switches, self.reload_error, self._failed = self.switches + 1, "", None
        if self.on_switch is not None:
            self.on_switch(previous.version if previous else None, version)
        log.info("serving %s (was %s)", version, previous.version if previous else "nothing")
        return True

    def _pointer_stamp(self) -> Any:
        try:
            st = self.home.release_pointer().stat()
            return (st.st_mtime_ns, st.st_ino, st.st_size)
        except FileNotFoundError:
            return None

    # --- engines -------------------------------------------------------------------------
    def engine(self, version: str | None = None) -> QueryEngine:
        if self.current is None and self._thread is None:
            with self._open_lock:  # a server that never ran the lifespan (no watcher): open on first use
                if self.current is None:
                    self.refresh()
        current = self.current
        if version is None or (current is not None and current.version == version):
            if current is None:
                raise Unavailable("no_index", self.reload_error or "no index version is servable yet")
            return current
        with self._open_lock:
            if version in self._pinned:
                self._pinned.move_to_end(version)
                return self._pinned[version]
            try:
                resolve_version(self.home, version)
            except VersionNotFound as exc:
                raise Unavailable("version_not_found", str(exc), status=404) from None
            engine = self._open(version)
            self._pinned[version] = engine
            while len(self._pinned) > self.settings.pinned_engines:
                self._pinned.popitem(last=False)
            return engine

    def _open(self, version: str) -> QueryEngine:
        from ..rag.index.embedding import ModelMismatch, ModelUnavailable

        started = time.perf_counter()
        try:
            engine = QueryEngine(self.home, version)
        except (ModelMismatch, ModelUnavailable) as exc:
            raise Unavailable("model_unavailable", str(exc).splitlines()[0][:300]) from None
        except (OSError, ValueError) as exc:
            log.exception("index version %s could not be opened", version)
            raise Unavailable("index_unavailable", f"index version {version} cannot be opened") from exc
        log.info("opened %s in %.1f s", version, time.perf_counter() - started)
        return engine

    # --- reporting -----------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        current = self.current
        checks: dict[str, dict[str, Any]] = {
            "release": release_check(self.home),
            "index": _index_check(current, self.reload_error),
            "model": (
                _without_paths(model_check(current), self.home)
                if current
                else {"ok": False, "detail": "no index to check the model against"}
            ),
            "traces": {
                **self.sink.health(),
                "detail": self.sink.last_error or f"{self.sink.stats['queue_full']} traces written past a full queue",
            },
            "load": {
                "ok": True,
                "inflight": self.inflight,
                "max_inflight": self.settings.max_inflight,
                "rejected": self.rejected,
                "release_switches": self.switches,
            },
        }
        return {
            "ok": all(c["ok"] for c in checks.values()),
            "version": current.version if current else None,
            "checks": checks,
        }


def _without_paths(check: dict[str, Any], home: DataHome) -> dict[str, Any]:
    """/health is unauthenticated: an adapted model's id is a directory, shown relative to the
    data home (``models/<key>/model``) or by its last two parts, never as an absolute path."""
    model_id = Path(str(check.get("model_id", "")))
    if not model_id.is_absolute():
        return check
    try:
        shown = model_id.relative_to(home.root)
    except ValueError:
        shown = Path(*model_id.parts[-2:])
    return {**check, "model_id": str(shown)}


def _index_check(engine: QueryEngine | None, reload_error: str) -> dict[str, Any]:
    """The served engine's index (as `infra-rag health` checks it) plus a failed switch, if any."""
    if engine is None:
        return {"ok": False, "detail": reload_error or "no servable index version"}
    check = index_check(engine.home, engine.version)
    detail = "; ".join(d for d in (check["detail"], reload_error) if d)
    return {**check, "chunks": len(engine.catalog), "detail": detail}
