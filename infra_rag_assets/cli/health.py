"""`infra-rag health | canary`: probes an operator (or a cron job, or a k8s probe) can run.

Both print a short table (tab-separated when piped), or one JSON object with ``--json``, and
exit 1 when something failed (or the data home does not exist), 0 otherwise, so the exit code
alone is the probe. Bad input (a broken canary file) is the usual one-line ``error:``, exit 2.
"""

from __future__ import annotations

import json

import click

from ..rag.search.health import DEFAULT_MAX_AGE_DAYS, DEFAULT_MAX_TRACE_ERRORS, TRACE_WINDOW
from .common import CommandFailed, console, friendly_errors, index_version_option, json_option, needs_home, print_rows


@click.command()
@click.option(
    "--max-age-days",
    default=DEFAULT_MAX_AGE_DAYS,
    show_default=True,
    type=click.FloatRange(min=0),
    help="oldest acceptable release event and newest index version",
)
@click.option(
    "--max-trace-errors",
    default=DEFAULT_MAX_TRACE_ERRORS,
    show_default=True,
    type=click.IntRange(min=0),
    help=f"error outcomes allowed among the last {TRACE_WINDOW} traces",
)
@json_option()
@click.pass_obj
@friendly_errors
@needs_home
def health(obj, max_age_days, max_trace_errors, as_json) -> None:
    """Index, release, freshness, model files and recent trace errors; exit 1 on any failure."""
    from ..rag.search.health import full_health

    home = obj["store"].data_home()
    with console.status("checking index, release and model…"):
        report = full_health(home, max_age_days, max_trace_errors)
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
    else:
        print_rows(
            ["check", "status", "detail"],
            [
                [name, "ok" if check["ok"] else "FAIL", _health_detail(name, check)]
                for name, check in report["checks"].items()
            ],
        )
    if report["nothing_built"]:
        console.print(
            f"[bold red]unhealthy:[/] nothing built yet in {home.root}: run `infra-rag build` (or `--quick`); "
            "it is released when its gates pass",
            highlight=False,
            soft_wrap=True,
        )
        raise click.exceptions.Exit(1)
    if not report["ok"]:
        failed = [name for name, check in report["checks"].items() if not check["ok"]]
        console.print(f"[bold red]unhealthy:[/] {', '.join(failed)}", highlight=False)
        raise click.exceptions.Exit(1)


def _health_detail(name: str, check: dict) -> str:
    if not check["ok"] or name not in ("index", "release", "model"):
        return check.get("detail", "")
    if name == "index":
        return f"serving {check['version']}"
    if name == "release":
        return f"current {check['current']}"
    return f"{check['model_id']} at {check.get('path', '?')} (weights {check['weights_hash'][:16]})"


@click.command()
@index_version_option(help="index version to test (default: the current release)")
@click.option(
    "--file", "canary_file", default=None, help="canary questions (default: $INFRA_RAG_CANARY, else the packaged one)"
)
@json_option()
@click.pass_obj
@friendly_errors
@needs_home
def canary(obj, version, canary_file, as_json) -> None:
    """Ask the known canary questions of the release (or VERSION); exit 1 if any fails.

    Each answerable canary must put its expected page in the top 5 hits; the unanswerable one
    must abstain, or is skipped when the serving config has no abstention floor. Every
    question is recorded as a trace with origin "canary".
    """
    from ..rag.evaluate.canary import canary_suite, summary
    from ..rag.index.embedding import ModelMismatch, ModelUnavailable

    try:
        with console.status("loading index and models…"):
            report = canary_suite(obj["store"].data_home(), version, canary_file)
    except (ModelMismatch, ModelUnavailable) as exc:
        raise CommandFailed(str(exc).splitlines()[0]) from None
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        note = "" if report.released else " (not the current release)"
        console.print(f"[dim]{report.version}{note} · {report.config}[/]", highlight=False)
        print_rows(
            ["canary", "status", "expected", "outcome", "rank", "detail"],
            [
                [r.id, r.status, r.expected_outcome, r.outcome, "" if r.rank is None else str(r.rank), r.detail]
                for r in report.results
            ],
        )
    console.print(f"canary: {summary(report.results)}", highlight=False)
    if report.failed:
        raise click.exceptions.Exit(1)


COMMANDS = [health, canary]
