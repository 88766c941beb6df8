"""`infra-rag sources sync`: bring the mirrors to the upstream commits sources.yaml names.

One line per source (or a JSON list with ``--json``); exit 1 when any source failed to sync
(its mirror is left as it was), 0 otherwise. An unknown ``--source`` is the usual ``error:``
line with exit 2. The hourly ``sync_upstream`` schedule runs the same library call.
"""

from __future__ import annotations

import click

from .common import CommandFailed, console, friendly_errors, json_option, out, print_json


@click.group()
def sources() -> None:
    """Work with the documentation sources of sources.yaml."""


@sources.command()
@click.option("--source", "names", multiple=True, help="sync only this source (repeatable; default: all)")
@json_option("JSON output: one report per source")
@click.pass_obj
@friendly_errors
def sync(obj, names, as_json) -> None:
    """Fetch each source's upstream (depth-1 git or checksummed URLs) and swap its mirror atomically."""
    from ..rag.ingest.upstream_sync import sync_sources

    with console.status("syncing upstream sources…"):
        reports = sync_sources(obj["settings"].sources(), list(names) or None)
    if as_json:
        print_json([r.to_dict() for r in reports])
    else:
        for report in reports:
            out.print(report.line(), highlight=False, soft_wrap=True, markup=False)
    failed = [r for r in reports if r.status == "error"]
    if failed:  # each failure is on its line above; the mirrors of failed sources are unchanged
        raise CommandFailed(f"{len(failed)} of {len(reports)} source(s) failed to sync")


COMMANDS = [sources]
