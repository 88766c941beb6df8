"""Both instance configs, loaded with Dagster's public ``DagsterInstance.from_config``.

The embedded config loads as a real (SQLite) instance here. The production config needs a
PostgreSQL server to load: its structure is checked here, and test_postgres_profile.py loads
and runs it against a real server. Invalid variants are refused by Dagster's own validation
(before any storage is built, so no database is needed for that).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest
import yaml

from infra_rag_assets.defs.index.indexes import lexical_index, vectors
from infra_rag_assets.package_data import dagster_yaml_template

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = ROOT / "deploy" / "dagster.production.yaml"


def _instance(tmp_path: Path, config: dict) -> dg.DagsterInstance:
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    return dg.DagsterInstance.from_config(str(tmp_path))


def test_embedded_config_is_valid_with_single_writer_pools(tmp_path):
    with _instance(tmp_path, yaml.safe_load(dagster_yaml_template().read_text())) as instance:
        assert "Sqlite" in type(instance.run_storage).__name__  # no storage block: SQLite under the home
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
        assert instance.run_retries_enabled and instance.run_retries_max_retries >= 1
        assert not instance.run_retries_retry_on_asset_or_op_failure


def test_production_config_is_postgres_with_queue_pools_and_retries():
    config = yaml.safe_load(PRODUCTION.read_text())
    pg = config["storage"]["postgres"]["postgres_db"]
    for key in ("hostname", "db_name", "username", "password", "port"):
        assert set(pg[key]) == {"env"}, f"{key} must come from the environment"
    assert pg["scheme"] == "postgresql+psycopg2"  # the driver dagster-postgres ships, named
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    pools = config["concurrency"]["pools"]
    assert pools["default_limit"] == 1 and pools.get("granularity", "op") == "op"
    assert {"key": "infra_rag/origin", "value": "sensor", "limit": 1} in config["concurrency"]["runs"][
        "tag_concurrency_limits"
    ]
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
    del data["storage"]  # SQLite: validation, not a database, is under test
    data["run_coordinator"]["config"]["max_concurrent_runs"] = 2
    with pytest.raises(dg.DagsterInvalidConfigError, match="max_concurrent_runs"):
        _instance(tmp_path, data)
    data = yaml.safe_load(PRODUCTION.read_text())
    data["storage"]["postgres"]["postgres_db"]["hostnme"] = "typo"
    with pytest.raises(dg.DagsterInvalidConfigError):
        _instance(tmp_path, data)


def test_embedded_config_is_what_the_cli_installs(tmp_path, monkeypatch):
    """ensure_dagster_home copies the packaged dagster.yaml; that copy loads as an instance."""

    import os

    from infra_rag_assets.control.builds import ensure_dagster_home, open_instance
    from infra_rag_assets.defs.resources import DataHomeResource

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    store = DataHomeResource(home=str(tmp_path / "home"))
    home = ensure_dagster_home(store)
    assert home == (tmp_path / "home" / "dagster").resolve()
    assert "DAGSTER_HOME" not in os.environ  # the CLI writes nothing to its environment
    assert (home / "dagster.yaml").read_text() == dagster_yaml_template().read_text()
    with open_instance(store) as instance:
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
        assert "Sqlite" in type(instance.run_storage).__name__
    shutil.rmtree(home, ignore_errors=True)
