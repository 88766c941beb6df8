"""Create index versions and run the Definitions' jobs for them.

Shared by the CLI, the freshness sensor and the tests, so a version made anywhere is
registered the same way: a dynamic partition in the Dagster instance plus its recorded
build configuration in the warehouse. Every build is a run of a build job of the code
location (defs/jobs.py), launched through the workspace or in-process (runs.py); release and
rollback are runs of the serving jobs. Resources are the Definitions' own, configured per run
with run config.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import dagster as dg

from .defs.operate.automation import CALLER_SERVES_TAG
from .defs.partitions import index_version
from .defs.resources import PROJECT_ROOT, BuildSettings, EmbedderResource, RagStore
from .rag.index.config import claim_version
from .runs import RunOutcome, launch, release_dead_builds, run_job, wait_until_created


def __getattr__(name: str):
    """``INDEX_STAGES``: every index stage in dependency order, derived from the asset graph."""
    if name == "INDEX_STAGES":
        return stages_through("indexes")
    raise AttributeError(name)


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


def stages_through(through: str, start: str | None = None) -> list[str]:
    """The stages to run, in dependency order, for ``--through`` and optionally ``--from``."""
    from .stages import stages_for

    return stages_for(through, start)


def job_for(stages: list[str]) -> tuple[str, list[str] | None]:
    """The narrowest build job covering ``stages`` and the asset subset to run (None: all of it)."""
    from .defs.jobs import build_job_name, chain_targets
    from .stages import _graph, stages_for

    for target in chain_targets(_graph()):
        selected = stages_for(target)
        if set(stages) <= set(selected):
            return build_job_name(target), (None if set(stages) == set(selected) else list(stages))
    raise ValueError(f"no build job covers {stages}")


def resource_run_config(store: RagStore, settings: BuildSettings, embedding: EmbedderResource | None) -> dict:
    """The CLI's resources as run config of the Definitions' resources (wired once, in definitions.py)."""
    def fields(resource) -> dict:
        return {name: getattr(resource, name) for name in type(resource).model_fields}

    config = {"store": {"config": fields(store)}, "settings": {"config": fields(settings)}}
    if embedding is not None:
        config["embedding"] = {"config": fields(embedding)}
    return config


def materialize_version(version: str, stages: list[str], instance: dg.DagsterInstance,
                        store: RagStore, settings: BuildSettings, embedding: EmbedderResource | None = None,
                        tags: dict[str, str] | None = None, quiet: bool = True,
                        run_config: dict | None = None, in_process: bool = False) -> RunOutcome:
    """Run the selected stages (and their checks) for ``version`` as one run of a build job.

    The run belongs to a job of the code location (``reindex``, ``build_<stage>``), so the UI
    lists it under that job; see ``runs.run_job`` for when it is launched through the workspace
    (re-executable from the UI) and when it runs in this process.
    """
    job_name, subset = job_for(stages)
    release_dead_builds(instance)
    tags = {**(tags or {}), "dagster/partition": version, CALLER_SERVES_TAG: "1"}
    run_config = dict(run_config or {})
    run_config["resources"] = {**resource_run_config(store, settings, embedding), **run_config.get("resources", {})}
    if quiet:
        run_config["loggers"] = {"console": {"config": {"log_level": "WARNING"}}}
    return run_job(instance, job_name, run_config, tags, asset_subset=subset, in_process=in_process)


def change_serving(instance: dg.DagsterInstance, store: RagStore, action: str, version: str = "",
                   reason: str = "", tags: dict[str, str] | None = None) -> RunOutcome:
    """Run the ``release_version`` (action "release") or ``rollback`` job.

    Either materializes ``serving_release``, which moves what serves only through
    ``rag.operate.releases.record`` / ``rag.operate.releases.rollback``.
    """
    job_name = {"release": "release_version", "rollback": "rollback"}[action]
    config = {"action": action, "reason": reason, **({"version": version} if action == "release" else {})}
    run_config = {"ops": {"serving_release": {"config": config}},
                  "resources": {"store": resource_run_config(store, BuildSettings(), None)["store"]},
                  "loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    return run_job(instance, job_name, run_config, {**(tags or {}), CALLER_SERVES_TAG: "1"})


def submit_build(version: str, through: str, store: RagStore, settings: BuildSettings,
                 tags: dict[str, str]) -> str:
    """Launch a run of ``build_<through>`` for ``version`` through the workspace and return at once.

    With a QueuedRunCoordinator the run waits in the queue for the daemon; with the embedded
    DefaultRunCoordinator it starts now in a detached launcher, outliving this process.
    """
    from .defs.jobs import build_job_name

    config = {"resources": resource_run_config(store, settings, None)}
    run_id, process = launch(build_job_name(through), config, {**tags, "dagster/partition": version}, detach=True)
    with dg.DagsterInstance.get() as instance:
        wait_until_created(instance, run_id, process)
    return run_id


COPYABLE_FROM = ("documents", "chunks")  # stages whose upstream lives wholly in the warehouse


def reuse_upstream(instance: dg.DagsterInstance, store: RagStore, version: str, start: str) -> str:
    """Copy the stages before ``start`` from the newest earlier version whose sources match.

    The copy is recorded as a runless materialization of each copied asset in the new
    partition (metadata names the version it came from), so lineage in the UI stays whole.
    """
    from .stages import stage_order

    copied = [s for s in stage_order() if s not in stages_through("release", start)]
    if not copied:
        return ""
    if start not in COPYABLE_FROM:
        raise ValueError(f"a new version can start --from {', '.join(COPYABLE_FROM)}; "
                         f"to rerun {start} of an existing version add --version")
    warehouse = store.warehouse()
    previous = store.warehouse().newest_version_with("documents", exclude=version)
    if previous is None:
        raise ValueError("--from needs an earlier version with documents; run a full build first")
    fingerprints = {v: (warehouse.version_info(v) or {}).get("sources_fingerprint") for v in (version, previous)}
    if fingerprints[version] != fingerprints[previous]:
        raise ValueError(f"sources changed since {previous}; run a full build (without --from)")
    for asset in copied:
        rows = warehouse.copy_partition(asset, previous, version)
        instance.report_runless_asset_event(dg.AssetMaterialization(
            asset_key=asset, partition=version,
            metadata={"copied_from": previous, "dagster/row_count": rows}))
    return previous
