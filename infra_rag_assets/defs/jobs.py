"""Build jobs: one per stage a build can stop at, derived from the asset graph (defs/stage_graph.py).

Each ``--through X`` target is a job in the Definitions, ``build_<X>``, selecting X and
everything upstream of it, so every build (CLI in-process, CLI ``--submit`` through the run
queue, UI launch, sensor) is a run of a named job that the UI can re-launch. ``reindex`` is the
whole chain (what the freshness sensor requests).
"""

from __future__ import annotations

import dagster as dg

from .executors import build_executor
from .stage_graph import CHAIN_END, build_job_name, chain_targets, through_selection


def build_jobs(assets: list) -> list[dg.UnresolvedAssetJobDefinition]:
    """One job per ``--through`` target, derived from the assets' dependency graph."""
    return [
        dg.define_asset_job(
            name=build_job_name(target),
            selection=through_selection(target),
            # In-process by default: steps run one after another in the run's process (models load
            # once on a 2-core host); INFRA_RAG_STEP_EXECUTOR picks Dagster's others (executors.py).
            # The writer pools serialize vectors/lexical_index across runs either way.
            executor_def=build_executor(),
            tags={"infra_rag/through": target},
            description="Build, evaluate and (if the gates pass) release one index version end to end."
            if target == CHAIN_END
            else f"Materialize one index version through {target} (and everything upstream).",
        )
        for target in chain_targets(assets)
    ]
