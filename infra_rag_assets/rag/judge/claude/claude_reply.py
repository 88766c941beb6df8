"""Validate and repair the Claude judge's reply: from a ``record_judgement`` tool call (or, as a
repair, a JSON object in plain text) to five checked axes, one support value per answer
sentence and spans that are exact substrings of the answer.

Repairs are the ones that cannot change a verdict's meaning: ``"true"``/``"false"`` strings as
booleans, numbers as strings, support clamped to [0, 1], a span that matches the answer up to
case and whitespace replaced by the answer's own text, a passage named by its position. What
cannot be repaired (no reply object, a missing axis, a sentence without a verdict) is a
:class:`ReplyError`, which the judge turns into a judged-with-error result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .judge_prompts import CITATION_VALUES, TOOL_NAME

AXES = ("grounded", "fabricated", "gap_named", "correct", "citations")
_BOOL_AXES = ("grounded", "fabricated", "gap_named")


class ReplyError(ValueError):
    """The reply cannot be read as a judgement (one line: what is missing or malformed)."""


@dataclass
class Reply:
    axes: dict  # AXES -> bool | None (correct) | str (citations)
    support: list[float]  # one per answer sentence, in order
    passages: list[str | None]  # best supporting passage id per sentence
    spans: list[dict]  # {"text", "start", "end"}: [start, end) in the answer text
    reason: str = ""
    notes: list[str] = field(default_factory=list)


def reply_object(content: Sequence[Any]) -> dict:
    """The tool call's input, else (repair) the outermost JSON object of the reply's text."""
    for block in content:
        if block.type == "tool_use" and block.name == TOOL_NAME:
            data = block.input
            if isinstance(data, str):
                data = _json_object(data)
            if not isinstance(data, dict):
                raise ReplyError(f"the {TOOL_NAME} call's input is not a JSON object")
            return data
    text = "".join(b.text for b in content if b.type == "text")
    data = _json_object(text)
    if data is None:
        raise ReplyError(f"the reply has no {TOOL_NAME} call and no JSON object: {' '.join(text.split())[:120]!r}")
    return data


def _json_object(text: str) -> dict | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def parse_reply(data: dict, *, answer: str, sentences: int, passage_ids: Sequence[str], has_reference: bool) -> Reply:
    """Checked axes, per-sentence support and located spans of one reply object."""
    notes: list[str] = []
    missing = [a for a in AXES if a not in data]
    if missing:
        raise ReplyError(f"the reply lacks the axes {', '.join(missing)}")
    axes: dict[str, Any] = {a: _boolean(data[a], a) for a in _BOOL_AXES}
    axes["correct"] = _boolean(data["correct"], "correct", nullable=True)
    if not has_reference and axes["correct"] is not None:
        notes.append("correct ignored: no reference answer was given")
        axes["correct"] = None
    citations = str(data["citations"]).strip().lower()
    if citations not in CITATION_VALUES:
        raise ReplyError(f"citations must be one of {', '.join(CITATION_VALUES)}, got {data['citations']!r}")
    axes["citations"] = citations
    support, passages = _sentences(data.get("sentences"), sentences, passage_ids, notes)
    spans = locate_spans(data.get("unsupported_spans") or [], answer, notes)
    return Reply(axes, support, passages, spans, str(data.get("reason") or "")[:500], notes)


def _boolean(value: Any, name: str, nullable: bool = False) -> bool | None:
    if isinstance(value, bool):
        return value
    if value is None and nullable:
        return None
    text = str(value).strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    if nullable and text in ("null", "none", "n/a", ""):
        return None
    raise ReplyError(f"axis {name!r} must be true or false{' or null' if nullable else ''}, got {value!r}")


def _sentences(items: Any, count: int, passage_ids: Sequence[str],
               notes: list[str]) -> tuple[list[float], list[str | None]]:  # fmt: skip
    if not isinstance(items, list):
        raise ReplyError("'sentences' must be a list of {n, support, passage}")
    by_n: dict[int, tuple[float, str | None]] = {}
    for item in items:
        if not isinstance(item, dict):
            raise ReplyError("every item of 'sentences' must be an object")
        try:
            n, value = int(item.get("n")), float(item.get("support"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ReplyError(f"sentence verdict {json.dumps(item)[:80]} lacks a number n or support") from None
        if not 1 <= n <= count:
            notes.append(f"verdict for sentence {n} ignored: the answer has {count} sentences")
            continue
        by_n[n] = (min(1.0, max(0.0, value)), _passage(item.get("passage"), passage_ids))
    missing = [n for n in range(1, count + 1) if n not in by_n]
    if missing:
        raise ReplyError(f"no verdict for answer sentence(s) {', '.join(map(str, missing))} of {count}")
    return [by_n[n][0] for n in range(1, count + 1)], [by_n[n][1] for n in range(1, count + 1)]


def _passage(value: Any, passage_ids: Sequence[str]) -> str | None:
    """A known passage id, or the id at a 1-based position the model gave instead."""
    if value is None:
        return None
    text = str(value).strip().strip("[]")
    if text in passage_ids:
        return text
    if text.isdigit() and 0 < int(text) <= len(passage_ids):
        return passage_ids[int(text) - 1]
    return None


def locate_spans(spans: Any, answer: str, notes: list[str]) -> list[dict]:
    """Each span as ``{"text", "start", "end"}`` of the answer: exact, else matched up to case
    and whitespace (the answer's own text is kept); spans found nowhere are dropped, noted."""
    if not isinstance(spans, list):
        raise ReplyError("'unsupported_spans' must be a list of strings")
    out, dropped = [], 0
    for span in spans:
        text = span.get("text") if isinstance(span, dict) else span
        if not isinstance(text, str) or not text.strip():
            dropped += 1
            continue
        found = find_span(text.strip(), answer)
        if found is None:
            dropped += 1
            continue
        out.append({"text": answer[found[0] : found[1]], "start": found[0], "end": found[1]})
    if dropped:
        notes.append(f"{dropped} unsupported span(s) dropped: not substrings of the answer")
    return out


def find_span(span: str, answer: str) -> tuple[int, int] | None:
    """[start, end) of ``span`` in ``answer``: exact, else up to case and whitespace."""
    at = answer.find(span)
    if at >= 0:
        return at, at + len(span)
    pattern = r"\s+".join(re.escape(word) for word in span.split())
    match = re.search(pattern, answer, re.IGNORECASE)
    return (match.start(), match.end()) if match else None
