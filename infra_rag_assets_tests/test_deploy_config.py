"""Both instance configs pass Dagster's own instance-config validation (no database needed).

``dagster_instance_config`` is what ``DagsterInstance.from_config`` runs before it builds any
storage: it reads the YAML and validates it against the instance schema (including the
``storage: postgres`` shape and the ``concurrency`` rules), without importing
dagster-postgres or connecting. The run coordinator's own config is validated against
``QueuedRunCoordinator.config_type()`` the same way the instance does when it builds it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from dagster._core.errors import DagsterInvalidConfigError
from dagster._core.instance.config import dagster_instance_config, validate_config
from dagster._core.run_coordinator import QueuedRunCoordinator

from infra_rag_assets.defs.indexes import lexical_index, vectors

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = ROOT / "deploy" / "dagster.production.yaml"


def _load(path: Path) -> dict:
    config, custom_class = dagster_instance_config(str(path.parent), path.name)
    assert custom_class is None
    return dict(config)


def test_embedded_config_is_valid_with_single_writer_pools():
    config = _load(ROOT / "dagster.yaml")
    assert "sqlite" in config.get("storage", {"sqlite": "default"})  # no block: SQLite under $DAGSTER_HOME
    assert config["concurrency"]["pools"]["default_limit"] == 1
    assert config["run_retries"]["enabled"] and config["run_retries"]["max_retries"] >= 1
    assert config["telemetry"]["enabled"] is False


def test_production_config_is_valid_postgres_with_queue_pools_and_retries():
    config = _load(PRODUCTION)
    pg = config["storage"]["postgres"]["postgres_db"]
    for key in ("hostname", "db_name", "username", "password", "port"):
        assert set(pg[key]) == {"env"}, f"{key} must come from the environment"
    coordinator = config["run_coordinator"]
    assert coordinator["class"] == "QueuedRunCoordinator"
    assert validate_config(QueuedRunCoordinator.config_type(), coordinator.get("config", {})).success
    pools = config["concurrency"]["pools"]
    assert pools["default_limit"] == 1 and pools.get("granularity", "op") == "op"
    assert {"key": "infra_rag/origin", "value": "sensor", "limit": 1} in config["concurrency"]["runs"][
        "tag_concurrency_limits"]
    retries = config["run_retries"]
    assert retries["enabled"] and retries["max_retries"] >= 1 and retries["retry_on_asset_or_op_failure"] is False
    assert config["run_monitoring"]["enabled"] and config["run_monitoring"]["free_slots_after_run_end_seconds"] > 0
    assert config["telemetry"]["enabled"] is False


def test_writer_assets_use_the_pools_the_configs_limit():
    """default_limit applies to every pool without its own limit: these two are the writers."""
    assert vectors.op.pool == "lancedb_writer"
    assert lexical_index.op.pool == "tantivy_writer"


def test_validation_is_real_conflicting_limits_are_rejected(tmp_path):
    """The same run limits in the coordinator and under `concurrency` are refused by Dagster."""
    data = yaml.safe_load(PRODUCTION.read_text())
    data["run_coordinator"]["config"]["max_concurrent_runs"] = 2
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(DagsterInvalidConfigError, match="max_concurrent_runs"):
        dagster_instance_config(str(tmp_path))
    data = yaml.safe_load(PRODUCTION.read_text())
    data["storage"]["postgres"]["postgres_db"]["hostnme"] = "typo"
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(DagsterInvalidConfigError):
        dagster_instance_config(str(tmp_path))


def test_embedded_config_is_what_the_cli_installs(tmp_path, monkeypatch):
    """ensure_dagster_home copies the project's dagster.yaml; that copy loads as an instance."""
    import dagster as dg

    from infra_rag_assets.builds import ensure_dagster_home
    from infra_rag_assets.defs.resources import RagStore

    monkeypatch.setenv("DAGSTER_HOME", "")  # records the original value: restored after the test
    monkeypatch.delenv("DAGSTER_HOME")  # ensure_dagster_home sets it in os.environ
    home = ensure_dagster_home(RagStore(home=str(tmp_path / "home")))
    assert (home / "dagster.yaml").read_text() == (ROOT / "dagster.yaml").read_text()
    with dg.DagsterInstance.get() as instance:
        assert instance.event_log_storage.get_pool_config().default_pool_limit == 1
        assert "Sqlite" in type(instance.run_storage).__name__
    shutil.rmtree(home, ignore_errors=True)
