"""`infra-rag judge-labels`: a judge backend against the hand labels, by the split rule of
``label_calibration.py`` (thresholds on the tuning half, agreement on the report half)."""

from __future__ import annotations

import click

from .common import (
    CommandFailed,
    console,
    friendly_errors,
    index_version_option,
    json_option,
    print_json,
    print_rows,
    require_home,
)
from .judge import backend_option, version_judge


@click.command("judge-labels")
@backend_option
@click.option("--labels", "labels", default=None, help="labels JSONL (default the packaged answer_labels.jsonl)")
@index_version_option(help="whose support judge, for --backend trained (default: current release, else latest)")
@json_option("the whole report as JSON")
@click.pass_obj
@friendly_errors
def judge_labels(obj, backend, labels, version, as_json) -> None:
    """AUROC, threshold (tuning half), κ, precision and recall (report half) of a judge's
    signals against the hand labels; the claude backend also reports tokens and cost."""
    from ..package_data import benchmarks_dir
    from ..rag.judge.label_calibration import LabelError
    from ..settings import judge_backend

    try:
        backend = judge_backend(backend)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    path = labels or str(benchmarks_dir() / "answer_labels.jsonl")
    try:
        report = _claude(path) if backend == "claude" else _trained(obj, version, path)
    except LabelError as exc:
        raise CommandFailed(str(exc)) from None
    if as_json or report.get("status", "run") != "run":
        print_json(report)
        return
    console.print(f"[dim]{report.get('judge')} · {report['answers']} labelled answers[/]")
    print_rows(
        ["check", "answers", "AUROC", "AUROC report half", "threshold", "κ report half"],
        [
            [
                name,
                str(c["answers"]),
                *(_fmt(c.get(k)) for k in ("auroc", "auroc_report_half", "threshold_from_tuning_half", "kappa")),
            ]
            for name, c in report["checks"].items()
        ],  # fmt: skip
    )


def _claude(path: str) -> dict:
    from ..rag.judge.claude.claude_calibration import run_claude_calibration

    return run_claude_calibration(path)


def _trained(obj: dict, version: str | None, path: str) -> dict:
    from ..rag.judge.label_calibration import calibration_report, load_labels, signals

    require_home(obj)
    model, version = version_judge(obj, version)
    items = load_labels(path)
    return {"status": "run", "judge": model.identity, **calibration_report(items, signals(model, items))}


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.3f}"


COMMANDS = [judge_labels]
