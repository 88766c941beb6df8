"""`infra-rag search | answer | traces`: query an index version from a terminal or a script."""

from __future__ import annotations

import json
import time

import click

from ..rag.answer.answerers import ANSWERERS
from ..rag.search.engine import hit_record
from ..rag.search.questions import QuestionError, clean_question, read_batch
from .common import (
    CommandFailed,
    UserError,
    config_choice,
    console,
    friendly_errors,
    index_version_option,
    json_option,
    mode_choice,
    needs_home,
    out,
    print_json,
    print_rows,
    project_choice,
)
from .judge import print_explanation, version_judge


def _engine(obj: dict, version: str | None):
    from ..rag.index.embedding import ModelMismatch, ModelUnavailable
    from ..rag.search.engine import QueryEngine, single_thread_queries

    single_thread_queries()

    try:
        with console.status("loading index and models…"):
            return QueryEngine.open(obj["store"].data_home(), version)
    except (ModelMismatch, ModelUnavailable) as exc:
        raise CommandFailed(str(exc).splitlines()[0]) from None


def _config_name(mode: str, config: str | None) -> str:
    from ..rag.search.engine import MODE_CONFIGS, named_config

    name = config or MODE_CONFIGS[mode]
    named_config(name)  # one-line error for an unknown name
    return name


@click.command()
@click.argument("question", required=False)
@click.option("--batch", "batch", type=str, default=None, help='JSONL of {"id","question"} (\'-\' = stdin)')
@click.option("-k", "--top-k", "--k", "k", default=10, show_default=True, type=click.IntRange(1, 100))
@index_version_option(help="index version (default: current release, else latest)")
@click.option("--mode", type=mode_choice(), default="hybrid", show_default=True)
@click.option(
    "--config", "config", default=None, type=config_choice(), help="named retrieval config (overrides --mode)"
)
@click.option("--project", default=None, type=project_choice(), help="only passages of this project")
@json_option("one JSON line per question")
@click.option("--output", "-o", default="-", help="batch output file (default stdout)")
@click.pass_obj
@friendly_errors
@needs_home
def search(obj, question, batch, k, version, mode, config, project, as_json, output) -> None:
    """Retrieve passages for QUESTION, or for every line of --batch (one JSON line out per question)."""
    from ..rag.operate.traces import process_sink, trace_row

    if (question is not None) == bool(batch):
        raise UserError("give either a QUESTION or --batch FILE")
    name = _config_name(mode, config)
    items = _questions(question, batch)  # validated whole before the model loads
    engine = _engine(obj, version)
    sink = process_sink(obj["store"].data_home().traces_dir())
    filters = {"project": project} if project else None
    records = []
    with click.open_file(output, "w") as stream, _progress(len(items), bool(batch)) as advance:
        for item in items:
            started = time.perf_counter()
            result = engine.search(item["question"], config=name, k=k, filters=filters)
            record = {
                "id": item["id"],
                "hits": [hit_record(h) for h in result.hits],
                "abstained": result.abstained,
                "latency_ms": round((time.perf_counter() - started) * 1000, 2),
            }
            sink.submit(
                trace_row(
                    origin="cli-batch" if batch else "cli", version=engine.version, config_name=name, result=result
                )
            )
            if batch or as_json:
                stream.write(json.dumps(record) + "\n")
            else:
                records.append((record, result))
            advance()
    sink.flush()
    for record, result in records:
        _show_hits(engine.version, name, record, result)


def _questions(question: str | None, batch: str | None) -> list[dict]:
    try:
        return read_batch(batch) if batch else [{"id": "q", "question": clean_question(question)}]
    except QuestionError as exc:
        raise UserError(str(exc)) from None


class _progress:
    """A progress bar on stderr for batches (none for a single question)."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self._bar = total, enabled, None

    def __enter__(self):
        if self.enabled:
            from rich.progress import Progress

            self._bar = Progress(console=console, transient=True)
            self._bar.start()
            task = self._bar.add_task("questions", total=self.total)
            return lambda: self._bar.advance(task)
        return lambda: None

    def __exit__(self, *exc) -> None:
        if self._bar:
            self._bar.stop()


def _show_hits(version: str, name: str, record: dict, result) -> None:
    console.print(f"[dim]{version} · {name} · {record['latency_ms']} ms[/]")
    if result.abstained:
        out.print(f"no passage: {result.abstain_reason}")
    for i, hit in enumerate(result.hits, 1):
        out.print(f"[bold]{i}. {hit.title}[/] › {hit.section}  [dim]{hit.score:.3f}[/]\n   {hit.url}")
        out.print("   " + " ".join(hit.text.split())[:240], highlight=False)


@click.command()
@click.argument("question")
@index_version_option(help="index version (default: current release, else latest)")
@click.option("--config", "config", default=None, type=config_choice(), help="named retrieval config")
@click.option("-k", "--top-k", "--k", "k", default=6, show_default=True, type=click.IntRange(1, 50))
@click.option("--offline", is_flag=True, help="an offline answerer (not Claude) even if ANTHROPIC_API_KEY is set")
@click.option("--answerer", type=click.Choice(ANSWERERS), default=None,
              help="who answers (default: claude when ANTHROPIC_API_KEY is set, else reader)")  # fmt: skip
@click.option("--explain", is_flag=True, help="judge the answer: relevant and used context, unsupported sentences")
@json_option()
@click.pass_obj
@friendly_errors
@needs_home
def answer(obj, question, version, config, k, offline, answerer, explain, as_json) -> None:
    """Answer QUESTION from the docs with numbered citations (Claude, or the reader offline)."""
    from ..rag.operate.traces import process_sink, trace_row

    question = _questions(question, None)[0]["question"]
    name = _config_name("hybrid", config)
    engine = _engine(obj, version)
    outcome = engine.answer(question, config=name, k=k, use_claude=False if offline else None, answerer=answerer)
    sink = process_sink(obj["store"].data_home().traces_dir())
    sink.submit(
        trace_row(origin="cli", version=engine.version, config_name=name, result=outcome.result, answer=outcome.answer)
    )
    sink.flush()
    reply = outcome.answer
    explained = _explained(obj, engine.version, question, outcome) if explain else None
    if as_json:
        extra = {"explain": _explain_record(*explained)} if explained else {}
        record = {"version": engine.version, **reply.to_dict(), "sources": outcome.packed.render_sources(), **extra}
        click.echo(json.dumps(record, default=str))
        return
    out.print(reply.text, highlight=False)
    if reply.citations:
        out.print("\n[bold]Sources[/]")
        out.print(outcome.packed.render_sources(), highlight=False)
    if explained:
        print_explanation(*explained)
        _print_spans(reply)
    console.print(f"[dim]{engine.version} · {name} · {reply.method} · {reply.outcome}[/]")


def _print_spans(reply) -> None:
    """The reader's sentence, its calibrated score and the runner-up sentences (``--explain``)."""
    if not reply.candidates:
        return
    out.print("\n[bold]Reader sentences[/] (calibrated P(answer), cosine to the question, share of the asked "
              "words; in the order the reader prefers them)")  # fmt: skip
    for c in reply.candidates:
        mark = "→" if reply.short_answer and c["text"] in reply.short_answer else " "  # the stated one(s)
        words = c.get("asked_share", 0.0)
        out.print(f" {mark} [{c['passage_number']}] {c['probability']:.3f} ({c['score']:+.2f}, {words:.2f})  "
                  f"{c['text'][:160]}", highlight=False)  # fmt: skip


def _explained(obj: dict, version: str, question: str, outcome):
    from ..rag.evaluate.answers.answer_eval import judge_answer

    model, _ = version_judge(obj, version)
    return judge_answer(model, question, outcome.answer, [p.hit for p in outcome.packed.passages])


def _explain_record(context, trace) -> dict:
    return {
        "relevance": trace.relevance,
        "utilization": trace.utilization,
        "completeness": trace.completeness,
        "adherence": trace.adherence,
        "context": [
            {"passage": c.passage, "text": c.text, "relevant": i in trace.relevant, "used": i in trace.utilized}
            for i, c in enumerate(context)
        ],
        "sentences": [s.to_dict() for s in trace.sentences],
    }


@click.command()
@click.option("--last", "last", default=10, show_default=True, type=click.IntRange(1, 1000))
@json_option("the traces as a JSON list (full values, not cut to 80 characters)")
@click.pass_obj
@friendly_errors
@needs_home
def traces(obj, last, as_json) -> None:
    """Show the last N question traces (CLI, service, batch, canary), read from the trace segments."""
    from ..rag.operate.traces import last_traces

    frame = last_traces(obj["store"].data_home().traces_dir(), last)
    if as_json:
        print_json(frame.to_dicts())
        return
    print_rows(frame.columns, [[("" if v is None else str(v))[:80] for v in row] for row in frame.iter_rows()])


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="worker processes (each loads the model and opens the release once)",
)
@click.option(
    "--max-inflight",
    default=32,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="per worker: queries past this many at once get 503 + Retry-After",
)
@click.option(
    "--release-poll",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0.1, 3600),
    help="seconds between checks of the release pointer (SIGHUP checks at once)",
)
@click.option(
    "--api-key-file",
    type=click.Path(exists=True, dir_okay=False, readable=True),
    default=None,
    help="file of API keys, one per line: every route but /livez and /readyz then needs "
    "'Authorization: Bearer <key>' (INFRA_RAG_API_KEY adds one from the environment)",
)
@click.pass_obj
@friendly_errors
def serve(obj, host, port, workers, max_inflight, release_poll, api_key_file) -> None:
    """Serve /v1/search, /v1/answer, /v1/health, /v1/versions, /v1/release, /metrics over HTTP."""
    import os
    import sys

    from .. import settings
    from ..rag.operate import temp_dirs
    from ..rag.search.engine import VersionNotFound, resolve_version
    from ..service import uvicorn_command
    from ..service.access import KeyFileError, load_api_keys
    from ..service.state import METRICS_PREFIX

    home = obj["store"].data_home()
    try:
        version = resolve_version(home)
    except VersionNotFound as exc:
        raise CommandFailed(str(exc)) from None
    try:  # refuse here, before uvicorn starts workers that would each fail the same way
        keys = load_api_keys(api_key_file or settings.api_key_file(), settings.api_key())
    except KeyFileError as exc:
        raise CommandFailed(str(exc)) from None
    metrics_dir = temp_dirs.make(METRICS_PREFIX)  # fresh per start: counters from 0; named by this pid
    temp_dirs.remove_after_exit(metrics_dir)  # uvicorn replaces this process: a watcher removes it after
    env = settings.child_environment(
        home=home.root,
        max_inflight=max_inflight,
        release_poll_s=release_poll,
        lancedb_uri=home.lancedb_uri or None,
        api_key_file=os.path.abspath(api_key_file) if api_key_file else None,
        metrics_dir=str(metrics_dir),
    )
    auth = f"{len(keys)} API key(s)" if keys else "no API key"
    console.print(f"serving {version} from {home.root} on http://{host}:{port} ({workers} worker(s), {auth})")
    # uvicorn replaces this process (signals reach it directly); its workers read the settings above
    os.execve(sys.executable, uvicorn_command(host, port, workers), env)


COMMANDS = [search, answer, traces, serve]
