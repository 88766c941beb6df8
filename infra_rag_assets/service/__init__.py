"""HTTP service: POST /v1/search, /v1/answer, /v1/judge, GET /v1/health, /v1/versions,
/v1/release, the probes and /metrics (the unversioned paths are deprecated aliases).

Read-only over immutable release files: the request path never opens the build's DuckDB
warehouse. Each worker process opens the released version once (``ServingState``), follows
the release pointer, writes traces through its own background writer, refuses work past a
bound on in-flight requests and requests past header and body limits, and drains on SIGTERM.
Every error body is ``{"error": {"type", "message", "trace_id"}}``; unexpected errors are
logged with their traceback and answered 500 without internals.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from .. import settings as env
from ..rag.operate.home import DataHome
from ..rag.operate.traces import new_trace_id
from ..rag.search.engine import single_thread_queries
from .access import ApiKeyAuth, ResponseHeaders, load_api_keys
from .drain import drain_on_sigterm
from .metrics import RecordMetrics, ServiceMetrics
from .middleware import BodyLimit, HeadAsGet, HeaderLimit, InflightLimit
from .routes import TracedFailure, operations, queries, telemetry
from .state import ServiceSettings, ServingState, Unavailable

log = logging.getLogger("infra_rag_assets.service")
__all__ = ["ServiceSettings", "ServingState", "app_from_env", "create_app", "uvicorn_command"]


def create_app(home: DataHome | None = None, settings: ServiceSettings | None = None) -> FastAPI:
    single_thread_queries()
    state = ServingState(home or DataHome.at(), settings)
    metrics = ServiceMetrics()
    state.on_switch = metrics.switched

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        drain_on_sigterm(state)  # before the release opens: a stop during the warm-up drains too
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
        redirect_slashes=False,  # a redirect would echo the request's Host (307 to any host a client names)
        description="Cited hybrid retrieval over infrastructure docs.",
    )
    app.state.serving, app.state.metrics = state, metrics
    for router in (queries, operations):
        app.include_router(router, prefix="/v1")
        app.include_router(router, deprecated=True)  # the pre-/v1 paths, for one more release
    app.include_router(telemetry)
    _error_handlers(app)
    limits = state.settings
    aliases = _paths(queries, operations)
    documents = {p for p in (app.docs_url, app.redoc_url, app.openapi_url) if p}
    served = frozenset({*aliases, *(f"/v1{p}" for p in aliases), *_paths(telemetry), *documents})
    # added innermost first: a request meets them in the reverse order
    app.add_middleware(
        InflightLimit,
        state=state,
        paths=frozenset({"/search", "/answer", "/v1/search", "/v1/answer"}),
        judge_paths=frozenset({"/judge", "/v1/judge"}),
    )
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes, timeout_s=limits.body_timeout_s)
    app.add_middleware(ApiKeyAuth, keys=limits.api_keys)
    app.add_middleware(HeaderLimit, max_count=limits.max_header_count, max_bytes=limits.max_header_bytes)
    app.add_middleware(ResponseHeaders, state=state, aliases=aliases)
    app.add_middleware(RecordMetrics, metrics=metrics, state=state, routes=served)
    app.add_middleware(HeadAsGet)  # outermost: HEAD is a GET without its body, for every GET route
    return app


def _paths(*routers: APIRouter) -> frozenset[str]:
    return frozenset(getattr(route, "path", "") for router in routers for route in router.routes) - {""}


def app_from_env() -> FastAPI:
    """Factory for `uvicorn --factory` workers: home, limits and keys come from the environment
    that `infra-rag serve` sets (INFRA_RAG_HOME, _MAX_INFLIGHT, _RELEASE_POLL_S, _API_KEY_FILE)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    defaults = ServiceSettings()
    limits = ServiceSettings(
        max_inflight=env.max_inflight(defaults.max_inflight),
        poll_s=env.release_poll_s(defaults.poll_s),
        api_keys=load_api_keys(env.api_key_file(), env.api_key()),
        owns_process=True,
    )
    return create_app(DataHome.at(), limits)


def uvicorn_command(host: str, port: int, workers: int) -> list[str]:
    """The server `infra-rag serve` runs, with the limits of ``ServiceSettings`` it enforces.

    h11, not httptools: h11 bounds the request head (``server_header_buffer_bytes``);
    httptools buffers headers of any size."""
    limits = ServiceSettings()
    return [
        *(sys.executable, "-m", "uvicorn", "infra_rag_assets.service:app_from_env", "--factory"),
        *("--host", host, "--port", str(port), "--workers", str(workers), "--log-level", "info"),
        *("--http", "h11", "--h11-max-incomplete-event-size", str(limits.server_header_buffer_bytes)),
        *("--timeout-graceful-shutdown", str(limits.graceful_shutdown_s)),
    ]


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
    return JSONResponse(
        status_code=status, content={"error": body}, headers={**(headers or {}), "X-Trace-Id": body["trace_id"]}
    )


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
        if exc.status_code == 400:  # FastAPI could not parse the body: say why
            if isinstance(exc.__cause__, RecursionError):
                return _error(400, "invalid_json", "request body is nested too deeply (JSON arrays/objects)")
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
