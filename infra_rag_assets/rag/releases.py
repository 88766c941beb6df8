"""Release history: which index version serves, and every promotion and rollback.

The release is a pointer into an append-only event log in the warehouse. Nothing is ever
deleted: a rollback is a new event pointing at the version that served before the current one.
"""

from __future__ import annotations

import getpass
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

import polars as pl

from .warehouse import Warehouse


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
    rows = warehouse.frame("SELECT * FROM releases ORDER BY occurred_at, event_id").to_dicts()
    return [ReleaseEvent(**{k: v for k, v in r.items() if k != "metrics_json"},
                         metrics=json.loads(r["metrics_json"] or "{}")) for r in rows]


def current_release(warehouse: Warehouse) -> str | None:
    events = history(warehouse)
    return events[-1].index_version if events else None


def record(warehouse: Warehouse, version: str, action: str, *, run_id: str = "", reason: str = "",
           metrics: dict | None = None, actor: str | None = None) -> ReleaseEvent:
    event = ReleaseEvent(
        event_id=uuid.uuid4().hex, index_version=version, action=action,
        occurred_at=datetime.now(timezone.utc).replace(tzinfo=None), actor=actor or _actor(), run_id=run_id,
        previous_version=current_release(warehouse), reason=reason, metrics=metrics or {},
    )
    row = {**{k: v for k, v in event.__dict__.items() if k != "metrics"},
           "metrics_json": json.dumps(event.metrics, sort_keys=True, default=str)}
    warehouse.append("releases", pl.DataFrame([row], schema_overrides={"previous_version": pl.String}))
    return event


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
