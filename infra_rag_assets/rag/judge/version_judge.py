"""Which support judge scores a version's answers: the one its ``support_judge`` materialization
trained or found, named by a pointer in the version's serving snapshot (like its ranker and
calibration), so the eval run, the CLI and the service load the same weights."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ..operate.files import write_model_pointer
from ..operate.home import JUDGE_POINTER, DataHome


def pointer_path(home: DataHome, version: str) -> Path:
    return home.version(version).snapshot / JUDGE_POINTER


def write_pointer(home: DataHome, version: str, key: str, record: dict) -> Path:
    """The snapshot's pointer to the trained judge ``key``."""
    return write_model_pointer(pointer_path(home, version), key, record)


def load_version_judge(home: DataHome, version: str):
    """(judge, note): the version's judge, or (None, why not): the answer gates are then unmeasured."""
    path = pointer_path(home, version)
    if not path.is_file():
        return None, f"no support judge for {version}: materialize support_judge first"
    try:
        key = json.loads(path.read_text())["key"]
    except (ValueError, KeyError) as exc:
        return None, f"unreadable judge pointer {path.name}: {exc}"
    folder = home.cache("judge").path(key)
    if not folder.is_dir():
        return None, f"judge {key} named by {version} is not under {folder.parent}"
    try:
        return _load(str(folder)), f"support judge {key}"
    except (OSError, ValueError, RuntimeError) as exc:
        return None, f"judge {key} failed to load: {' '.join(str(exc).split())[:200]}"


@lru_cache(maxsize=4)
def _load(folder: str):
    """One loaded judge per folder and process (a folder's content never changes: content key)."""
    from .support_judge import SupportJudge

    return SupportJudge.load(Path(folder))
