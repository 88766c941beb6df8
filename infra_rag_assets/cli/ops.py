"""`infra-rag release | rollback | lineage | snapshot | ui`: operate releases, trace a score to its
bytes, re-derive serving snapshots, open the Dagster UI."""

from __future__ import annotations

from pathlib import Path

import click

from .common import (
    CommandFailed,
    console,
    friendly_errors,
    index_version_option,
    json_option,
    needs_home,
    out,
    print_json,
)


def _instance(obj):
    from ..control.builds import open_instance

    return open_instance(obj["store"])


@click.command("release")
@index_version_option(required=True, help="an evaluated index version to promote")
@json_option()
@click.pass_obj
@friendly_errors
@needs_home
def release_cmd(obj, version, as_json) -> None:
    """Approve VERSION (release asset: critical gates re-checked), then serve it (release_version job)."""
    from ..control.builds import materialize_version, serve_if_approved

    warehouse = obj["store"].data_home().warehouse()
    if not warehouse.version_info(version):
        raise CommandFailed(
            f"unknown index version {version!r} in {obj['store'].data_home().root}: see `infra-rag versions`"
        )
    if not warehouse.has_rows("eval_metrics", version):
        raise CommandFailed(
            f"{version} has no eval_run yet: `infra-rag build --index-version {version} --from eval_run`"
        )
    with _instance(obj) as instance:
        result = materialize_version(
            version, ["release"], instance, obj["store"], obj["settings"], tags={"infra_rag/origin": "cli-release"}
        )
        served = serve_if_approved(instance, obj["store"], result, tags={"infra_rag/origin": "cli-release"})
        result = served or result
    if not result.success:
        raise CommandFailed(f"release of {version} refused: {result.failure()}")
    if as_json:
        print_json({"released": version, "run_id": result.run_id})
        return
    out.print(f"released {version}")


@click.command()
@click.option("--reason", default="", help="why (recorded in the release history)")
@json_option()
@click.pass_obj
@friendly_errors
@needs_home
def rollback(obj, reason, as_json) -> None:
    """Serve the previously released version again (the rollback job: a new event; nothing deleted)."""
    from ..control.builds import change_serving
    from ..rag.operate import releases

    try:  # nothing to roll back to: a one-line error, no run
        releases.rollback_target(obj["store"].data_home().warehouse())
    except ValueError as exc:
        raise CommandFailed(str(exc)) from None
    with _instance(obj) as instance:
        result = change_serving(instance, obj["store"], "rollback", reason=reason, tags={"infra_rag/origin": "cli"})
    if not result.success:
        raise CommandFailed(f"rollback failed: {result.failure()}")
    event = releases.history(obj["store"].data_home().warehouse())[-1]
    if as_json:
        print_json({"rolled_back": event.previous_version, "serving": event.index_version, "run_id": result.run_id})
        return
    out.print(f"rolled back: {event.previous_version} → {event.index_version}")


@click.command()
@click.argument("ref")
@click.option("--regime", default="serving", show_default=True, help="for a question id: which regime's hits")
@json_option()
@click.pass_obj
@friendly_errors
@needs_home
def lineage(obj, ref, regime, as_json) -> None:
    """Trace REF (a Dagster run id, an index version, or a benchmark question id) back to source bytes."""
    from ..rag.operate import lineage as lin

    warehouse = obj["store"].data_home().warehouse()
    with _instance(obj) as instance:
        version, chain = _resolve_ref(instance, warehouse, ref, regime)
        chain["index_version"] = lin.version_summary(warehouse, version)
        chain["materializations"] = _materializations(instance, version)
    if as_json:
        print_json(chain)
        return
    _print_chain(chain)


def _resolve_ref(instance, warehouse, ref: str, regime: str) -> tuple[str, dict]:
    from ..rag.operate import lineage as lin

    run = instance.get_run_by_id(ref) if len(ref) >= 8 and "-" in ref else None
    if run is not None:
        version = run.tags.get("dagster/partition")
        if not version:
            raise CommandFailed(f"run {ref} is not partitioned by index version")
        return version, {"run": {"run_id": run.run_id, "job": run.job_name, "status": run.status.value}}
    if warehouse.version_info(ref):
        return ref, {}
    if warehouse.has_question(ref):
        chain = lin.question_chain(warehouse, ref, regime)
        return chain["question"]["index_version"], chain
    raise CommandFailed(f"{ref!r} is not a run id, an index version or a scored question id in this home")


def _materializations(instance, version: str) -> list[dict]:
    from ..control.stages import asset_graph
    from ..defs.asset_lineage import upstream_lineage, upstream_of

    return upstream_lineage(instance, version, [*upstream_of(asset_graph(), "release"), "release"])


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


@click.command()
@index_version_option("versions", multiple=True, help="index version (repeatable; default: every built one)")
@json_option()
@click.pass_obj
@friendly_errors
@needs_home
def snapshot(obj, versions, as_json) -> None:
    """Write serving snapshots from the warehouse (for versions built before snapshots existed).

    `lexical_index` writes a version's snapshot as part of every build; this re-derives it
    without rebuilding any index, and republishes the release pointer. The version's ranker and
    calibrated floor are kept when its chunks are unchanged."""
    from ..rag.index.serving_snapshot import snapshot_files, snapshot_from_warehouse
    from ..rag.operate.releases import publish_pointer

    home = obj["store"].data_home()
    warehouse = home.warehouse()
    built = warehouse.versions_with_chunks()
    written = []
    for version in versions or built:
        if version not in built:
            raise CommandFailed(f"index version {version!r} has no chunks in the warehouse (see `infra-rag versions`)")
        manifest = snapshot_from_warehouse(home, version)
        kept = snapshot_files(home.serving_root(), version)
        path = home.serving_root() / version
        written.append({"index_version": version, "chunks": manifest.chunks, "pages": manifest.pages, "kept": kept})
        if not as_json:
            listed = ", ".join(kept) or "none"
            out.print(f"{version}: {manifest.chunks} chunks, {manifest.pages} pages -> {path} (kept: {listed})")
    pointer = publish_pointer(warehouse)
    if as_json:
        print_json({"snapshots": written, "release": pointer["current"]})
        return
    console.print(f"release pointer: {pointer['current'] or 'nothing released'}")


COMMANDS = [release_cmd, rollback, lineage, snapshot, ui]
