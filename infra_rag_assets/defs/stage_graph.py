"""The stage graph, derived from the assets' dependencies (the one place stage order comes from).

The build chain is everything upstream of ``release``; its order is the graph's topological
order, ties broken by name. Each stage a build can stop at (``--through X``) selects X and
everything upstream of it; "indexes" stands for both indexes. These functions take either a
list of asset definitions (while the Definitions are being assembled, defs/jobs.py) or a
resolved asset graph (control/stages.py), so nothing here needs the assembled Definitions.
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
    """The job that builds through ``target``: ``reindex`` for the whole chain, else ``build_<target>``."""
    return "reindex" if target == CHAIN_END else f"build_{target}"


def parents_of(graph) -> dict[dg.AssetKey, set[dg.AssetKey]]:
    """Asset key -> upstream keys, of a resolved asset graph or of a list of asset definitions."""
    if isinstance(graph, list):
        return {spec.key: {dep.asset_key for dep in spec.deps} for a in graph for spec in a.specs}
    return {key: set(graph.get(key).parent_keys) for key in graph.get_all_asset_keys()}


def toposorted(graph, keys) -> list[str]:
    """``keys`` in dependency order; ties broken by name so the order is stable."""
    parents = parents_of(graph)
    sorter = graphlib.TopologicalSorter({k: parents[k] & set(keys) for k in keys})
    sorter.prepare()
    order = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=lambda k: k.to_user_string())
        order += [k.to_user_string() for k in ready]
        sorter.done(*ready)
    return order


def upstream_closure(graph, key: str) -> set[dg.AssetKey]:
    """``key`` and every asset upstream of it."""
    if not isinstance(graph, list):
        return through_selection(key).resolve(graph)
    parents, found, todo = parents_of(graph), set(), [dg.AssetKey(key)]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo += parents.get(current, ())
    return found


def chain_targets(graph) -> list[str]:
    """What ``--through`` accepts, in build order: each chain stage, "indexes" after both indexes."""
    order = toposorted(graph, upstream_closure(graph, CHAIN_END))
    last_index = max(order.index(k) for keys in GROUPED_TARGETS.values() for k in keys)
    return [*order[: last_index + 1], *GROUPED_TARGETS, *order[last_index + 1 :]]
