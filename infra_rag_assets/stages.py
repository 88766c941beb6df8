"""Build stages as the assembled code location sees them: stage order, ``--through/--from``
selections and jobs by name, all resolved from the Definitions' asset graph.

Apart from defs/jobs.py (which builds the jobs the Definitions hold) so that neither imports
the other: this module needs the assembled Definitions, defs/jobs.py is part of them.
"""

from __future__ import annotations

import functools

import dagster as dg

from .definitions import defs
from .defs.jobs import CHAIN_END, _toposorted, chain_targets, through_selection


@functools.cache
def _graph():
    return defs.resolve_asset_graph()


def stage_order() -> list[str]:
    """Every stage of the build chain in dependency order (source_pages first, release last)."""
    return _toposorted(_graph(), through_selection(CHAIN_END).resolve(_graph()))


def stages_for(target: str, start: str | None = None) -> list[str]:
    """The stages a build ``--through target [--from start]`` runs, in order."""
    targets = chain_targets(_graph())
    if target not in targets:
        raise ValueError(f"unknown stage {target!r}; choose one of {', '.join(targets)}")
    selection = through_selection(target)
    if start is not None:
        if start not in stage_order() or dg.AssetKey(start) not in selection.resolve(_graph()):
            raise ValueError(f"--from {start} is not a stage before --through {target}")
        selection = selection & dg.AssetSelection.assets(start).downstream()
    return _toposorted(_graph(), selection.resolve(_graph()))


def job_named(name: str) -> dg.JobDefinition:
    """Reconstructs a job of the code location in any process (``dg.build_reconstructable_job``)."""
    return defs.resolve_job_def(name)
