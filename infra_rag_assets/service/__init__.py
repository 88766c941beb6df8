"""HTTP service: POST /search, POST /answer, GET /health, /versions, /release.

Read-only over immutable release files: the request path never opens the build's DuckDB
warehouse. Each worker process opens the released version once (``ServingState``), follows
the release pointer, writes traces through its own background writer, refuses work past a
bound on in-flight requests and bodies past a size limit. Every error body is
``{"error": {"type", "message", "trace_id"}}``; unexpected errors are logged with their
traceback and answered 500 without internals.
"""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from .. import settings as env
from ..rag.operate.home import DataHome
from ..rag.operate.traces import new_trace_id
from ..rag.search.engine import single_thread_queries
from .middleware import BodyLimit, InflightLimit
from .routes import TracedFailure, operations, queries
from .state import ServiceSettings, ServingState, Unavailable

log = logging.getLogger("infra_rag_assets.service")
__all__ = ["ServiceSettings", "ServingState", "app_from_env", "create_app"]


def create_app(home: DataHome | None = None, settings: ServiceSettings | None = None) -> FastAPI:
    single_thread_queries()
    state = ServingState(home or DataHome.at(), settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        state.start()  # opens and warms the served version before the first request
        _on_sighup(state.wake)
        try:
            yield
        finally:
            state.stop()

    app = FastAPI(
        title="infra_rag_assets",
        version="2",
        lifespan=lifespan,
        description="Cited hybrid retrieval over infrastructure docs.",
    )
    app.state.serving = state
    app.include_router(queries)
    app.include_router(operations)
    _error_handlers(app)
    app.add_middleware(InflightLimit, state=state)
    app.add_middleware(BodyLimit, max_bytes=state.settings.max_body_bytes)
    return app


def app_from_env() -> FastAPI:
    """Factory for `uvicorn --factory` workers: home and limits come from the environment that
    `infra-rag serve` sets (INFRA_RAG_HOME, INFRA_RAG_MAX_INFLIGHT, INFRA_RAG_RELEASE_POLL_S)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    defaults = ServiceSettings()
    limits = ServiceSettings(
        max_inflight=env.max_inflight(defaults.max_inflight), poll_s=env.release_poll_s(defaults.poll_s)
    )
    return create_app(DataHome.at(), limits)


def _on_sighup(callback) -> None:
    """SIGHUP = check the release pointer now (only where a handler can be set)."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGHUP"):
        try:
            signal.signal(signal.SIGHUP, lambda *_: callback())
        except ValueError:
            pass


def _error(
    status: int,
    error_type: str,
    message: str,
    trace_id: str | None = None,
    field: str | None = None,
    headers: dict | None = None,
) -> JSONResponse:
    body = {"type": error_type, "message": message, "trace_id": trace_id or new_trace_id()}
    if field is not None:
        body["field"] = field
    return JSONResponse(status_code=status, content={"error": body}, headers=headers)


def _error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":
            return _error(400, "invalid_json", "request body is not valid JSON")
        loc = [str(p) for p in first.get("loc", ()) if p != "body"]
        field = ".".join(loc) or None
        message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
        if first.get("type") == "extra_forbidden":
            message = "unknown field"
        return _error(422, "invalid_request", f"{field}: {message}" if field else message, field=field)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI could not decode the body (e.g. invalid UTF-8)
            return _error(400, "invalid_json", "request body is not valid UTF-8 JSON")
        kinds = {404: "not_found", 405: "method_not_allowed"}
        return _error(
            exc.status_code,
            kinds.get(exc.status_code, "http_error"),
            str(exc.detail),
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(Unavailable)
    async def _unavailable(_: Request, exc: Unavailable) -> JSONResponse:
        return _error(exc.status, exc.error_type, exc.message)

    @app.exception_handler(TracedFailure)
    async def _traced(_: Request, exc: TracedFailure) -> JSONResponse:
        cause = exc.cause
        if isinstance(cause, Unavailable):
            return _error(cause.status, cause.error_type, cause.message, exc.trace_id)
        log.error("query failed (trace %s)", exc.trace_id, exc_info=cause)
        return _error(500, "internal", "internal error; the trace id identifies it in the server log", exc.trace_id)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        trace_id = new_trace_id()
        log.error("unexpected error (trace %s)", trace_id, exc_info=exc)
        return _error(500, "internal", "internal error; the trace id identifies it in the server log", trace_id)
