"""served_traces: the traces every process wrote (service, CLI, canary) loaded into the warehouse.

Servers write traces to their own segment files and never touch the warehouse; this asset
copies the rows it has not seen yet into the warehouse's ``traces`` table (idempotent by
trace id), so evals on real traffic can join them with eval results and chunks in SQL.
"""

import dagster as dg
import polars as pl

from ...rag.operate.traces import load_into_warehouse
from ..reporting import md_table
from ..resources import DataHomeResource


@dg.asset(
    group_name="operations",
    kinds={"duckdb"},
    owners=["team:search-platform"],
    automation_condition=dg.AutomationCondition.on_cron("15 * * * *"),
    description="Trace segments (<home>/traces/*.jsonl) appended to the warehouse `traces` table, new "
    "trace ids only. Hourly when automation is on; cheap and safe to run at any time.",
)
def served_traces(context: dg.AssetExecutionContext, store: DataHomeResource) -> dg.MaterializeResult:
    added, seen = load_into_warehouse(store.data_home().warehouse(), store.data_home().traces_dir())
    context.log.info(f"{added} new traces loaded ({seen} in the segments)")
    by_origin = store.data_home().warehouse().trace_counts()
    total = int(by_origin["traces"].sum()) if by_origin.height else 0
    return dg.MaterializeResult(
        metadata={
            "new_traces": dg.MetadataValue.int(added),
            "traces_in_segments": dg.MetadataValue.int(seen),
            "dagster/row_count": dg.MetadataValue.int(total),
            "by_origin": md_table(by_origin if by_origin.height else pl.DataFrame({"origin": [], "traces": []})),
        }
    )
