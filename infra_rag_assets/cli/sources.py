"""`infra-rag sources sync`: bring the mirrors to the upstream commits sources.yaml names.

One line per source (or a JSON list with ``--json``); exit 1 when any source failed to sync
(its mirror is left as it was), 0 otherwise. An unknown ``--source`` is the usual ``error:``
line with exit 2. The hourly ``sync_upstream`` schedule runs the same library call.
"""

from __future__ import annotations

import json

import click

from .common import console, friendly_errors, out


@click.group()
def sources() -> None:
    """Work with the documentation sources of sources.yaml."""


@sources.command()
@click.option("--source", "names", multiple=True, help="sync only this source (repeatable; default: all)")
@click.option("--json", "as_json", is_flag=True, help="JSON output: one report per source")
@click.pass_obj
@friendly_errors
def sync(obj, names, as_json) -> None:
    """Fetch each source's upstream (depth-1 git or checksummed URLs) and swap its mirror atomically."""
    from ..rag.ingest.upstream_sync import sync_sources

    with console.status("syncing upstream sources…"):
        reports = sync_sources(obj["settings"].sources(), list(names) or None)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in reports], indent=2))
    else:
        for report in reports:
            out.print(report.line(), highlight=False, soft_wrap=True, markup=False)
    if any(r.status == "error" for r in reports):
        raise SystemExit(1)


COMMANDS = [sources]
