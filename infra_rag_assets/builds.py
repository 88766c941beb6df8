"""Create index versions and materialize the graph for one, in-process.

Shared by the CLI, the freshness sensor and the tests, so a version made anywhere is
registered the same way: a dynamic partition in the Dagster instance plus its recorded
build configuration in the warehouse.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
from pathlib import Path
import dagster as dg

from .defs.partitions import index_version
from .defs.resources import PROJECT_ROOT, BuildSettings, EmbedderResource, RagStore
from .rag.config import new_version_name, sources_fingerprint
from .rag.processes import pid_alive

INDEX_STAGES = ["source_pages", "documents", "chunks", "vectors", "lexical_index"]
STAGES = [*INDEX_STAGES, "eval_run", "release"]
# What `--through X` runs: X and everything upstream of it ("indexes" = both indexes).
THROUGH = {
    "source_pages": STAGES[:1], "documents": STAGES[:2], "chunks": STAGES[:3],
    "vectors": STAGES[:4], "lexical_index": [*STAGES[:3], "lexical_index"], "indexes": INDEX_STAGES,
    "eval_run": STAGES[:6], "release": STAGES,
}


def ensure_dagster_home(store: RagStore) -> Path:
    """Default DAGSTER_HOME to <data home>/dagster with the project's dagster.yaml in it."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        home = str(store.root / "dagster")
        os.environ["DAGSTER_HOME"] = home
    Path(home).mkdir(parents=True, exist_ok=True)
    template, target = PROJECT_ROOT / "dagster.yaml", Path(home) / "dagster.yaml"
    # Two commands started at once on a new DAGSTER_HOME would both copy the yaml and both
    # create the SQLite schema ("table ... already exists"); the first does it under a lock,
    # the second then finds both in place.
    with open(Path(home) / ".infra_rag_init.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if template.is_file() and not target.exists():
            shutil.copyfile(template, target)
        with dg.DagsterInstance.get():
            pass
    return Path(home)


def register_version(instance: dg.DagsterInstance, store: RagStore, settings: BuildSettings,
                     created_by: str) -> str:
    """Snapshot the current configuration, name a new version, record it, add the partition."""
    config = settings.build_config()
    version = claim_version(store.warehouse(), instance.get_dynamic_partitions(index_version.name),
                            config, created_by)
    instance.add_dynamic_partitions(index_version.name, [version])
    return version


def claim_version(warehouse, partitions, config, created_by: str) -> str:
    """Name a new version and record its configuration; the CLI and the sensor both use it.

    Names are unique per data home, not per Dagster instance: another DAGSTER_HOME, or a build
    started in the same minute, must not reuse (and overwrite) an existing version.
    """
    existing = set(partitions) | {v for (v,) in warehouse.rows("SELECT index_version FROM index_versions")}
    while True:
        version = new_version_name(config.config_hash(), existing)
        if warehouse.record_version(version, config.to_dict(), config.config_hash(),
                                    sources_fingerprint(config.sources), created_by):
            return version
        existing.add(version)  # taken by a concurrent build between our read and our insert


def stages_through(through: str, start: str | None = None) -> list[str]:
    """The stages to run, in order, for ``--through`` and optionally ``--from``."""
    if through not in THROUGH:
        raise ValueError(f"unknown stage {through!r}; choose one of {', '.join(THROUGH)}")
    stages = THROUGH[through]
    if start is None:
        return stages
    if start not in stages:
        raise ValueError(f"--from {start} is not a stage before --through {through}")
    return stages[stages.index(start):]


def materialize_version(version: str, stages: list[str], instance: dg.DagsterInstance,
                        store: RagStore, settings: BuildSettings, embedding: EmbedderResource | None = None,
                        tags: dict[str, str] | None = None, quiet: bool = True,
                        run_config: dict | None = None) -> dg.ExecuteInProcessResult:
    """Run the selected stages (and their checks) for ``version`` as one in-process run."""
    from .definitions import defs

    assets = _assets_and_checks(defs)
    release_dead_builds(instance)
    tags = {**(tags or {}), HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}
    run_config = dict(run_config or {})
    if quiet:
        run_config["loggers"] = {"console": {"config": {"log_level": "WARNING"}}}
    return dg.materialize(
        assets, instance=instance, partition_key=version, selection=stages,
        resources={"store": store, "settings": settings, "embedding": embedding or EmbedderResource()}, tags=tags,
        raise_on_error=False, run_config=run_config,
    )


HOST_TAG, PID_TAG = "infra_rag/host", "infra_rag/pid"  # which process runs an in-process build


def release_dead_builds(instance: dg.DagsterInstance) -> list[str]:
    """Fail this host's in-process build runs whose process is gone, and free their pool slots.

    A build killed with SIGKILL (``kill -9``, the OOM killer) never ends its run: the run stays
    STARTED and keeps its slot in the ``lancedb_writer``/``tantivy_writer`` pool, so every later
    build would wait for that pool forever. The daemon's run monitoring frees such slots, but
    in-process builds have no daemon. Runs are matched by host and pid tags, so a run of another
    host sharing the instance is never touched; a reused pid only delays the cleanup.
    """
    host = socket.gethostname()
    active = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
    released = []
    for run in instance.get_runs(dg.RunsFilter(statuses=active, tags={HOST_TAG: host})):
        pid = int(run.tags.get(PID_TAG) or 0)
        if not pid or pid == os.getpid() or pid_alive(pid):
            continue
        instance.report_run_failed(run, message=f"build process {pid} on {host} died; pool slots freed")
        if instance.event_log_storage.supports_global_concurrency_limits:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        released.append(run.run_id)
    return released


def _assets_and_checks(defs: dg.Definitions) -> list:
    return [*defs.assets, *(defs.asset_checks or [])]


COPYABLE_FROM = ("documents", "chunks")  # stages whose upstream lives wholly in the warehouse


def latest_version_with(store: RagStore, table: str, exclude: str = "") -> str | None:
    """The newest version (by creation time) that has rows in ``table``."""
    found = store.warehouse().rows(
        f"SELECT v.index_version FROM index_versions v WHERE v.index_version <> ? AND EXISTS "
        f"(SELECT 1 FROM {table} t WHERE t.index_version = v.index_version) ORDER BY v.created_at DESC LIMIT 1",
        [exclude])
    return found[0][0] if found else None


def reuse_upstream(instance: dg.DagsterInstance, store: RagStore, version: str, start: str) -> str:
    """Copy the stages before ``start`` from the newest earlier version whose sources match.

    The copy is recorded as a runless materialization of each copied asset in the new
    partition (metadata names the version it came from), so lineage in the UI stays whole.
    """
    copied = STAGES[:STAGES.index(start)]
    if not copied:
        return ""
    if start not in COPYABLE_FROM:
        raise ValueError(f"a new version can start --from {', '.join(COPYABLE_FROM)}; "
                         f"to rerun {start} of an existing version add --version")
    warehouse = store.warehouse()
    previous = latest_version_with(store, "documents", exclude=version)
    if previous is None:
        raise ValueError("--from needs an earlier version with documents; run a full build first")
    fingerprints = dict(warehouse.rows(
        "SELECT index_version, sources_fingerprint FROM index_versions WHERE index_version IN (?, ?)",
        [version, previous]))
    if fingerprints.get(version) != fingerprints.get(previous):
        raise ValueError(f"sources changed since {previous}; run a full build (without --from)")
    for asset in copied:
        rows = warehouse.copy_partition(asset, previous, version)
        instance.report_runless_asset_event(dg.AssetMaterialization(
            asset_key=asset, partition=version,
            metadata={"copied_from": previous, "dagster/row_count": rows}))
    return previous
