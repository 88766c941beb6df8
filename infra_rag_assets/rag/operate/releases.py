"""Release history: which index version serves, and every promotion and rollback.

The release history is an append-only event log in the warehouse. Nothing is ever deleted: a
rollback is a new event pointing at the version that served before the current one.

After every event the history is published as a small pointer file
(``<home>/serving/release.json``, written atomically), which is what the query path reads: a
server never opens the build's warehouse, and a new release reaches it by the file changing.
"""

from __future__ import annotations

import getpass
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from .files import write_json_atomic
from .home import DataHome
from .warehouse import Warehouse

# How old a release may get before it is overdue (the sources sensor or the release gate has
# silently stopped): the `release` asset's FreshnessPolicy and `infra-rag health` both use these.
MAX_AGE_DAYS = 14.0
WARN_AGE_DAYS = 8.0


@dataclass(frozen=True)
class ReleaseEvent:
    event_id: str
    index_version: str
    action: str  # "release" | "rollback"
    occurred_at: datetime
    actor: str
    run_id: str
    previous_version: str | None
    reason: str
    metrics: dict


def history(warehouse: Warehouse) -> list[ReleaseEvent]:
    """All release events, oldest first."""
    return [
        ReleaseEvent(
            **{k: v for k, v in r.items() if k != "metrics_json"}, metrics=json.loads(r["metrics_json"] or "{}")
        )
        for r in warehouse.release_events()
    ]


def current_release(warehouse: Warehouse) -> str | None:
    events = history(warehouse)
    return events[-1].index_version if events else None


def record(
    warehouse: Warehouse,
    version: str,
    action: str,
    *,
    run_id: str = "",
    reason: str = "",
    metrics: dict | None = None,
    actor: str | None = None,
) -> ReleaseEvent:
    event = ReleaseEvent(
        event_id=uuid.uuid4().hex,
        index_version=version,
        action=action,
        occurred_at=datetime.now(UTC).replace(tzinfo=None),
        actor=actor or _actor(),
        run_id=run_id,
        previous_version=current_release(warehouse),
        reason=reason,
        metrics=metrics or {},
    )
    row = {
        **{k: v for k, v in event.__dict__.items() if k != "metrics"},
        "metrics_json": json.dumps(event.metrics, sort_keys=True, default=str),
    }
    warehouse.append("releases", pl.DataFrame([row], schema_overrides={"previous_version": pl.String}))
    publish_pointer(warehouse)
    return event


def publish_pointer(warehouse: Warehouse) -> dict:
    """Write the release pointer from the warehouse history (idempotent; also repairs a pointer
    left stale by a crash between the history commit and the pointer write)."""
    events = history(warehouse)
    pointer = {
        "current": events[-1].index_version if events else None,
        "history": [_event_dict(e) for e in events],
        "published_at": datetime.now(UTC).isoformat(),
    }
    write_json_atomic(pointer_path(warehouse), pointer)
    return pointer


def pointer_path(warehouse: Warehouse) -> Path:
    """The pointer lives in the data home that holds this warehouse (see home.DataHome)."""
    return DataHome(warehouse.path.parent).release_pointer()


def read_pointer(path: Path) -> dict:
    """``{"current": version | None, "history": [...]}``; no file yet means nothing released."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return {"current": None, "history": []}


def _event_dict(event: ReleaseEvent) -> dict:
    return {**event.__dict__, "occurred_at": event.occurred_at.isoformat()}


def serving_stack(warehouse: Warehouse) -> list[str]:
    """Replay the log as a stack: a release pushes its version, a rollback pops one."""
    stack: list[str] = []
    for event in history(warehouse):
        if event.action == "rollback" and len(stack) > 1:
            stack.pop()
        elif event.action == "release" and (not stack or stack[-1] != event.index_version):
            stack.append(event.index_version)
    return stack


def rollback_target(warehouse: Warehouse) -> str:
    """The version that served before the current one (repeated rollbacks walk further back)."""
    stack = serving_stack(warehouse)
    if not stack:
        raise ValueError("nothing to roll back: no release yet")
    if len(stack) < 2:
        raise ValueError(f"nothing to roll back to: {stack[-1]} is the only release on the stack")
    return stack[-2]


def rollback(warehouse: Warehouse, *, reason: str = "", actor: str | None = None) -> ReleaseEvent:
    target = rollback_target(warehouse)
    return record(warehouse, target, "rollback", reason=reason or "rollback", actor=actor)


def _actor() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name in some containers
        return "unknown"
