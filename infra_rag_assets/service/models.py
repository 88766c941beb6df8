"""Request and response models of the HTTP API (they are its OpenAPI schema).

Requests are strict: unknown fields are refused (422 naming the field), nothing is coerced
(``"k": "5"``, ``"k": true`` and ``"offline": 0`` are errors), and the question follows the one
set of rules in ``rag.search.questions`` that the CLI uses too.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..rag.answer.answerers import AnswererName
from ..rag.answer.records import Citation
from ..rag.ingest.sources import PROJECTS
from ..rag.judge.batch import MAX_PASSAGES as MAX_JUDGE_PASSAGES
from ..rag.search.engine import MODE_CONFIGS
from ..rag.search.questions import MAX_QUESTION_CHARS, NON_BLANK_PATTERN, clean_question
from ..rag.search.retrieval_settings import NAMED_CONFIGS

Project = Literal[tuple(sorted(PROJECTS))]  # type: ignore[valid-type]
ConfigName = Literal[tuple(NAMED_CONFIGS)]  # type: ignore[valid-type]
VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$"
MAX_JUDGE_CHARS = 24_000  # passages + answer per judge request (a 46 KB one took 27.5 s of a core)


def question_field() -> Any:
    """The question as the schema states it; ``clean_question`` (the CLI's rules too) enforces
    exactly this, plus no NUL and no lone surrogate, which a JSON schema cannot say."""
    return Field(
        description=f"1..{MAX_QUESTION_CHARS} characters as sent, not only whitespace, no NUL",
        json_schema_extra={"minLength": 1, "maxLength": MAX_QUESTION_CHARS, "pattern": NON_BLANK_PATTERN},
    )


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    question: str = question_field()
    k: int = Field(default=10, ge=1, le=50)
    version: str | None = Field(
        default=None, pattern=VERSION_PATTERN, description="index version (default: the current release)"
    )
    mode: Literal["dense", "lexical", "hybrid"] | None = Field(
        default=None, description="shorthand for a config: dense, lexical or hybrid (= hybrid-page)"
    )
    config: ConfigName | None = Field(default=None, description="named retrieval config (overrides mode)")
    project: Project | None = None

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        return clean_question(value)

    def config_name(self) -> str:
        return self.config or MODE_CONFIGS[self.mode or "hybrid"]

    def filters(self) -> dict | None:
        return {"project": self.project} if self.project else None


class AnswerRequest(SearchRequest):
    k: int = Field(default=6, ge=1, le=20)
    offline: bool = Field(default=False, description="an offline answer (not Claude) even when Claude is configured")
    answerer: AnswererName | None = Field(
        default=None, description="which answerer answers (default: claude when configured, else reader)"
    )


class HitModel(BaseModel):
    chunk_id: str
    doc_id: str
    project: str
    page_id: str
    url: str
    section: str
    score: float
    text: str


class SearchResponse(BaseModel):
    version: str
    config: str
    trace_id: str
    abstained: bool
    abstain_reason: str
    degraded: bool
    hits: list[HitModel]
    latency_ms: float


class AnswerResponse(BaseModel):
    version: str
    config: str
    trace_id: str
    question: str
    text: str
    citations: list[Citation]  # the library's dataclass: one definition of a citation
    outcome: str
    method: str
    model: str
    prompt_name: str
    prompt_hash: str
    error: str
    usage: dict[str, Any]
    latency_ms: float
    stop_reason: str
    short_answer: str = Field(default="", description="the reader's answer span(s), stated before the evidence")
    sources: str


class ErrorBody(BaseModel):
    type: str = Field(description="machine-readable kind, e.g. invalid_request, overloaded, internal")
    message: str = Field(description="one line for people; never internal messages or paths")
    trace_id: str = Field(description="quote it when reporting a problem; answered errors have a trace")
    field: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


class CheckModel(BaseModel):
    model_config = ConfigDict(extra="allow")
    ok: bool
    detail: str = ""


class ProbeResponse(BaseModel):
    """/livez and /readyz: what a kubelet (or any orchestrator) needs, nothing more."""

    ok: bool
    version: str | None = Field(default=None, description="the served index version (readyz)")
    detail: str = ""


class HealthResponse(BaseModel):
    ok: bool
    version: str | None
    checks: dict[str, CheckModel]


class VersionModel(BaseModel):
    index_version: str
    created_at: str
    chunks: int
    pages: int
    model_id: str = Field(description="the configured base model")
    adapted: bool = Field(description="the version's vectors use that model adapted to the corpus (domain_model)")
    serving: bool


class ReleaseResponse(BaseModel):
    current: str | None
    serving: str | None = Field(description="the version this process answers with right now")
    history: list[dict[str, Any]]


class JudgePassage(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(min_length=1, max_length=200)
    text: str = Field(max_length=20_000)


class JudgeRequest(BaseModel):
    """One answer from anywhere, judged against the passages it was written from."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(default="", max_length=200)
    question: str = question_field()
    passages: list[JudgePassage] = Field(max_length=MAX_JUDGE_PASSAGES)
    answer: str = Field(max_length=20_000, description="answer text; [n] cites passages[n-1]")
    version: str | None = Field(default=None, pattern=VERSION_PATTERN, description="whose judge (default: release)")

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        return clean_question(value)

    @model_validator(mode="after")
    def _bounded(self) -> JudgeRequest:
        """The judge's work grows with passages × characters: one request reads a bounded amount."""
        total = sum(len(p.text) for p in self.passages) + len(self.answer)
        if total > MAX_JUDGE_CHARS:
            raise ValueError(
                f"passages and answer hold {total:,} characters, over the {MAX_JUDGE_CHARS:,} one judge "
                f"request may carry ({len(self.passages)} passages): split it into several requests"
            )
        return self


class JudgedSentence(BaseModel):
    text: str
    supported: float
    passage: str | None


class JudgeResponse(BaseModel):
    id: str
    version: str
    adherence: float | None = Field(description="probability that every answer sentence is supported")
    relevance: float | None
    utilization: float | None
    completeness: float | None
    sentences: list[JudgedSentence]
    note: str | None = None
