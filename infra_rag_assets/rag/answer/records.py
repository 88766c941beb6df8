"""What an answerer returns: the answer record and its citations, shared by the Claude and the
extractive answerer (and the service's response models)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, TypedDict

Outcome = Literal["answered", "abstained", "error"]
Method = Literal["claude", "extractive", "reader"]
Match = Literal["exact", "relocated", "mismatch"]


class PassageLike(Protocol):
    """What answering needs from a retrieved chunk (retrieval's passage type satisfies it)."""

    chunk_id: str
    doc_id: str
    project: str
    title: str
    section: str
    url: str
    text: str  # the chunk text, == document text[start_char:end_char]
    start_char: int
    end_char: int


@dataclass
class PlainPassage:
    """A passage that is only text (judged answers from outside, dev pages): a ``PassageLike``
    whose retrieval fields are empty."""

    chunk_id: str
    text: str
    doc_id: str = ""
    project: str = ""
    title: str = ""
    section: str = ""
    url: str = ""
    start_char: int = 0
    end_char: int = 0


@dataclass
class Citation:
    """A cited span: ``[chunk_start, chunk_end)`` in the chunk, ``[doc_start, doc_end)`` in its doc.

    ``match`` says how far the offsets can be trusted: ``exact`` when the chunk slice equals
    ``cited_text``; ``relocated`` when the model's offsets were off but ``cited_text`` was found
    verbatim in the chunk (offsets then point at the nearest occurrence); ``mismatch`` when
    neither holds and the model's offsets are kept as given, clamped to the chunk.
    """

    passage_number: int  # 1-based position in the passages passed in
    chunk_id: str
    doc_id: str
    url: str
    cited_text: str
    chunk_start: int
    chunk_end: int
    doc_start: int
    doc_end: int
    match: Match = "exact"


@dataclass
class Answer:
    """One answer attempt, success or not, with everything needed to reproduce and audit it."""

    question: str
    text: str
    citations: list[Citation]
    outcome: Outcome
    method: Method
    model: str
    prompt_name: str  # "name@version"; empty for extractive answers
    prompt_hash: str
    error: str = ""  # one line, set only when outcome == "error"
    usage: dict[str, Any] = field(default_factory=dict)
    latency_ms: float = 0.0
    stop_reason: str = ""  # Claude's stop_reason, e.g. "max_tokens" flags a truncated answer
    short_answer: str = ""  # the reader's answer span(s), stated before the cited evidence
    candidates: list[dict[str, Any]] = field(default_factory=list)  # the reader's best spans (--explain)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Answer:
        """The inverse of ``to_dict`` (a cached answer read back)."""
        return cls(**{**data, "citations": [Citation(**c) for c in data.get("citations", [])]})


class AnswerBase(TypedDict):
    """The :class:`Answer` fields an answerer fixes before it tries (``Answer(**base, ...)``)."""

    question: str
    method: Method
    model: str
    prompt_name: str
    prompt_hash: str


# --- Claude -------------------------------------------------------------------------------


def elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
