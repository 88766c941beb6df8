"""served_traces: the traces every process wrote (service, CLI, canary) loaded into the warehouse.

Servers write traces to their own segment files and never touch the warehouse; this asset
copies the rows it has not seen yet into the warehouse's ``traces`` table (idempotent by
trace id), so evals on real traffic can join them with eval results and chunks in SQL.
"""

import dagster as dg
import polars as pl

from ...rag.evaluate.answers.trace_judging import adherence_by_day, judge_traces
from ...rag.judge.version_judge import load_version_judge
from ...rag.operate.traces import load_into_warehouse
from ..reporting import floats, md_table
from ..resources import DataHomeResource


@dg.asset(
    group_name="operations",
    kinds={"duckdb"},
    owners=["team:search-platform"],
    automation_condition=dg.AutomationCondition.on_cron("15 * * * *"),
    description="Trace segments (<home>/traces/*.jsonl) appended to the warehouse `traces` table, new "
    "trace ids only; every new answer judged sentence by sentence by its version's support judge "
    "(`trace_judgements`: adherence per day). Hourly when automation is on; safe to run at any time.",
)
def served_traces(context: dg.AssetExecutionContext, store: DataHomeResource) -> dg.MaterializeResult:
    home = store.data_home()
    warehouse = home.warehouse()
    added, seen = load_into_warehouse(warehouse, home.traces_dir())
    context.log.info(f"{added} new traces loaded ({seen} in the segments)")
    judged = judge_traces(
        warehouse.unjudged_answers(), lambda version: load_version_judge(home, version)[0], warehouse.chunk_texts
    )
    warehouse.append_missing("trace_judgements", judged, "trace_id")
    by_day = adherence_by_day(warehouse.judged_answers())
    by_origin = warehouse.trace_counts()
    total = int(by_origin["traces"].sum()) if by_origin.height else 0
    latest = by_day.row(0, named=True) if by_day.height else {}
    return dg.MaterializeResult(
        metadata={
            "new_traces": dg.MetadataValue.int(added),
            "traces_in_segments": dg.MetadataValue.int(seen),
            "dagster/row_count": dg.MetadataValue.int(total),
            "by_origin": md_table(by_origin if by_origin.height else pl.DataFrame({"origin": [], "traces": []})),
            "newly_judged": dg.MetadataValue.int(judged.height),
            **floats({"adherence_latest_day": latest.get("adherence")}),
            "adherence_by_day": md_table(by_day, 30),
        }
    )
