"""The HTTP routes: queries (POST /search, /answer) and operations (GET /health, /versions, /release).

Every query gets a trace id, returned in the response and written with its trace; a query
that fails after validation is traced as an error with the same id. Handlers are sync
functions, so FastAPI runs them on its worker threads and the event loop stays free to refuse
work (InflightLimit) while they run.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from ..rag.index.serving_snapshot import list_manifests
from ..rag.operate import releases
from ..rag.operate.traces import error_row, new_trace_id, trace_row
from ..rag.search.engine import hit_record
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

ERRORS = {status: {"model": ErrorResponse} for status in (400, 404, 413, 422, 500, 503)}


def get_state(request: Request) -> ServingState:
    return request.app.state.serving


State = Annotated[ServingState, Depends(get_state)]
queries = APIRouter(tags=["queries"], responses=ERRORS)
operations = APIRouter(tags=["operations"])


class TracedFailure(Exception):
    """A failure after validation, already traced under ``trace_id``."""

    def __init__(self, cause: Exception, trace_id: str):
        super().__init__(str(cause))
        self.cause, self.trace_id = cause, trace_id


def _traced(state: ServingState, body: SearchRequest, trace_id: str, run):
    try:
        return run()
    except Exception as exc:
        version = state.current.version if state.current else ""
        state.sink.submit(
            error_row(
                origin="service",
                version=body.version or version,
                config_name=body.config_name(),
                question=body.question,
                error=f"{type(exc).__name__}: {exc}"[:300],
                trace_id=trace_id,
            )
        )
        raise TracedFailure(exc, trace_id) from exc


@queries.post("/search", response_model=SearchResponse)
def search(body: SearchRequest, state: State) -> dict:
    trace_id, started = new_trace_id(), time.perf_counter()

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


@queries.post("/answer", response_model=AnswerResponse)
def answer(body: AnswerRequest, state: State) -> dict:
    trace_id = new_trace_id()

    def run():
        engine = state.engine(body.version)
        return engine, engine.answer(
            body.question,
            config=body.config_name(),
            k=body.k,
            filters=body.filters(),
            use_claude=False if body.offline else None,
        )

    engine, outcome = _traced(state, body, trace_id, run)
    state.sink.submit(
        trace_row(
            origin="service",
            version=engine.version,
            config_name=body.config_name(),
            result=outcome.result,
            answer=outcome.answer,
            trace_id=trace_id,
        )
    )
    return {
        "version": engine.version,
        "config": body.config_name(),
        "trace_id": trace_id,
        **outcome.answer.to_dict(),
        "sources": outcome.packed.render_sources(),
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
