"""HTTP service: POST /search, POST /answer, GET /health, /versions, /release.

Serves the current release (or an explicit version). Bad input is a 4xx from validation; a
model or API failure is a typed JSON outcome (``{"outcome": "error", "error_type", "error"}``),
never a 500 with a traceback.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from .rag import releases
from .rag.engine import (DEFAULT_CONFIG, QueryEngine, VersionNotFound, hit_record, named_config,
                         resolve_version, single_thread_queries)
from .rag.home import DataHome
from .rag.lexical_store import has_page_index
from .rag.traces import append_traces, trace_row

MAX_QUESTION_CHARS = 2000


class SearchRequest(BaseModel):
    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    k: int = Field(default=10, ge=1, le=50)
    version: str | None = None
    config: str = DEFAULT_CONFIG
    project: Literal["kubernetes", "prometheus", "argocd", "cncf"] | None = None


class AnswerRequest(SearchRequest):
    k: int = Field(default=6, ge=1, le=20)
    offline: bool = False


class ServiceError(Exception):
    def __init__(self, status: int, error_type: str, message: str):
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message


class Engines:
    """One QueryEngine per version, opened on first use and kept (models load once)."""

    def __init__(self, home: DataHome):
        self.home, self._engines, self._lock = home, {}, threading.Lock()

    def get(self, version: str | None) -> QueryEngine:
        from .rag.embedding import ModelMismatch, ModelUnavailable

        try:
            resolved = resolve_version(self.home, version)
        except VersionNotFound as exc:
            raise ServiceError(404 if version else 503, "version_not_found", str(exc)) from None
        with self._lock:
            if resolved not in self._engines:
                try:
                    self._engines[resolved] = QueryEngine(self.home, resolved)
                except (ModelMismatch, ModelUnavailable) as exc:
                    raise ServiceError(503, "model_unavailable", str(exc).splitlines()[0]) from None
                except (OSError, ValueError) as exc:
                    raise ServiceError(503, "index_unavailable", f"{type(exc).__name__}: {exc}"[:300]) from None
            return self._engines[resolved]


def create_app(home: DataHome | None = None) -> FastAPI:
    home = home or DataHome.at()
    single_thread_queries()
    engines = Engines(home)
    app = FastAPI(title="infra_rag_assets", version="1")

    @app.exception_handler(ServiceError)
    async def _typed_error(_: Request, exc: ServiceError) -> JSONResponse:
        return JSONResponse(status_code=exc.status, content={"outcome": "error", "error_type": exc.error_type,
                                                             "error": exc.message})

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(status_code=503, content={"outcome": "error", "error_type": "internal",
                                                      "error": f"{type(exc).__name__}: {str(exc)[:200]}"})

    def _check_config(name: str) -> None:
        try:
            named_config(name)
        except ValueError as exc:
            raise ServiceError(422, "bad_config", str(exc)) from None

    @app.post("/search")
    def search(body: SearchRequest) -> dict[str, Any]:
        _check_config(body.config)
        engine = engines.get(body.version)
        started = time.perf_counter()
        result = engine.search(body.question, config=body.config, k=body.k,
                               filters={"project": body.project} if body.project else None)
        append_traces(home.warehouse(), [trace_row(origin="service", version=engine.version,
                                                   config_name=body.config, result=result)])
        return {"version": engine.version, "config": body.config, "abstained": result.abstained,
                "abstain_reason": result.abstain_reason, "degraded": result.degraded,
                "hits": [hit_record(h) for h in result.hits],
                "latency_ms": round((time.perf_counter() - started) * 1000, 2)}

    @app.post("/answer")
    def answer(body: AnswerRequest) -> dict[str, Any]:
        _check_config(body.config)
        engine = engines.get(body.version)
        outcome = engine.answer(body.question, config=body.config, k=body.k,
                                filters={"project": body.project} if body.project else None,
                                use_claude=False if body.offline else None)
        append_traces(home.warehouse(), [trace_row(origin="service", version=engine.version,
                                                   config_name=body.config, result=outcome.result,
                                                   answer=outcome.answer)])
        return {"version": engine.version, "config": body.config, **outcome.answer.to_dict(),
                "sources": outcome.packed.render_sources()}

    @app.get("/health")
    def health() -> JSONResponse:
        report = health_report(home, engines)
        return JSONResponse(status_code=200 if report["ok"] else 503, content=report)

    @app.get("/versions")
    def versions() -> list[dict[str, Any]]:
        frame = home.warehouse().versions()
        return [{**r, "created_at": str(r["created_at"])} for r in frame.iter_rows(named=True)]

    @app.get("/release")
    def release() -> dict[str, Any]:
        events = releases.history(home.warehouse())
        return {"current": events[-1].index_version if events else None,
                "history": [{**e.__dict__, "occurred_at": str(e.occurred_at)} for e in events]}

    return app


def health_report(home: DataHome, engines: Engines | None = None) -> dict[str, Any]:
    """Index, release and model each ok or not, with a one-line reason."""
    checks: dict[str, dict[str, Any]] = {}
    current = releases.current_release(home.warehouse())
    checks["release"] = {"ok": current is not None, "current": current,
                         "detail": "" if current else "no release yet (serving the latest built version)"}
    try:
        version = resolve_version(home)
        index_ok = (home.tantivy_root() / version).is_dir()
        pages_ok = has_page_index(home.tantivy_root() / version)
        detail = "" if pages_ok else "no page index (built before it existed): page term skipped, results degraded"
        checks["index"] = {"ok": index_ok, "version": version, "page_index": pages_ok,
                           "detail": detail if index_ok else "lexical index directory missing"}
    except VersionNotFound as exc:
        checks["index"] = {"ok": False, "detail": str(exc)}
        version = None
    if version:
        try:
            engine = (engines or Engines(home)).get(version)
            engine.retriever(DEFAULT_CONFIG)  # opens searchers: refuses a mismatched model
            checks["model"] = {"ok": True, "model_id": engine.build_config.model_id,
                               "weights_hash": engine.embedder.weights_hash[:16]}
        except ServiceError as exc:
            checks["model"] = {"ok": False, "detail": exc.message}
        except Exception as exc:  # noqa: BLE001 - health reports, never raises
            checks["model"] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"[:300]}
    else:
        checks["model"] = {"ok": False, "detail": "no index to check the model against"}
    # No release fails health too: the latest build is served, but nothing vouched for it.
    ok = all(check["ok"] for check in checks.values())
    return {"ok": ok, "checks": checks}
