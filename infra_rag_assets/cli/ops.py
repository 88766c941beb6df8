"""`infra-rag release | rollback | lineage`: operate releases and trace a score to its bytes."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .common import UserError, console, friendly_errors, index_version_option, out


def _instance(obj):
    from ..control.builds import open_instance

    return open_instance(obj["store"])


@click.command("release")
@index_version_option(required=True, help="an evaluated index version to promote")
@click.pass_obj
@friendly_errors
def release_cmd(obj, version) -> None:
    """Approve VERSION (release asset: critical gates re-checked), then serve it (release_version job)."""
    from ..control.builds import materialize_version, serve_if_approved

    warehouse = obj["store"].data_home().warehouse()
    if not warehouse.has_rows("eval_metrics", version):
        raise UserError(f"{version} has no eval_run: `infra-rag build --index-version {version} --from eval_run`")
    with _instance(obj) as instance:
        result = materialize_version(
            version, ["release"], instance, obj["store"], obj["settings"], tags={"infra_rag/origin": "cli-release"}
        )
        served = serve_if_approved(instance, obj["store"], result, tags={"infra_rag/origin": "cli-release"})
        result = served or result
    if not result.success:
        raise UserError(f"release of {version} refused: {result.failure()}")
    out.print(f"released {version}")


@click.command()
@click.option("--reason", default="", help="why (recorded in the release history)")
@click.pass_obj
@friendly_errors
def rollback(obj, reason) -> None:
    """Serve the previously released version again (the rollback job: a new event; nothing deleted)."""
    from ..control.builds import change_serving
    from ..rag.operate import releases

    releases.rollback_target(obj["store"].data_home().warehouse())  # nothing to roll back to: a one-line error, no run
    with _instance(obj) as instance:
        result = change_serving(instance, obj["store"], "rollback", reason=reason, tags={"infra_rag/origin": "cli"})
    if not result.success:
        raise UserError(f"rollback failed: {result.failure()}")
    event = releases.history(obj["store"].data_home().warehouse())[-1]
    out.print(f"rolled back: {event.previous_version} → {event.index_version}")


@click.command()
@click.argument("ref")
@click.option("--regime", default="serving", show_default=True, help="for a question id: which regime's hits")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
@friendly_errors
def lineage(obj, ref, regime, as_json) -> None:
    """Trace REF (a Dagster run id, an index version, or a benchmark question id) back to source bytes."""
    from ..rag.operate import lineage as lin

    warehouse = obj["store"].data_home().warehouse()
    with _instance(obj) as instance:
        version, chain = _resolve_ref(instance, warehouse, ref, regime)
        chain["index_version"] = lin.version_summary(warehouse, version)
        chain["materializations"] = _materializations(instance, version)
    if as_json:
        click.echo(json.dumps(chain, indent=2, default=str))
        return
    _print_chain(chain)


def _resolve_ref(instance, warehouse, ref: str, regime: str) -> tuple[str, dict]:
    from ..rag.operate import lineage as lin

    run = instance.get_run_by_id(ref) if len(ref) >= 8 and "-" in ref else None
    if run is not None:
        version = run.tags.get("dagster/partition")
        if not version:
            raise UserError(f"run {ref} is not partitioned by index version")
        return version, {"run": {"run_id": run.run_id, "job": run.job_name, "status": run.status.value}}
    if warehouse.version_info(ref):
        return ref, {}
    if warehouse.has_question(ref):
        chain = lin.question_chain(warehouse, ref, regime)
        return chain["question"]["index_version"], chain
    raise UserError(f"{ref!r} is not a run id, an index version or a scored question id")


def _materializations(instance, version: str) -> list[dict]:
    from ..defs.lineage import UPSTREAM, upstream_lineage

    return upstream_lineage(instance, version, (*UPSTREAM, "eval_run", "release"))


def _print_chain(chain: dict) -> None:
    if "run" in chain:
        out.print(f"[bold]run[/] {chain['run']['run_id']} ({chain['run']['job']}, {chain['run']['status']})")
    v = chain["index_version"]
    out.print(
        f"[bold]index version[/] {v['index_version']}  config {v['config_hash'][:12]}  "
        f"sources {v['sources_fingerprint'][:12]}  rows {v['rows']}"
    )
    for m in chain["materializations"]:
        state = f"run {m['run_id'][:8]}  data version {m['data_version'][:12]}" if m["run_id"] else "not materialized"
        out.print(f"  ↳ {m['asset']:<14} {state}")
    if "question" in chain:
        q = chain["question"]
        out.print(
            f"[bold]question[/] {q['question_id']}: {q['question']}\n  rank {q['rank']} "
            f"(relevant {', '.join(q['relevant']) or '—'}), regime {q['regime']}, eval run {q['run_id'][:8]}"
        )
    if "hit" in chain:
        h = chain["hit"]
        out.print(
            f"[bold]top hit[/] chunk {h['chunk_id']} = {h['doc_id']}[{h['start_char']}:{h['end_char']}] "
            f"({h['section_path']}) span matches document: {h['span_matches']}"
        )
        out.print(
            f"[bold]source page[/] {h['url']}  {h['rel_path']}  sha256 {h['bytes_hash']}  "
            f"{h['size_bytes']} bytes  {h['upstream']}  {h['license']}"
        )
    console.print("[dim]the same facts are in the Dagster UI: eval_run and release metadata, asset lineage[/]")


@click.command()
@click.option("--port", default=3000, show_default=True, type=int)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.pass_obj
@friendly_errors
def ui(obj, port, host) -> None:
    """Open the Dagster UI (`dagster dev -w workspace.yaml`) on the CLI's instance and data home.

    `dagster dev` gets DAGSTER_HOME, INFRA_RAG_HOME and INFRA_RAG_SOURCES exactly as `infra-rag build`
    uses them, so the UI shows the CLI's runs, versions and materializations (and its daemon runs
    queued `--submit` builds, schedules and sensors).
    """
    import os
    import sys

    from .. import settings
    from ..control.builds import ensure_dagster_home
    from ..package_data import workspace_yaml

    dagster_home, data_home = ensure_dagster_home(obj["store"]), obj["store"].data_home().root.resolve()
    env = settings.child_environment(
        dagster_home=dagster_home,
        home=data_home,
        sources=Path(obj["settings"].sources_file).resolve(),
        # run links in metadata point at this UI unless a URL is configured
        dagster_url=None if settings.is_set("DAGSTER_URL") else f"http://{host}:{port}",
    )
    console.print(f"Dagster UI on http://{host}:{port} — DAGSTER_HOME={dagster_home}, INFRA_RAG_HOME={data_home}")
    command = [
        sys.executable,
        "-m",
        "dagster",
        "dev",
        "-w",
        str(workspace_yaml()),
        "--host",
        host,
        "--port",
        str(port),
    ]
    os.execve(sys.executable, command, env)


COMMANDS = [release_cmd, rollback, lineage, ui]
