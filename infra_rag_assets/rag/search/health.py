"""Operator health: can a version serve (index, release, model), plus freshness, model files
and recent trace errors.

Like the service, it reads only serving files (release pointer, snapshot manifests, indexes,
trace segments), never the build warehouse, so it answers while a build runs. An
operator also needs to know whether what serves is *stale* (the release, or the newest build,
is older than the max age: the sources sensor or the release gate has silently stopped) and
whether recent questions are failing. Each check is ok or not with a one-line detail, and a
check that cannot be computed fails rather than raising, so `infra-rag health` always prints
a table and its exit code alone is a usable probe.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..operate import releases
from ..operate.home import DataHome

# One freshness window for `infra-rag health` and the serving asset's FreshnessPolicy fail_window.
DEFAULT_MAX_AGE_DAYS = releases.MAX_AGE_DAYS
TRACE_WINDOW = 100
DEFAULT_MAX_TRACE_ERRORS = 5


def full_health(
    home: DataHome, max_age_days: float = DEFAULT_MAX_AGE_DAYS, max_trace_errors: int = DEFAULT_MAX_TRACE_ERRORS
) -> dict[str, Any]:
    """``{"ok": bool, "nothing_built": bool, "checks": {name: {"ok": bool, "detail": str, ...}}}``."""
    try:
        checks = serving_checks(home)
    except Exception as exc:  # noqa: BLE001 - e.g. the warehouse is locked or unreadable
        checks = {"index": _failed(exc), "release": _failed(exc), "model": _failed(exc)}
    if checks.get("model", {}).get("ok"):
        checks["model"] = {**checks["model"], **_model_files(checks["model"]["model_id"])}
    for name, fn in (
        ("freshness", lambda: freshness(home, max_age_days)),
        ("traces", lambda: trace_errors(home, max_trace_errors)),
    ):
        try:
            checks[name] = fn()
        except Exception as exc:  # noqa: BLE001 - health reports, never raises
            checks[name] = _failed(exc)
    for check in checks.values():
        check.setdefault("detail", "")
    nothing_built = not checks["release"].get("current") and checks["index"].get("nothing_built", False)
    return {"ok": all(c["ok"] for c in checks.values()), "nothing_built": nothing_built, "checks": checks}


def serving_checks(home: DataHome) -> dict[str, dict[str, Any]]:
    """Index, release and model, each ok or not with a one-line reason (what /health says)."""
    from .engine import QueryEngine, VersionNotFound, resolve_version

    checks: dict[str, dict[str, Any]] = {"release": release_check(home)}
    try:
        version = resolve_version(home)
    except VersionNotFound as exc:
        from ..index.serving_snapshot import list_manifests

        nothing_built = not list_manifests(home.serving_root())
        checks["index"] = {"ok": False, "detail": str(exc), "nothing_built": nothing_built}
        checks["model"] = {"ok": False, "detail": "no index to check the model against"}
        if nothing_built and not checks["release"]["current"]:
            checks["release"] = {**checks["release"], "detail": "no release yet: nothing is built"}
        return checks
    checks["index"] = index_check(home, version)
    try:
        checks["model"] = model_check(QueryEngine(home, version))  # opening refuses a mismatched model
    except Exception as exc:  # noqa: BLE001 - health reports, never raises
        checks["model"] = _failed(exc)
    return checks


def release_check(home: DataHome) -> dict[str, Any]:
    current = releases.read_pointer(home.release_pointer()).get("current")
    return {
        "ok": current is not None,
        "current": current,
        "detail": "" if current else "no release yet (serving the latest built version)",
    }


def index_check(home: DataHome, version: str) -> dict[str, Any]:
    """The version's lexical index is there; without a page index it serves degraded."""
    from ..index.page_index import has_page_index

    pages = has_page_index(home.version(version).tantivy)
    return {
        "ok": (home.version(version).tantivy).is_dir(),
        "version": version,
        "page_index": pages,
        "detail": "" if pages else "no page index (built before it existed): page term skipped, results degraded",
    }


def model_check(engine: Any) -> dict[str, Any]:
    return {"ok": True, "model_id": engine.model_id, "weights_hash": engine.embedder.weights_hash[:16]}


def _failed(exc: Exception) -> dict[str, Any]:
    message = str(exc).splitlines()[0] if str(exc) else ""
    return {"ok": False, "detail": f"{type(exc).__name__}: {message}"[:300]}


def _model_files(model_id: str) -> dict[str, Any]:
    """Where the weights were resolved on disk and their full hash (what a version pins)."""
    from ..index.embedding import resolve_model_path, weights_hash

    path = resolve_model_path(model_id)
    return {"path": str(path), "weights_hash": weights_hash(path)}


def freshness(home: DataHome, max_age_days: float) -> dict[str, Any]:
    """Age of the current release's release event and of the newest built index version."""
    from ..index.serving_snapshot import list_manifests

    events = releases.read_pointer(home.release_pointer()).get("history", [])
    problems, release_age, index_age = [], None, None
    now = datetime.now(UTC)
    if events:
        current = events[-1]["index_version"]
        # The promotion of what serves now; a rollback re-serves an older promotion, so its
        # age is that promotion's age, not the rollback's.
        promoted = [e for e in events if e["action"] == "release" and e["index_version"] == current] or events[-1:]
        occurred = datetime.fromisoformat(promoted[-1]["occurred_at"]).replace(tzinfo=UTC)
        release_age = (now - occurred).total_seconds() / 86400
        if release_age > max_age_days:
            problems.append(f"release {current} is {release_age:.1f} days old")
    else:
        problems.append("no release yet")
    built = list_manifests(home.serving_root())
    newest = [(built[-1].version, (now - built[-1].created).total_seconds())] if built else []
    if newest:
        index_age = newest[0][1] / 86400
        if index_age > max_age_days:
            problems.append(f"newest index version {newest[0][0]} is {index_age:.1f} days old")
    else:
        problems.append("no built index version")
    ages = [
        f"{label} {age:.1f}d"
        for label, age in (("release", release_age), ("newest index", index_age))
        if age is not None
    ]
    return {
        "ok": not problems,
        "release_age_days": _round(release_age),
        "newest_index_version": newest[0][0] if newest else None,
        "index_age_days": _round(index_age),
        "max_age_days": max_age_days,
        "detail": "; ".join(problems) or f"{', '.join(ages)} (max {max_age_days:g}d)",
    }


def trace_errors(home: DataHome, max_errors: int) -> dict[str, Any]:
    """Error outcomes among the last ``TRACE_WINDOW`` traces (any origin)."""
    from ..operate.traces import read_traces

    recent = read_traces(home.traces_dir(), last=TRACE_WINDOW)
    total, errors = recent.height, int((recent["outcome"] == "error").sum())
    return {
        "ok": errors <= max_errors,
        "traces": total,
        "errors": errors,
        "max_errors": max_errors,
        "detail": f"{errors} errors in the last {total} traces (max {max_errors})",
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
