"""The freshness sensor: a new version exactly when a mirror file changes, only it re-embedded."""

from __future__ import annotations

import dagster as dg
import pytest

from infra_rag_assets.control.builds import materialize_version
from infra_rag_assets.control.stages import index_stages
from infra_rag_assets.defs.operate.automation import sources_changed
from infra_rag_assets.defs.resources import EmbedderResource

pytestmark = pytest.mark.build


def _tick(instance, store, settings):
    context = dg.build_sensor_context(instance=instance, resources={"store": store, "settings": settings})
    result = sources_changed(context)
    if isinstance(result, dg.SensorResult):
        for request in result.dynamic_partitions_requests or []:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result


def _build(instance, store, settings, version):
    result = materialize_version(version, index_stages(), instance, store, settings, EmbedderResource(batch_size=16))
    assert result.success
    meta = result.asset_materializations_for_node("vectors")[0].metadata
    return meta["texts_embedded"].value


def test_sensor_builds_only_on_change(pipeline_env, fixture_corpus):
    instance, store, settings = pipeline_env
    first = _tick(instance, store, settings)
    assert isinstance(first, dg.SensorResult) and len(first.run_requests) == 1
    version = first.run_requests[0].partition_key
    assert instance.has_dynamic_partition("index_version", version)
    assert _build(instance, store, settings, version) > 0

    unchanged = _tick(instance, store, settings)
    assert isinstance(unchanged, dg.SkipReason) and "unchanged since " + version in unchanged.skip_message
    assert len(instance.get_dynamic_partitions("index_version")) == 1

    page = fixture_corpus / "prometheus" / "site" / "guides" / "basic-auth.md"
    page.write_text(page.read_text() + "\n\n## Rotating the password\n\nRegenerate the bcrypt hash and reload.\n")
    changed = _tick(instance, store, settings)
    assert isinstance(changed, dg.SensorResult) and len(changed.run_requests) == 1
    request = changed.run_requests[0]
    assert request.tags["infra_rag/changed"] == "prometheus-site"
    assert len(instance.get_dynamic_partitions("index_version")) == 2
    embedded = _build(instance, store, settings, request.partition_key)
    page_chunks = (
        store.data_home()
        .warehouse()
        .rows(
            "SELECT count(*) FROM chunks WHERE index_version = ? AND doc_id = 'prometheus-site:guides_basic-auth'",
            [request.partition_key],
        )[0][0]
    )
    assert 1 <= embedded <= page_chunks  # only the edited page's chunks were embedded again
