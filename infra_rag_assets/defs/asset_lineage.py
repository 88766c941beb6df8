"""Upstream lineage of an index version, read from the Dagster instance's event log.

eval_run, abstention_calibration and release record which materialization of each upstream
asset they were computed from (run id, data version, time); the CLI's ``lineage`` command
prints the same facts. The data versions are content hashes, so they also key content reuse.
Which assets are upstream comes from the asset graph the caller passes (the assembled assets, in
definitions.py, which hands the result to assets as ``StageGraphResource``; or
``control.stages.asset_graph()``), never a list here.
Links are relative to the UI's root, so they work on any host and port the UI is served on.
"""

from datetime import UTC, datetime
from urllib.parse import quote, urlencode

import dagster as dg

from .reporting import ui_path
from .stage_graph import toposorted, upstream_closure


def upstream_of(graph, asset: str) -> list[str]:
    """Every asset upstream of ``asset`` in ``graph`` (a resolved asset graph or a list of asset
    definitions), in build order."""
    keys = upstream_closure(graph, asset) - {dg.AssetKey(asset)}
    return toposorted(graph, keys)


def materialization_path(asset: str, version: str, epoch: float) -> str:
    """The UI page of one materialization: the asset's events view at that partition and time."""
    query = urlencode({"view": "events", "partition": version, "time": str(int(epoch * 1000))})
    return ui_path(f"/assets/{quote(asset)}?{query}")


def upstream_lineage(instance: dg.DagsterInstance, version: str, assets: list[str] | tuple[str, ...]) -> list[dict]:
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


def lineage_table(lineage: list[dict], version: str) -> dg.MarkdownMetadataValue:
    """Upstream materializations as Markdown: each links to its materialization (the asset's
    event at this version) and its run; times are UTC dates."""
    lines = ["| asset | materialization | run | data version |", "|---|---|---|---|"]
    for row in lineage:
        if not row["run_id"]:
            lines.append(f"| {row['asset']} | not materialized | | |")
            continue
        event = f"[{row['at']}]({materialization_path(row['asset'], version, row['epoch'])})"
        run = f"[{row['run_id'][:8]}]({ui_path('/runs/' + row['run_id'])})"
        lines.append(f"| {row['asset']} | {event} | {run} | {row['data_version'][:16]} |")
    return dg.MetadataValue.md("\n".join(lines))


def lineage_metadata(lineage: list[dict], version: str) -> dict[str, dg.MetadataValue]:
    """The lineage table, and the time of the newest upstream materialization when there is one."""
    newest = (
        {"upstream_newest_at": dg.MetadataValue.timestamp(max(r["epoch"] for r in lineage))}
        if any(r["epoch"] for r in lineage)
        else {}
    )
    return {"upstream": lineage_table(lineage, version), **newest}
