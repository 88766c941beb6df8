"""Build jobs, derived from the asset graph (the one place the stage order comes from).

The build chain is everything upstream of ``release``; its order is the graph's topological
order. Each stage a build can stop at (``--through X``) is a job in the Definitions,
``build_<X>``, selecting X and everything upstream of it, so every build (CLI in-process,
CLI ``--submit`` through the run queue, UI launch, sensor) is a run of a named job that the
UI can re-launch. ``reindex`` is the whole chain (what the freshness sensor requests).
``--from Y`` narrows a run to the part of that selection downstream of Y.
"""

from __future__ import annotations

import graphlib

import dagster as dg

CHAIN_END = "release"
# A stage name the CLI accepts that is not one asset: both indexes.
GROUPED_TARGETS = {"indexes": ("vectors", "lexical_index")}


def through_selection(target: str) -> dg.AssetSelection:
    """``target`` (an asset of the chain or "indexes") and everything upstream of it."""
    keys = GROUPED_TARGETS.get(target, (target,))
    return dg.AssetSelection.assets(*keys).upstream()


def build_job_name(target: str) -> str:
    return "reindex" if target == CHAIN_END else f"build_{target}"


def _parents(graph) -> dict[dg.AssetKey, set[dg.AssetKey]]:
    """Asset key -> upstream keys, of a resolved asset graph or of a list of asset definitions."""
    if isinstance(graph, list):
        return {spec.key: {dep.asset_key for dep in spec.deps} for a in graph for spec in a.specs}
    return {key: set(graph.get(key).parent_keys) for key in graph.get_all_asset_keys()}


def _toposorted(graph, keys) -> list[str]:
    """Dependency order; ties broken by name so the order is stable."""
    parents = _parents(graph)
    sorter = graphlib.TopologicalSorter({k: parents[k] & set(keys) for k in keys})
    sorter.prepare()
    order = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=lambda k: k.to_user_string())
        order += [k.to_user_string() for k in ready]
        sorter.done(*ready)
    return order


def _upstream_closure(graph, key: str) -> set[dg.AssetKey]:
    if not isinstance(graph, list):
        return through_selection(key).resolve(graph)
    parents, found, todo = _parents(graph), set(), [dg.AssetKey(key)]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo += parents.get(current, ())
    return found


def chain_targets(graph) -> list[str]:
    """What ``--through`` accepts, in build order: each chain stage, "indexes" after both indexes."""
    order = _toposorted(graph, _upstream_closure(graph, CHAIN_END))
    last_index = max(order.index(k) for keys in GROUPED_TARGETS.values() for k in keys)
    return [*order[:last_index + 1], *GROUPED_TARGETS, *order[last_index + 1:]]


def build_jobs(assets: list) -> list[dg.UnresolvedAssetJobDefinition]:
    """One job per ``--through`` target, derived from the assets' dependency graph."""
    return [dg.define_asset_job(
        name=build_job_name(target), selection=through_selection(target),
        # In-process executor: steps run one after another in the run's process (models load
        # once on a 2-core host); the writer pools still serialize vectors/lexical_index across runs.
        executor_def=dg.in_process_executor, tags={"infra_rag/through": target},
        description="Build, evaluate and (if the gates pass) release one index version end to end."
        if target == CHAIN_END else f"Materialize one index version through {target} (and everything upstream).",
    ) for target in chain_targets(assets)]
