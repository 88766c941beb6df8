"""The parsers' "never raise" contract, written once: one bad page must not end an ingestion run."""

from __future__ import annotations

from collections.abc import Callable

from ..models import ParsedDocument


def never_raise(
    parse: Callable[[], ParsedDocument], failed: Callable[[str], ParsedDocument], what: str, limit: int | None = 300
) -> ParsedDocument:
    """``parse()``, or ``failed(reason)`` when it raises; the reason names the exception,
    prefixed by ``what`` and cut to ``limit`` characters (None: not cut)."""
    try:
        return parse()
    except Exception as exc:  # noqa: BLE001 - the contract is "never raise"
        return failed(f"{what}: {type(exc).__name__}: {exc}"[:limit])
