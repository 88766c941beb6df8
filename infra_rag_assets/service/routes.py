"""The HTTP routes: queries (POST /search, /answer, /judge), operations (GET /health,
/versions, /release, the probes) and GET /metrics. The app mounts the first two under /v1
and, deprecated, at the root.

Every query gets a trace id, returned in the response body and its ``X-Trace-Id`` header and
written with its trace; a query that fails after validation is traced as an error with the
same id. Handlers are sync functions, so FastAPI runs them on its worker threads and the event
loop stays free to refuse work (InflightLimit) while they run. ``/answer`` streams server-sent
events when asked (``Accept: text/event-stream`` or ``?stream=true``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from ..rag.index.serving_snapshot import list_manifests
from ..rag.operate import releases
from ..rag.operate.traces import CLIENT_DISCONNECTED, CLIENT_ERROR, error_row, new_trace_id, trace_row
from ..rag.search.engine import hit_record
from .metrics import CONTENT_TYPE_LATEST
from .models import (
    AnswerRequest,
    AnswerResponse,
    ErrorResponse,
    HealthResponse,
    JudgeRequest,
    JudgeResponse,
    ProbeResponse,
    ReleaseResponse,
    SearchRequest,
    SearchResponse,
    VersionModel,
)
from .state import ServingState, Unavailable

log = logging.getLogger("infra_rag_assets.service")
ERRORS = {status: {"model": ErrorResponse} for status in (400, 401, 404, 413, 422, 431, 500, 503)}
SSE = "text/event-stream"


def get_state(request: Request) -> ServingState:
    return request.app.state.serving


State = Annotated[ServingState, Depends(get_state)]
queries = APIRouter(tags=["queries"], responses=ERRORS)
operations = APIRouter(tags=["operations"])
telemetry = APIRouter(tags=["operations"])


class TracedFailure(Exception):
    """A failure after validation, already traced under ``trace_id``."""

    def __init__(self, cause: Exception, trace_id: str):
        super().__init__(str(cause))
        self.cause, self.trace_id = cause, trace_id


def _traced(state: ServingState, body: SearchRequest, trace_id: str, run):
    try:
        return run()
    except Exception as exc:
        _trace_failure(state, body, trace_id, exc)
        raise TracedFailure(exc, trace_id) from exc


def _trace_failure(state: ServingState, body: SearchRequest, trace_id: str, exc: Exception, outcome: str = "") -> None:
    version = state.current.version if state.current else ""
    client = isinstance(exc, Unavailable) and exc.status < 500  # e.g. an unknown version: the client's error
    outcome = outcome or (CLIENT_ERROR if client else "error")
    state.sink.submit(
        error_row(
            origin="service",
            version=body.version or version,
            config_name=body.config_name(),
            question=body.question,
            error=f"{type(exc).__name__}: {exc}"[:300],
            trace_id=trace_id,
            outcome=outcome,
        )
    )


@queries.post("/search", response_model=SearchResponse)
def search(body: SearchRequest, state: State, response: Response) -> dict:
    trace_id, started = new_trace_id(), time.perf_counter()
    response.headers["X-Trace-Id"] = trace_id

    def run():
        engine = state.engine(body.version)
        return engine, engine.search(body.question, config=body.config_name(), k=body.k, filters=body.filters())

    engine, result = _traced(state, body, trace_id, run)
    state.sink.submit(
        trace_row(
            origin="service", version=engine.version, config_name=body.config_name(), result=result, trace_id=trace_id
        )
    )
    return {
        "version": engine.version,
        "config": body.config_name(),
        "trace_id": trace_id,
        "abstained": result.abstained,
        "abstain_reason": result.abstain_reason,
        "degraded": result.degraded,
        "hits": [hit_record(h) for h in result.hits],
        "latency_ms": round((time.perf_counter() - started) * 1000, 2),
    }


ANSWER_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {
            SSE: {
                "schema": {"type": "string"},
                "example": 'event: meta\ndata: {"version": "...", "config": "...", "trace_id": "..."}\n\n'
                'event: delta\ndata: {"text": "..."}\n\nevent: answer\ndata: {AnswerResponse}\n\n',
            }
        },
        "description": "JSON, or with `Accept: text/event-stream` (or `?stream=true`) server-sent events: "
        "`meta`, then `delta` events of text, then one `answer` event (the AnswerResponse, with "
        "citations) or one `error` event (the error envelope).",
    }
}


@queries.post("/answer", response_model=AnswerResponse, responses=ANSWER_RESPONSES)
def answer(
    body: AnswerRequest,
    state: State,
    request: Request,
    response: Response,
    stream: Annotated[bool, Query(description="stream server-sent events (as `Accept: text/event-stream`)")] = False,
) -> Any:
    trace_id = new_trace_id()
    response.headers["X-Trace-Id"] = trace_id
    use_claude = False if body.offline else None
    # the same retrieval and answerer whether streamed or not
    how = {"config": body.config_name(), "k": body.k, "filters": body.filters(),
           "use_claude": use_claude, "client": state.claude_client, "answerer": body.answerer}  # fmt: skip
    if stream or SSE in request.headers.get("accept", ""):

        def start():
            engine = state.engine(body.version)
            return engine, *engine.answer_stream(body.question, **how)

        engine, result, packed, events = _traced(state, body, trace_id, start)
        progress = {"events": 0, "done": False}

        def left() -> None:  # the stream ended before its answer: the client went away
            gone = ConnectionAbortedError(f"client left after {progress['events']} event(s)")
            _trace_failure(state, body, trace_id, gone, outcome=CLIENT_DISCONNECTED)

        return TracedStream(
            _answer_events(state, body, trace_id, engine, result, packed, events, progress),
            left,
            progress,
            media_type=SSE,
            headers={"X-Trace-Id": trace_id, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    def run():
        engine = state.engine(body.version)
        return engine, engine.answer(body.question, **how)

    engine, outcome = _traced(state, body, trace_id, run)
    _trace_answer(state, body, trace_id, engine, outcome.result, outcome.answer)
    return _answer_body(body, trace_id, engine, outcome.answer, outcome.packed)


class TracedStream(StreamingResponse):
    """A streamed answer that traces a client who left before its end (``client_disconnected``):
    the stream then stops without reaching the code that traces the answer."""

    def __init__(self, content: Iterator[bytes], on_left, progress: dict, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.on_left, self.progress = on_left, progress

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if not self.progress["done"]:
                self.on_left()


def _answer_events(state, body, trace_id, engine, result, packed, events, progress: dict) -> Iterator[bytes]:
    """The SSE body: retrieval is done; generation errors arrive as an ``error`` outcome or,
    if anything raises, as an ``error`` event (the status line has already gone out).
    ``progress`` counts events sent and says when the stream was traced (``done``)."""
    progress["events"] += 1
    yield _sse("meta", {"version": engine.version, "config": body.config_name(), "trace_id": trace_id})
    final = None
    try:
        for item in events:
            if isinstance(item, str):
                progress["events"] += 1
                yield _sse("delta", {"text": item})
            else:
                final = item
    except Exception as exc:  # mid-stream: report it as an event, never a reset
        log.error("streamed answer failed (trace %s)", trace_id, exc_info=exc)
        _trace_failure(state, body, trace_id, exc)
        progress["done"] = True
        message = "internal error; the trace id identifies it in the server log"
        yield _sse("error", {"error": {"type": "internal", "message": message, "trace_id": trace_id}})
        return
    _trace_answer(state, body, trace_id, engine, result, final)
    progress["done"] = True
    yield _sse("answer", _answer_body(body, trace_id, engine, final, packed))


def _sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _trace_answer(state: ServingState, body: AnswerRequest, trace_id: str, engine, result, reply) -> None:
    state.sink.submit(
        trace_row(
            origin="service",
            version=engine.version,
            config_name=body.config_name(),
            result=result,
            answer=reply,
            trace_id=trace_id,
        )
    )


def _answer_body(body: AnswerRequest, trace_id: str, engine, reply, packed) -> dict:
    return {
        "version": engine.version,
        "config": body.config_name(),
        "trace_id": trace_id,
        **reply.to_dict(),
        "sources": packed.render_sources(),
    }


@operations.get("/livez", response_model=ProbeResponse)
def livez() -> dict:
    """Liveness: the process answers. Never depends on an index, so a pod that has not opened a
    release yet (or lost it) is not restarted for it."""
    return {"ok": True}


@operations.get("/readyz", response_model=ProbeResponse, responses={503: {"model": ProbeResponse}})
def readyz(state: State) -> JSONResponse:
    """Readiness: a version is open and warmed (the state swaps one in only after a warm-up query)."""
    current = state.current
    if state.draining:
        return JSONResponse(status_code=503, content={"ok": False, "version": None, "detail": "draining: stopping"})
    if current is None:
        detail = state.reload_error or "no servable index version yet"
        return JSONResponse(status_code=503, content={"ok": False, "version": None, "detail": detail})
    return JSONResponse(status_code=200, content={"ok": True, "version": current.version, "detail": ""})


@operations.get("/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
def health(state: State) -> JSONResponse:
    report = state.health()
    return JSONResponse(status_code=200 if report["ok"] else 503, content=report)


@operations.get("/versions", response_model=list[VersionModel])
def versions(state: State) -> list[dict]:
    serving = state.current.version if state.current else None
    return [
        {
            "index_version": m.version,
            "created_at": m.created_at,
            "chunks": m.chunks,
            "pages": m.pages,
            "model_id": m.build_config.get("model_id", ""),
            "adapted": bool(m.build_config.get("adaptation")),
            "serving": m.version == serving,
        }
        for m in list_manifests(state.home.serving_root())
    ]


@operations.get("/release", response_model=ReleaseResponse)
def release(state: State) -> dict:
    pointer = releases.read_pointer(state.home.release_pointer())
    return {
        "current": pointer.get("current"),
        "serving": state.current.version if state.current else None,
        "history": pointer.get("history", []),
    }


@telemetry.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
def metrics(request: Request) -> Response:
    """Prometheus text exposition, summed over every worker of this service start (docs/serving.md)."""
    return Response(request.app.state.metrics.scrape(), media_type=CONTENT_TYPE_LATEST)


@queries.post("/judge", response_model=JudgeResponse)
def judge(body: JudgeRequest, state: State) -> dict:
    """Score an answer sentence by sentence with the version's support judge (``infra-rag judge``)."""
    from ..rag.judge.batch import Item, judge_items
    from ..rag.judge.version_judge import load_version_judge

    version = state.engine(body.version).version
    model, note = load_version_judge(state.home, version)
    if model is None:
        raise Unavailable("judge_unavailable", note)
    item = Item(body.id, body.question, tuple((p.id, p.text) for p in body.passages), body.answer)
    return {"version": version, **judge_items(model, [item])[0]}
