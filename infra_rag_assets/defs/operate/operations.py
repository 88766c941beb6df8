"""Operations: the hourly canary as an asset check on ``serving_release``, run by a schedule.

Why an asset check (and not a bare schedule running an op): the canary is a statement about
what *serves*, so its pass/fail belongs on serving_release, the unpartitioned asset that
release and rollback materialize. As a check it shows up on that asset in the UI, keeps a
history next to its materializations, and can drive alerting like every other check here.
A schedule runs it on a clock: ``canary_hourly`` launches ``canary_job``, which selects only
this check (no asset is re-materialized). Build jobs never select it (serving_release is not
upstream of release), and the release/rollback jobs exclude it explicitly, so a build or a
promotion never waits on it. The same ``canary_suite`` backs `infra-rag canary`, so a canary
run by hand and one run by the daemon ask the same engine the same questions.
"""

import dagster as dg

from ...rag.evaluate.canary import canary_suite
from ..reporting import md_table
from ..resources import DataHomeResource


class CanaryConfig(dg.Config):
    canary_file: str = ""  # empty: $INFRA_RAG_CANARY, else the packaged canary.yaml
    version: str = ""  # empty: the current release (else the newest build, as the service does)


CANARY_CHECK = dg.AssetCheckSpec(
    "release_canary",
    asset="serving_release",
    blocking=False,
    description="Hourly canary: known questions against what serves; each expected page in the top 5 hits, "
    "the unanswerable one abstains (skipped without a floor). Traces with origin 'canary'.",
)


# A multi-asset check only so that its op (and run config path) is named `release_canary`.
@dg.multi_asset_check(specs=[CANARY_CHECK])
def release_canary(context: dg.AssetCheckExecutionContext, config: CanaryConfig, store: DataHomeResource):
    import polars as pl

    try:
        report = canary_suite(store.data_home(), config.version or None, config.canary_file or None)
    except Exception as exc:  # noqa: BLE001 - nothing serves / bad file: a failed check, one line
        message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        context.log.error(f"canary could not run: {message}")
        yield dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.ERROR, metadata={"error": message})
        return
    rows = [
        {
            "canary": r.id,
            "status": r.status,
            "expected": r.expected_outcome,
            "outcome": r.outcome,
            "rank": r.rank,
            "detail": r.detail,
        }
        for r in report.results
    ]
    yield dg.AssetCheckResult(
        passed=not report.failed,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "serving_version": report.version,
            "is_current_release": report.released,
            "retrieval_config": report.config,
            "summary": report.to_dict()["summary"],
            "results": md_table(pl.DataFrame(rows)),
        },
    )


canary_job = dg.define_asset_job(
    name="canary",
    selection=dg.AssetSelection.checks(release_canary),
    description="Run the release canary check once (no asset is materialized).",
)

canary_hourly = dg.ScheduleDefinition(
    name="canary_hourly",
    job=canary_job,
    cron_schedule="0 * * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Hourly canary against the serving release; cheap (five searches), read-only but for traces.",
)
