"""Build stages as the assembled code location sees them: stage order, ``--through/--from``
selections, the job covering a selection, and jobs by name, all resolved from the Definitions'
asset graph (defs/stage_graph.py does the graph work; this module only binds it to ``defs``).
"""

from __future__ import annotations

import functools

import dagster as dg

from ..definitions import defs
from ..defs.stage_graph import CHAIN_END, build_job_name, chain_targets, through_selection, toposorted


@functools.cache
def asset_graph():
    """The Definitions' resolved asset graph (resolved once per process)."""
    return defs.resolve_asset_graph()


def stage_order() -> list[str]:
    """Every stage of the build chain in dependency order (source_pages first, release last)."""
    return toposorted(asset_graph(), through_selection(CHAIN_END).resolve(asset_graph()))


def targets() -> list[str]:
    """What ``--through`` accepts, in build order (each stage, and "indexes" for both indexes)."""
    return chain_targets(asset_graph())


def stages_for(target: str, start: str | None = None) -> list[str]:
    """The stages a build ``--through target [--from start]`` runs, in order."""
    if target not in targets():
        raise ValueError(f"unknown stage {target!r}; choose one of {', '.join(targets())}")
    selection = through_selection(target)
    if start is not None:
        if start not in stage_order() or dg.AssetKey(start) not in selection.resolve(asset_graph()):
            raise ValueError(f"--from {start} is not a stage before --through {target}")
        selection = selection & dg.AssetSelection.assets(start).downstream()
    return toposorted(asset_graph(), selection.resolve(asset_graph()))


def index_stages() -> list[str]:
    """Every stage up to and including both indexes, in dependency order."""
    return stages_for("indexes")


def job_for(stages: list[str]) -> tuple[str, list[str] | None]:
    """The narrowest build job covering ``stages`` and the asset subset to run (None: all of it)."""
    for target in targets():
        selected = stages_for(target)
        if set(stages) <= set(selected):
            return build_job_name(target), (None if set(stages) == set(selected) else list(stages))
    raise ValueError(f"no build job covers {stages}")


def job_named(name: str) -> dg.JobDefinition:
    """Reconstructs a job of the code location in any process (``dg.build_reconstructable_job``)."""
    return defs.resolve_job_def(name)
