"""Which judge scores a version's answers in the eval run: the chosen backend (the eval plan's
``judge_backend``, else INFRA_RAG_JUDGE_BACKEND, else ``trained``)."""

from __future__ import annotations

from typing import Any

from ... import settings
from ..operate.home import DataHome
from .claude.claude_judge import BACKEND as CLAUDE
from .claude.claude_judge import ClaudeJudge, require_key
from .version_judge import load_version_judge


def chosen_backend(given: str | None = None) -> str:
    """The backend, checked before any work: an unknown name (ValueError) or claude without a
    key (ClaudeJudgeUnavailable) is a one-line error naming the setting."""
    backend = settings.judge_backend(given)
    require_key(backend)
    return backend


def load_judge(home: DataHome, version: str, backend: str) -> tuple[Any, str]:
    """(judge, note): the version's trained judge, or the Claude judge with the trained one (if
    built) labelling context relevance; (None, why) leaves the answer gates unmeasured."""
    trained, note = load_version_judge(home, version)
    if backend != CLAUDE:
        return trained, note
    judge = ClaudeJudge(relevance_judge=trained)
    return judge, f"claude judge {judge.identity}; context relevance: {note}"
