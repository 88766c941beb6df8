"""Create index versions and materialize the graph for one, in-process.

Shared by the CLI, the freshness sensor and the tests, so a version made anywhere is
registered the same way: a dynamic partition in the Dagster instance plus its recorded
build configuration in the warehouse.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
import dagster as dg

from .defs.partitions import index_version
from .defs.resources import PROJECT_ROOT, BuildSettings, RagStore
from .rag.config import new_version_name, sources_fingerprint

STAGES = ["source_pages", "documents"]


def ensure_dagster_home(store: RagStore) -> Path:
    """Default DAGSTER_HOME to <data home>/dagster with the project's dagster.yaml in it."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        home = str(store.root / "dagster")
        os.environ["DAGSTER_HOME"] = home
    Path(home).mkdir(parents=True, exist_ok=True)
    template, target = PROJECT_ROOT / "dagster.yaml", Path(home) / "dagster.yaml"
    if template.is_file() and not target.exists():
        shutil.copyfile(template, target)
    return Path(home)


def register_version(instance: dg.DagsterInstance, store: RagStore, settings: BuildSettings,
                     created_by: str) -> str:
    """Snapshot the current configuration, name a new version, record it, add the partition."""
    config = settings.build_config()
    existing = set(instance.get_dynamic_partitions(index_version.name))
    version = new_version_name(config.config_hash(), existing)
    store.warehouse().record_version(version, config.to_dict(), config.config_hash(),
                                     sources_fingerprint(config.sources), created_by)
    instance.add_dynamic_partitions(index_version.name, [version])
    return version


def stages_through(through: str, start: str | None = None) -> list[str]:
    if through not in STAGES:
        raise ValueError(f"unknown stage {through!r}; choose one of {', '.join(STAGES)}")
    first = STAGES.index(start) if start else 0
    if first > STAGES.index(through):
        raise ValueError(f"--from {start} comes after --through {through}")
    return STAGES[first: STAGES.index(through) + 1]


def materialize_version(version: str, stages: list[str], instance: dg.DagsterInstance,
                        store: RagStore, settings: BuildSettings,
                        tags: dict[str, str] | None = None, quiet: bool = True) -> dg.ExecuteInProcessResult:
    """Run the selected stages (and their checks) for ``version`` as one in-process run."""
    from .definitions import defs

    assets = _assets_and_checks(defs)
    run_config = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}} if quiet else None
    return dg.materialize(
        assets, instance=instance, partition_key=version, selection=stages,
        resources={"store": store, "settings": settings}, tags=tags or {},
        raise_on_error=False, run_config=run_config,
    )


def _assets_and_checks(defs: dg.Definitions) -> list:
    return [*defs.assets, *(defs.asset_checks or [])]

