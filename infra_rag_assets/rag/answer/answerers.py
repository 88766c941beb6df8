"""The answerer registry: one place that names the answerers and picks the default.

``extractive`` quotes sentences, ``reader`` names the answer span and cites its sentence,
``claude`` generates with citations. The CLI (``--answerer``), the service and the eval run all
resolve a name here, so "which answerer answered" means the same everywhere. The default is
Claude when an API key is set, else the reader; the reader needs a trained ``answer_reader``
for the version, and without one the offline answer falls back to the extractive answerer
(the answer's ``method`` then says so).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from ..operate.home import READER_POINTER

AnswererName = Literal["extractive", "reader", "claude"]
ANSWERERS: tuple[AnswererName, ...] = ("extractive", "reader", "claude")
OFFLINE_DEFAULT: AnswererName = "reader"


def resolve_answerer(answerer: str | None = None, use_claude: bool | None = None) -> AnswererName:
    """An explicit name wins; ``use_claude=False`` means "not Claude" (the offline default);
    nothing asked: Claude when ``ANTHROPIC_API_KEY`` is set, else the offline default."""
    if answerer:
        if answerer not in ANSWERERS:
            raise ValueError(f"unknown answerer {answerer!r}: one of {', '.join(ANSWERERS)}")
        return answerer  # type: ignore[return-value]
    claude = bool(os.environ.get("ANTHROPIC_API_KEY")) if use_claude is None else use_claude
    return "claude" if claude else OFFLINE_DEFAULT


def version_reader_folder(home, version: str) -> tuple[Path | None, str]:
    """(folder, note): the trained reader the version's pointer names, or (None, why not)."""
    import json

    path = home.version(version).snapshot / READER_POINTER
    if not path.is_file():
        return None, f"no answer reader for {version}: materialize answer_reader first"
    try:
        key = json.loads(path.read_text())["key"]
    except (ValueError, KeyError) as exc:
        return None, f"unreadable reader pointer {path.name}: {exc}"
    folder = home.cache("readers").path(key)
    if not folder.is_dir():
        return None, f"reader {key} missing under {folder.parent}"
    from .reader_model import MODEL_DIR

    if not (folder / MODEL_DIR).is_dir():  # a span reader, trained before the sentence reader
        return None, f"reader {key} is of an older kind: materialize answer_reader for {version} again"
    return folder, f"answer reader {key}"


def write_reader_pointer(home, version: str, key: str, record: dict) -> Path:
    from ..operate.files import write_model_pointer

    return write_model_pointer(home.version(version).snapshot / READER_POINTER, key, record)
