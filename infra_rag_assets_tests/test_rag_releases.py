"""Release history: promotion, rollback as a new event, nothing deleted."""

import pytest

from infra_rag_assets.rag.operate import releases
from infra_rag_assets.rag.operate.warehouse import Warehouse

pytestmark = pytest.mark.unit


@pytest.fixture
def warehouse(tmp_path):
    return Warehouse(tmp_path / "w.duckdb")


def test_release_and_rollback_history(warehouse):
    assert releases.current_release(warehouse) is None
    with pytest.raises(ValueError, match="no release yet"):
        releases.rollback(warehouse)
    releases.record(warehouse, "v1", "release", run_id="r1", metrics={"mrr": 0.8})
    with pytest.raises(ValueError, match="only release"):
        releases.rollback(warehouse)
    releases.record(warehouse, "v2", "release", run_id="r2")
    releases.record(warehouse, "v3", "release", run_id="r3")
    assert releases.current_release(warehouse) == "v3"

    event = releases.rollback(warehouse, reason="bad answers")
    assert (event.index_version, event.previous_version, event.action) == ("v2", "v3", "rollback")
    assert releases.current_release(warehouse) == "v2"
    assert releases.rollback(warehouse).index_version == "v1"  # repeated rollbacks walk back
    assert releases.current_release(warehouse) == "v1"

    events = releases.history(warehouse)
    assert [e.action for e in events] == ["release"] * 3 + ["rollback"] * 2  # nothing deleted
    assert events[0].metrics == {"mrr": 0.8} and events[0].run_id == "r1"
    releases.record(warehouse, "v4", "release")
    assert releases.rollback(warehouse).index_version == "v1"
