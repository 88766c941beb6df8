"""Upstream lineage of an index version, read from the Dagster instance's event log.

eval_run, abstention_calibration and release record which materialization of each upstream
asset they were computed from (run id, data version, time); the CLI's ``lineage`` command
prints the same facts. The data versions are content hashes, so they also key content reuse.
"""

from datetime import UTC, datetime

import dagster as dg

from .reporting import ui_url

UPSTREAM = ("source_pages", "documents", "chunks", "vectors", "lexical_index", "abstention_calibration", "page_ranker")


def upstream_lineage(instance: dg.DagsterInstance, version: str, assets=UPSTREAM) -> list[dict]:
    """The latest materialization of each asset for ``version``: run id + data version."""
    rows = []
    for asset in assets:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[version]), limit=1
        ).records
        event = records[0] if records else None
        materialization = event.asset_materialization if event else None  # set on every materialization record
        rows.append(
            {
                "asset": asset,
                "run_id": event.run_id if event else "",
                "data_version": (materialization.tags or {}).get("dagster/data_version", "") if materialization else "",
                "at": _utc_text(event.timestamp) if event else "",
                "epoch": event.timestamp if event else 0.0,
            }
        )
    return rows


def data_versions(lineage: list[dict]) -> dict[str, str]:
    """Asset -> data version of its latest materialization ('' when it has none)."""
    return {row["asset"]: row["data_version"] for row in lineage}


def _utc_text(epoch: float) -> str:
    return f"{datetime.fromtimestamp(epoch, UTC):%Y-%m-%d %H:%M:%S} UTC"


def lineage_table(lineage: list[dict]) -> dg.MarkdownMetadataValue:
    """Upstream materializations as Markdown: run ids link to their run pages, times are UTC dates."""
    lines = ["| asset | run | data version | at |", "|---|---|---|---|"]
    for row in lineage:
        run = f"[{row['run_id'][:8]}]({ui_url()}/runs/{row['run_id']})" if row["run_id"] else "not materialized"
        lines.append(f"| {row['asset']} | {run} | {row['data_version'][:16]} | {row['at']} |")
    return dg.MetadataValue.md("\n".join(lines))


def lineage_metadata(lineage: list[dict]) -> dict[str, dg.MetadataValue]:
    """The lineage table, and the time of the newest upstream materialization when there is one."""
    newest = (
        {"upstream_newest_at": dg.MetadataValue.timestamp(max(r["epoch"] for r in lineage))}
        if any(r["epoch"] for r in lineage)
        else {}
    )
    return {"upstream_materializations": lineage_table(lineage), **newest}
