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
import shutil
from pathlib import Path

import dagster as dg

from .. import settings
from ..defs.operate.serving import SERVING_JOBS, ServingDecision, serving_decision, serving_run_config
from ..defs.partitions import index_version
from ..defs.resources import BuildResource, DataHomeResource, EmbedderResource
from ..defs.stage_graph import build_job_name
from ..package_data import dagster_yaml_template
from ..rag.index.config import claim_version
from .runs import RunOutcome, launch, release_dead_builds, run_job, wait_until_created
from .stages import job_for, stage_order, stages_for


def ensure_dagster_home(store: DataHomeResource) -> Path:
    """The Dagster instance's home (``DAGSTER_HOME``, else <data home>/dagster), set up with the
    packaged dagster.yaml. Nothing is written to this process's environment: callers open the
    instance with ``open_instance`` and pass the home to the processes they start."""
    home = Path(settings.dagster_home() or store.data_home().root / "dagster").resolve()
    home.mkdir(parents=True, exist_ok=True)
    template, target = dagster_yaml_template(), home / "dagster.yaml"
    # Two commands started at once on a new DAGSTER_HOME would both copy the yaml and both
    # create the SQLite schema ("table ... already exists"); the first does it under a lock,
    # the second then finds both in place.
    with open(home / ".infra_rag_init.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if template.is_file() and not target.exists():
            shutil.copyfile(template, target)
        with dg.DagsterInstance.from_config(str(home)):
            pass
    return home


def open_instance(store: DataHomeResource) -> dg.DagsterInstance:
    """The CLI's Dagster instance: the one ``ensure_dagster_home`` set up (use it as a context manager)."""
    return dg.DagsterInstance.from_config(str(ensure_dagster_home(store)))


def register_version(
    instance: dg.DagsterInstance, store: DataHomeResource, settings: BuildResource, created_by: str
) -> str:
    """Snapshot the current configuration, name a new version, record it, add the partition."""
    config = settings.build_config()
    version = claim_version(
        store.data_home().warehouse(), instance.get_dynamic_partitions(index_version.name), config, created_by
    )
    instance.add_dynamic_partitions(index_version.name, [version])
    return version


def resource_run_config(store: DataHomeResource, settings: BuildResource, embedding: EmbedderResource | None) -> dict:
    """The CLI's resources as run config of the Definitions' resources (wired once, in definitions.py)."""

    def fields(resource) -> dict:
        return {name: getattr(resource, name) for name in type(resource).model_fields}

    config = {"store": {"config": fields(store)}, "settings": {"config": fields(settings)}}
    if embedding is not None:
        config["embedding"] = {"config": fields(embedding)}
    return config


def materialize_version(
    version: str,
    stages: list[str],
    instance: dg.DagsterInstance,
    store: DataHomeResource,
    settings: BuildResource,
    embedding: EmbedderResource | None = None,
    tags: dict[str, str] | None = None,
    quiet: bool = True,
    run_config: dict | None = None,
    in_process: bool = False,
) -> RunOutcome:
    """Run the selected stages (and their checks) for ``version`` as one run of a build job.

    The run belongs to a job of the code location (``reindex``, ``build_<stage>``), so the UI
    lists it under that job; see ``runs.run_job`` for when it is launched through the workspace
    (re-executable from the UI) and when it runs in this process.
    """
    job_name, subset = job_for(stages)
    release_dead_builds(instance)
    tags = {**(tags or {}), "dagster/partition": version}
    run_config = dict(run_config or {})
    run_config["resources"] = {**resource_run_config(store, settings, embedding), **run_config.get("resources", {})}
    if quiet:
        run_config["loggers"] = {"console": {"config": {"log_level": "WARNING"}}}
    return run_job(instance, job_name, run_config, tags, asset_subset=subset, in_process=in_process)


def change_serving(
    instance: dg.DagsterInstance,
    store: DataHomeResource,
    action: str,
    version: str = "",
    reason: str = "",
    tags: dict[str, str] | None = None,
) -> RunOutcome:
    """Run the ``release_version`` (action "release") or ``rollback`` job.

    Either materializes ``serving_release``, which moves what serves only through
    ``rag.operate.releases.record`` / ``rag.operate.releases.rollback``.
    """
    run_config = {
        **serving_run_config(action, version, reason),
        "resources": {"store": resource_run_config(store, BuildResource(), None)["store"]},
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }
    return run_job(instance, SERVING_JOBS[action], run_config, tags or {})


def serve_if_approved(
    instance: dg.DagsterInstance, store: DataHomeResource, build: RunOutcome, tags: dict[str, str] | None = None
) -> RunOutcome | None:
    """After a build run the caller waited for: serve what it approved (``serving_decision``).

    None when there is nothing to serve (no approval in this run, or served already).
    """
    run = instance.get_run_by_id(build.run_id)
    if not build.success or run is None:
        return None
    decision: ServingDecision = serving_decision(instance, run)
    if decision.version is None:
        return None
    return change_serving(
        instance, store, "release", decision.version, reason=decision.reason, tags={**(tags or {}), **decision.tags()}
    )


def submit_build(
    instance: dg.DagsterInstance,
    version: str,
    through: str,
    store: DataHomeResource,
    settings: BuildResource,
    tags: dict[str, str],
) -> str:
    """Launch a run of ``build_<through>`` for ``version`` through the workspace and return at once.

    With a QueuedRunCoordinator the run waits in the queue for the daemon; with the embedded
    DefaultRunCoordinator it starts now in a detached launcher, outliving this process.
    """
    config = {"resources": resource_run_config(store, settings, None)}
    run_id, process = launch(
        instance, build_job_name(through), config, {**tags, "dagster/partition": version}, detach=True
    )
    wait_until_created(instance, run_id, process)
    return run_id


COPYABLE_FROM = ("documents", "chunks")  # stages whose upstream lives wholly in the warehouse


def reuse_upstream(instance: dg.DagsterInstance, store: DataHomeResource, version: str, start: str) -> str:
    """Copy the stages before ``start`` from the newest earlier version whose sources match.

    The copy is recorded as a runless materialization of each copied asset in the new
    partition (metadata names the version it came from), so lineage in the UI stays whole.
    """
    copied = [s for s in stage_order() if s not in stages_for("release", start)]
    if not copied:
        return ""
    if start not in COPYABLE_FROM:
        raise ValueError(
            f"a new version can start --from {', '.join(COPYABLE_FROM)}; "
            f"to rerun {start} of an existing version add --version"
        )
    warehouse = store.data_home().warehouse()
    previous = store.data_home().warehouse().newest_version_with("documents", exclude=version)
    if previous is None:
        raise ValueError("--from needs an earlier version with documents; run a full build first")
    fingerprints = {v: (warehouse.version_info(v) or {}).get("sources_fingerprint") for v in (version, previous)}
    if fingerprints[version] != fingerprints[previous]:
        raise ValueError(f"sources changed since {previous}; run a full build (without --from)")
    for asset in copied:
        rows = warehouse.copy_partition(asset, previous, version)
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                asset_key=asset, partition=version, metadata={"copied_from": previous, "dagster/row_count": rows}
            )
        )
    return previous
