"""Small helpers that turn polars frames into Dagster metadata the UI renders."""

from __future__ import annotations

import time

import dagster as dg
import polars as pl

from .. import settings


def md_table(frame: pl.DataFrame, max_rows: int = 20, max_cell: int = 80) -> dg.MarkdownMetadataValue:
    """A Markdown table (the UI renders it) of the first ``max_rows`` rows."""
    frame = frame.head(max_rows)
    if frame.is_empty():
        return dg.MetadataValue.md("_no rows_")
    cells = [[_cell(v, max_cell) for v in row] for row in frame.iter_rows()]
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return dg.MetadataValue.md("\n".join(lines))


def _cell(value: object, max_cell: int) -> str:
    text = "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= max_cell else text[: max_cell - 1] + "…"


def counts_by(frame: pl.DataFrame, *keys: str) -> pl.DataFrame:
    return frame.group_by(list(keys)).len(name="count").sort(list(keys))


def counts_pivot(frame: pl.DataFrame, row: str, column: str) -> pl.DataFrame:
    """Counts with ``row`` values down and ``column`` values across (e.g. project × status)."""
    if frame.is_empty():
        return frame
    return counts_by(frame, row, column).pivot(on=column, index=row, values="count").fill_null(0).sort(row)


def log_progress(context: dg.AssetExecutionContext, label: str, every: int):
    """A ``progress(done, total)`` callback that logs every ``every`` items and at the end."""

    def progress(done: int, total: int) -> None:
        if done == total or done % every == 0:
            context.log.info(f"{label} {done}/{total}")

    return progress


def training_progress(context: dg.AssetExecutionContext, label: str):
    """A ``progress(step, total, loss)`` callback for training loops: logs at most every 30 s."""
    last = [0.0]

    def progress(step: int, total: int, loss: float) -> None:
        if step == total or time.monotonic() - last[0] > 30:
            last[0] = time.monotonic()
            context.log.info(f"{label} step {step}/{total}, loss {loss:.4f}")

    return progress


def ui_url() -> str:
    """Base URL of the Dagster UI that run links point at (``INFRA_RAG_DAGSTER_URL``)."""
    return settings.dagster_url()


def ui_path(path: str) -> str:
    """A link inside the UI for metadata: root-relative (``/runs/...``), so it works whatever
    host and port serve the UI; prefixed only by an explicit ``INFRA_RAG_DAGSTER_URL`` (a UI
    behind a path prefix). Terminal output uses ``ui_url`` (absolute) instead."""
    return (settings.dagster_url() if settings.is_set("DAGSTER_URL") else "") + path


def run_link(run_id: str) -> dg.MetadataValue:
    """A run id as a link to its run page in the UI (plain text when there is no run)."""
    return dg.MetadataValue.url(ui_path(f"/runs/{run_id}")) if run_id else dg.MetadataValue.text("none")


def rounded(value, digits: int = 4):
    """Numbers rounded for display (one decimal from 10 up); everything else unchanged."""
    return round(value, digits if abs(value) < 10 else 1) if isinstance(value, float) else value


def floats(values: dict[str, float | None], digits: int = 4) -> dict[str, dg.MetadataValue]:
    """Headline numbers as float metadata (the UI plots these across materializations): scores
    keep ``digits`` decimals, magnitudes such as latencies in ms keep one."""
    return {
        k: dg.MetadataValue.float(round(float(v), digits if abs(v) < 10 else 1))
        for k, v in values.items()
        if v is not None
    }
