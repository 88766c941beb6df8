"""`infra-rag`: build and inspect index versions from a terminal or a script.

Built on the same library and asset graph as the Dagster UI. Every failure is a one-line
``error: ...``, never a traceback: exit 2 for a usage error, 1 for a missing prerequisite or a
refused build (cli/common.py). Commands that print data take ``--json``.
"""

from __future__ import annotations

import threading
import uuid
import warnings

import click

from . import health, judge, judge_labels, ops, query, sources
from .common import (
    CommandFailed,
    UserError,
    console,
    friendly_errors,
    index_version_option,
    json_option,
    needs_home,
    out,
    print_json,
    print_rows,
    stage_choice,
)


def targets() -> list[str]:
    from ..control.stages import targets

    return targets()


def stage_order() -> list[str]:
    from ..control.stages import stage_order

    return stage_order()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="infra_rag_assets", prog_name="infra-rag", message="%(prog)s %(version)s")
@click.option("--home", default=None, help="data home (default: $INFRA_RAG_HOME, else ./.infra_rag)")
@click.option(
    "--sources",
    "sources_file",
    default=None,
    help="sources.yaml to read (default: $INFRA_RAG_SOURCES, else the packaged one)",
)
@click.pass_context
def main(ctx: click.Context, home: str | None, sources_file: str | None) -> None:
    """Build, inspect and query infra_rag_assets index versions."""
    warnings.filterwarnings("ignore", message=".*(preview|beta).*", category=Warning)
    from .. import settings as env
    from ..defs.executors import StepExecutorError, build_executor
    from ..defs.resources import BuildResource, DataHomeResource
    from ..rag.devices import DeviceSettingError, parse

    try:
        parse(env.device())  # a malformed INFRA_RAG_DEVICE stops every command before any work
        build_executor()  # so does an unknown INFRA_RAG_STEP_EXECUTOR or its missing package
    except (DeviceSettingError, StepExecutorError) as exc:
        raise UserError(str(exc)) from None

    store = DataHomeResource(home=home) if home else DataHomeResource()
    settings = BuildResource(sources_file=sources_file) if sources_file else BuildResource()
    ctx.obj = {"store": store, "settings": settings}


@main.command()
@click.option(
    "--through",
    default="release",
    show_default=True,
    type=stage_choice(targets),
    help="last stage to build (each stage of the asset graph, in build order; indexes = both indexes)",
)
@click.option(
    "--from", "start", default=None, type=stage_choice(stage_order), help="first stage to run (earlier stages reused)"
)
@index_version_option(help="rebuild an existing version instead of a new one")
@click.option(
    "--submit",
    is_flag=True,
    help="launch the run and return at once (queued for the daemon when the "
    "instance queues runs) instead of waiting for it",
)
@click.option(
    "--in-process",
    "in_process",
    is_flag=True,
    help="run in this process (faster start; the UI lists the run but cannot re-execute it)",
)
@click.option(
    "--quick",
    is_flag=True,
    help="a new version with the base model as is: no domain adaptation "
    "(saves 10-20 min on a cold build; same as INFRA_RAG_ADAPT=0)",
)
@click.option(
    "--source",
    "only_sources",
    multiple=True,
    metavar="NAME",
    help="a new version of only this source of the sources file (repeatable; e.g. "
    "prometheus-site for a first answer in minutes); default: every source",
)
@json_option("print the version, run and outcome as JSON (progress stays on stderr)")
@click.pass_obj
@friendly_errors
def build(
    obj: dict,
    through: str,
    start: str | None,
    version: str | None,
    submit: bool,
    in_process: bool,
    quick: bool,
    only_sources: tuple[str, ...],
    as_json: bool,
) -> None:
    """Create a new index version and run a build job of the Definitions for it: launched through
    workspace.yaml (re-executable from the UI) and waited for, or in this process (--in-process,
    --from, or an instance that queues runs)."""
    import dagster as dg

    from ..control.builds import (
        materialize_version,
        open_instance,
        register_version,
        reuse_upstream,
        serve_if_approved,
    )
    from ..control.stages import stages_for
    from ..defs.reporting import ui_url

    store, settings = obj["store"], without_adaptation(obj["settings"]) if quick else obj["settings"]
    if only_sources:
        if version:
            raise UserError("--source picks the sources of a new version; --index-version rebuilds an existing one")
        settings = with_fields(settings, only_sources=list(only_sources))
    stages = stages_for(through, start)
    if submit and (start or in_process):
        raise UserError("--submit launches a whole build job; --from and --in-process run in this process")
    settings.sources()  # fail fast on a bad sources file before touching the instance
    if not submit:  # a submitted run resolves the device where it runs
        from ..rag.devices import configured

        configured()  # DeviceSettingError (a ValueError): one line naming INFRA_RAG_DEVICE, exit 2
    version_given = bool(version)
    with open_instance(store) as instance:
        if version:
            if not instance.has_dynamic_partition("index_version", version):
                raise CommandFailed(f"unknown index version {version!r} (see `infra-rag versions`)")
        else:
            with console.status("snapshotting configuration and sources…"):
                version = register_version(instance, store, settings, created_by="cli")
        if start and not version_given:
            previous = reuse_upstream(instance, store, version, start)
            if previous:
                console.print(f"reusing earlier stages of {previous} (sources unchanged)")
        console.print(f"index version [bold]{version}[/]: {' → '.join(stages)}")
        build_id = uuid.uuid4().hex[:12]
        tags = {"infra_rag/build_id": build_id, "infra_rag/origin": "cli"}
        if submit:
            from ..control.builds import submit_build

            run_id = submit_build(instance, version, through, store, settings, tags)
            queued = instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.QUEUED
            console.print(
                f"{'queued' if queued else 'launched'} run {run_id} "
                f"(job {instance.get_run_by_id(run_id).job_name}): {ui_url()}/runs/{run_id}"
                + (" — the daemon launches it (`infra-rag ui` runs one)" if queued else "")
            )
            _print_build(as_json, version, run_id, "queued" if queued else "launched")
            return
        watcher = _StageWatcher(instance, build_id, stages)
        watcher.start()
        try:
            result = materialize_version(version, stages, instance, store, settings, tags=tags, in_process=in_process)
        finally:
            watcher.stop()
        failures = result.failure()
        served = None if failures else serve_if_approved(instance, store, result, tags={"infra_rag/origin": "cli"})
        if served is not None and not served.success:
            failures = f"serving_release: {served.failure()}"
        console.print(f"run {result.run_id[:8]}: {ui_url()}/runs/{result.run_id}", highlight=False, soft_wrap=True)
    for line in result.check_warnings():
        console.print(f"[yellow]warning:[/] {line}", highlight=False, soft_wrap=True)
    if failures:
        raise CommandFailed(f"build of {version} failed: {failures}")
    _print_build(as_json, version, result.run_id, "served" if served is not None else "built", stages)


def _print_build(as_json: bool, version: str, run_id: str, outcome: str, stages: list[str] | None = None) -> None:
    """The version on stdout (what scripts read), or one JSON object with ``--json``."""
    if as_json:
        print_json({"index_version": version, "run_id": run_id, "outcome": outcome, "stages": stages})
    else:
        out.print(version)


def without_adaptation(settings):
    """The same build settings with ``adapt`` off (the quick base-model build)."""
    return with_fields(settings, adapt=False)


def with_fields(settings, **changed):
    """The same build settings with ``changed`` fields (a resource is immutable)."""
    fields = {name: getattr(settings, name) for name in type(settings).model_fields}
    return type(settings)(**{**fields, **changed})


class _StageWatcher:
    """Polls the instance's event log for this build's run and shows per-stage progress."""

    def __init__(self, instance, build_id: str, stages: list[str]):
        self.instance, self.build_id, self.stages = instance, build_id, stages
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        import dagster as dg
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=False
        ) as progress:
            tasks = {s: progress.add_task(f"{s}: waiting", total=1) for s in self.stages}
            cursor, run_id, stopping = None, None, False
            while not stopping:
                stopping = self._stop.wait(0.5)  # after stop(), one last pass shows the final steps
                if run_id is None:
                    runs = self.instance.get_runs(dg.RunsFilter(tags={"infra_rag/build_id": self.build_id}), limit=1)
                    run_id = runs[0].run_id if runs else None
                has_more = run_id is not None
                while has_more:  # only the events after the cursor: a long build's log is not re-read
                    page = self.instance.get_records_for_run(run_id, cursor=cursor, limit=1000)
                    for record in page.records:
                        self._apply(record.event_log_entry, progress, tasks)
                    cursor, has_more = page.cursor, page.has_more

    @staticmethod
    def _apply(entry, progress, tasks) -> None:
        step = entry.step_key or ""
        if step not in tasks:
            return
        event = entry.dagster_event
        if event is not None and event.event_type_value == "STEP_START":
            progress.update(tasks[step], description=f"{step}: running")
        elif event is not None and event.event_type_value == "STEP_SUCCESS":
            progress.update(tasks[step], description=f"{step}: done", completed=1)
        elif event is not None and event.event_type_value == "STEP_FAILURE":
            progress.update(tasks[step], description=f"{step}: [red]failed[/]", completed=1)
        elif event is None and entry.user_message:
            progress.update(tasks[step], description=f"{step}: {entry.user_message[:60]}")


@main.command()
@json_option()
@click.pass_obj
@friendly_errors
@needs_home
def versions(obj: dict, as_json: bool) -> None:
    """List index versions with their document and chunk counts."""
    frame = obj["store"].data_home().warehouse().versions()
    if as_json:
        print_json(frame.to_dicts())
        return
    if frame.is_empty():
        console.print("no index versions yet: run `infra-rag build`")
        return
    columns = ["index_version", "created_at", "created_by", "config", "documents", "chunks"]
    rows = [
        [
            r["index_version"],
            f"{r['created_at']:%Y-%m-%d %H:%M:%S}",
            r["created_by"],
            r["config_hash"][:10],
            str(r["documents"]),
            str(r["chunks"]),
        ]
        for r in frame.iter_rows(named=True)
    ]
    print_rows(columns, rows)


for _module in (query, judge, judge_labels, ops, health, sources):
    for _command in _module.COMMANDS:
        main.add_command(_command)
