"""`infra-rag judge`: score answers from anywhere with the version's support judge, and the
judge behind `infra-rag answer --explain`."""

from __future__ import annotations

import json
import sys
import time

import click

from ..settings import JUDGE_BACKENDS
from .common import (
    CommandFailed,
    UserError,
    console,
    friendly_errors,
    index_version_option,
    json_option,
    out,
    print_rows,
    require_home,
)


def version_judge(obj: dict, version: str | None):
    """(judge, version): the support judge of VERSION (default: the release, else the newest)."""
    from ..rag.judge.version_judge import load_version_judge
    from ..rag.search.engine import resolve_version

    home = obj["store"].data_home()
    version = resolve_version(home, version)
    with console.status("loading the support judge…"):
        judge, note = load_version_judge(home, version)
    if judge is None:
        raise CommandFailed(note)
    return judge, version


def backend_option(fn):
    """``--backend trained|claude`` (default INFRA_RAG_JUDGE_BACKEND, else trained)."""
    return click.option(
        "--backend",
        type=click.Choice(JUDGE_BACKENDS),
        default=None,
        help="trained: the version's support judge; claude: Claude grades each answer (needs ANTHROPIC_API_KEY); "
        "default INFRA_RAG_JUDGE_BACKEND, else trained",
    )(fn)


@click.command()
@click.option(
    "--batch", "batch", required=True, help='JSONL of {"id","question","passages":[{"id","text"}],"answer"} (- = stdin)'
)
@index_version_option(help="whose support judge (default: current release, else latest)")
@backend_option
@json_option("one JSON object per line and id")
@click.option("--output", "-o", default="-", help="output file (default stdout)")
@click.pass_obj
@friendly_errors
def judge(obj, batch, version, backend, as_json, output) -> None:
    """Score answers sentence by sentence: adherence (probability every sentence is supported),
    relevance, utilization and completeness of the passages, per id (claude: the five label
    axes, unsupported spans, tokens and cost instead of the three context scores)."""
    from ..rag.judge.batch import JudgeInputError, judge_items, read_items

    backend = chosen_backend(backend)
    try:
        if batch == "-":
            items = read_items(sys.stdin, "<stdin>")
        else:
            with open(batch, encoding="utf-8") as handle:
                items = read_items(handle, batch)
    except (JudgeInputError, UnicodeDecodeError) as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"cannot read {batch}: {exc.strerror}") from None
    started = time.perf_counter()
    if backend == "claude":
        from ..rag.judge.claude.claude_judge import ClaudeJudge

        claude = ClaudeJudge()
        results, whose = claude.judge_items(items), claude.identity
    else:
        require_home(obj)
        model, version = version_judge(obj, version)
        results, whose = (
            [{**r, "backend": backend, "judge": model.identity} for r in judge_items(model, items)],
            f"judge of {version}",
        )
    console.print(f"[dim]{len(results)} answers judged in {time.perf_counter() - started:.1f}s · {whose}[/]")
    if as_json or output != "-":
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in results)
        if output == "-":
            click.echo(lines, nl=False)
        else:
            with open(output, "w", encoding="utf-8") as handle:
                handle.write(lines)
        return
    if backend == "claude":
        axes = ("grounded", "fabricated", "citations")
        print_rows(
            ["id", "adherence", *axes, "cost $", "least supported sentence"],
            [
                [
                    r["id"],
                    _fmt(r["adherence"]),
                    *(str(r["axes"][a]) for a in axes),
                    f"{r['cost_usd'] or 0:.4f}",
                    _weakest(r),
                ]
                for r in results
            ],  # fmt: skip
        )
        return
    print_rows(
        ["id", "adherence", "relevance", "utilization", "completeness", "least supported sentence"],
        [
            [r["id"], *(_fmt(r[k]) for k in ("adherence", "relevance", "utilization", "completeness")), _weakest(r)]
            for r in results
        ],  # fmt: skip
    )


def chosen_backend(given: str | None) -> str:
    """The backend from ``--backend`` or INFRA_RAG_JUDGE_BACKEND; claude without a key is a
    one-line error before any work."""
    from ..rag.judge.claude.claude_judge import ClaudeJudgeUnavailable
    from ..rag.judge.judge_backends import chosen_backend as checked

    try:
        return checked(given)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    except ClaudeJudgeUnavailable as exc:
        raise CommandFailed(str(exc)) from None


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def _weakest(result: dict) -> str:
    if result.get("error"):
        return f"error: {result['error'][:70]}"
    if not result["sentences"]:
        return result.get("note", "")
    worst = min(result["sentences"], key=lambda s: s["supported"])
    return f"{worst['supported']:.2f} {worst['text'][:70]}"


def print_explanation(context, trace) -> None:
    """Which context sentences were relevant and used, which answer sentences are unsupported."""
    out.print("\n[bold]Context[/] (R = judged relevant, U = used by a citation)")
    relevant, used = set(trace.relevant), set(trace.utilized)
    for i, c in enumerate(context):
        flags = ("R" if i in relevant else "·") + ("U" if i in used else "·")
        out.print(f" {flags} [{c.passage}] {' '.join(c.text.split())[:150]}", highlight=False)
    out.print("\n[bold]Answer sentences[/] (support probability)")
    for s in trace.sentences:
        mark = "[green]supported  [/]" if s.supported >= 0.5 else "[red]UNSUPPORTED[/]"
        out.print(f" {mark} {s.supported:.2f} {s.text[:150]}", highlight=False)
    values = {k: getattr(trace, k) for k in ("relevance", "utilization", "completeness", "adherence")}
    out.print("\n" + " · ".join(f"{k} {_fmt(v)}" for k, v in values.items()))


COMMANDS = [judge]
