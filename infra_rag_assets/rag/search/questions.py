"""What counts as a question, for every entry point (HTTP service, CLI, batch files).

One set of rules, so a question the CLI accepts is one the service accepts: a string, not
blank after stripping, at most ``MAX_QUESTION_CHARS`` characters as sent, and encodable as UTF-8 (a
lone surrogate such as ``"\\ud800"`` from a JSON escape is refused here, not deep inside the
tokenizer). Over-long questions are refused, never silently cut.

Batch files (``{"id", "question"}`` per line) are read and validated whole before any model
loads, so a bad line 9,000 fails in milliseconds, not after the 10-15 s model load.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path
from typing import Any

MAX_QUESTION_CHARS = 2000  # as sent, surrounding whitespace included
# What str.strip() removes (every str.isspace() character): a question must hold one other
# character. As a JSON-Schema/ECMA pattern, so the HTTP schema states the rule it enforces.
WHITESPACE_CLASS = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NON_BLANK_PATTERN = f"[^{WHITESPACE_CLASS}]"
MAX_BATCH_LINE_BYTES = 1 << 20  # one JSON line; a question is at most ~8 KB of UTF-8


class QuestionError(ValueError):
    """A question (or a batch file of them) that breaks the rules; the message is one line."""


def clean_question(value: Any, *, where: str = "question") -> str:
    """The question stripped of surrounding whitespace, or QuestionError saying why not."""
    if not isinstance(value, str):
        raise QuestionError(f"{where} must be a string, got {_json_type(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise QuestionError(f"{where} is not valid Unicode (lone surrogate)") from None
    if len(value) > MAX_QUESTION_CHARS:
        raise QuestionError(f"{where} is {len(value)} characters; the limit is {MAX_QUESTION_CHARS}")
    text = value.strip()
    if not text or not visible(text):
        raise QuestionError(f"{where} is blank" + (" (only invisible characters)" if text else ""))
    if "\x00" in text:
        raise QuestionError(f"{where} contains a NUL character")
    return text


# Characters that draw nothing although str.isspace() says no: zero-width space/joiners, BOM,
# word joiner, soft hyphen (all category Cf), and the Hangul and Braille blank "letters".
INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def visible(text: str) -> bool:
    """Whether ``text`` holds a character that shows (not whitespace, format or control)."""
    return any(
        not ch.isspace() and ch not in INVISIBLE_LETTERS and unicodedata.category(ch) not in ("Cf", "Cc", "Zs")
        for ch in text
    )


def read_batch(path: str) -> list[dict]:
    """``[{"id": str, "question": str}]`` from a JSONL file ('-' = stdin), validated whole.

    Ids are strings or integers (kept as given), unique across the file; a UTF-8 BOM is
    accepted; blank lines are skipped. Any other problem is a QuestionError naming the line.
    """
    if path == "-":
        return _parse_lines(sys.stdin.buffer, "<stdin>")
    file = Path(path)
    if file.is_dir():
        raise QuestionError(f"{path} is a directory, not a JSONL file")
    if not file.exists():
        raise QuestionError(f"{path}: no such file")
    with file.open("rb") as stream:
        return _parse_lines(stream, path)


def _parse_lines(stream: Any, name: str) -> list[dict]:
    questions: list[dict] = []
    seen: dict[Any, int] = {}
    for n, raw in enumerate(iter(lambda: stream.readline(MAX_BATCH_LINE_BYTES + 1), b""), 1):
        if len(raw) > MAX_BATCH_LINE_BYTES:
            raise QuestionError(f"{name}:{n}: line longer than {MAX_BATCH_LINE_BYTES} bytes")
        if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise QuestionError(f"{name}:{n}: not UTF-8") from None
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise QuestionError(f"{name}:{n}: not a JSON object") from None
        if not isinstance(record, dict) or "id" not in record or "question" not in record:
            raise QuestionError(f'{name}:{n}: expected {{"id", "question"}}')
        qid = record["id"]
        if isinstance(qid, bool) or not isinstance(qid, (str, int)) or qid == "":
            raise QuestionError(f"{name}:{n}: id must be a non-empty string or an integer, got {_json_type(qid)}")
        if qid in seen:
            raise QuestionError(f"{name}:{n}: duplicate id {qid!r} (first on line {seen[qid]})")
        seen[qid] = n
        questions.append({"id": qid, "question": clean_question(record["question"], where=f"{name}:{n}: question")})
    if not questions:
        raise QuestionError(f"{name}: no questions")
    return questions


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        list: "a list",
        dict: "an object",
        str: "a string",
    }.get(type(value), type(value).__name__)
