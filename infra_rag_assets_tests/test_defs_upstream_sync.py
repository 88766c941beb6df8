"""Freshness end to end on real git: sync job → sensor → reindex, only the edited pages re-embedded.

The upstream is a bare repository (file://) holding the fixture's real Kubernetes pages; a
commit edits two pages and deletes one. The sync job brings the mirror to it, the run status
sensor sees the change, and the reindex embeds exactly the new chunk texts (the embedding
cache, keyed by model hash and exact text, serves every unchanged chunk).
"""

from __future__ import annotations

import dagster as dg
import pytest
from conftest import FIXTURE_PAGES, require_corpus
from upstream_repo import Upstream, sources_yaml

from infra_rag_assets.control.builds import materialize_version
from infra_rag_assets.control.stages import index_stages
from infra_rag_assets.definitions import REINDEX
from infra_rag_assets.defs.operate.upstream import reindex_after_sync, sync_upstream
from infra_rag_assets.defs.resources import BuildResource, DataHomeResource, EmbedderResource

pytestmark = pytest.mark.build

EDITED = {"tasks/_index.md": "tasks", "reference/glossary/pod.md": "reference_glossary_pod"}
DELETED = ("concepts/services-networking/endpoint-slices.md", "concepts_services-networking_endpoint-slices")


def _sync_then_sense(instance, store, settings):
    """Run the sync job, then evaluate the run status sensor on its success, as the daemon would."""
    result = sync_upstream.execute_in_process(instance=instance, resources={"settings": settings})
    assert result.success
    run = instance.get_run_by_id(result.run_id)
    success = next(
        e.dagster_event
        for e in instance.all_logs(run.run_id)
        if e.dagster_event and e.dagster_event.event_type == dg.DagsterEventType.RUN_SUCCESS
    )
    context = dg.build_run_status_sensor_context(
        sensor_name="reindex_after_sync",
        dagster_event=success,
        dagster_instance=instance,
        dagster_run=run,
        resources={"store": store, "settings": settings},
    )
    outcome = reindex_after_sync(REINDEX)(context)
    if isinstance(outcome, dg.SensorResult):
        for request in outcome.dynamic_partitions_requests or []:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return outcome


def _build(instance, store, settings, version) -> dg.ExecuteInProcessResult:
    result = materialize_version(version, index_stages(), instance, store, settings, EmbedderResource(batch_size=16))
    assert result.success
    return result


def test_sync_sensor_reindex_embeds_only_the_edited_pages(tmp_path):
    corpus = require_corpus()
    pages = {rel: (corpus / "kubernetes" / rel).read_bytes() for rel in FIXTURE_PAGES["kubernetes"]}
    upstream = Upstream(tmp_path / "up", pages)
    path = sources_yaml(
        tmp_path / "sources.yaml",
        tmp_path / "mirror" / "kubernetes",
        {"git": upstream.url, "branch": "main", "subpath": "docs"},
        name="kubernetes",
    )
    store, settings = DataHomeResource(home=str(tmp_path / "home")), BuildResource(sources_file=str(path))
    warehouse = store.data_home().warehouse()
    with dg.DagsterInstance.ephemeral() as instance:
        first = _sync_then_sense(instance, store, settings)
        assert isinstance(first, dg.SensorResult) and first.run_requests[0].tags["infra_rag/origin"] == "sync"
        v1 = first.run_requests[0].partition_key
        _build(instance, store, settings, v1)

        second_commit = upstream.commit(
            "edit two pages, delete one",
            {
                **{
                    rel: pages[rel] + b"\n\n## Upstream edit\n\nA sentence added upstream to " + rel.encode() + b".\n"
                    for rel in EDITED
                },
                DELETED[0]: None,
            },
        )
        second = _sync_then_sense(instance, store, settings)
        assert isinstance(second, dg.SensorResult), second
        request = second.run_requests[0]
        assert request.tags["infra_rag/changed"] == "kubernetes"
        v2 = request.partition_key
        result = _build(instance, store, settings, v2)

        embedded = result.asset_materializations_for_node("vectors")[0].metadata["texts_embedded"].value
        new_chunks = warehouse.rows(
            "SELECT DISTINCT doc_id, embed_hash FROM chunks WHERE index_version = ? AND embed_hash NOT IN "
            "(SELECT embed_hash FROM chunks WHERE index_version = ?)",
            [v2, v1],
        )
        assert embedded == len({h for _, h in new_chunks}) > 0  # exactly the new texts, nothing else
        assert {d for d, _ in new_chunks} == {f"kubernetes:{page_id}" for page_id in EDITED.values()}

        deleted = f"kubernetes:{DELETED[1]}"
        count = "SELECT count(*) FROM {} WHERE index_version = ? AND doc_id = ?"
        assert warehouse.rows(count.format("chunks"), [v1, deleted])[0][0] > 0
        assert warehouse.rows(count.format("chunks"), [v2, deleted])[0][0] == 0
        assert warehouse.rows(count.format("source_pages"), [v2, deleted])[0][0] == 0

        upstreams = warehouse.rows("SELECT DISTINCT upstream FROM source_pages WHERE index_version = ?", [v2])
        assert upstreams == [(f"{upstream.url}@{second_commit}",)]  # lineage names the new upstream commit
        meta = result.asset_materializations_for_node("source_pages")[0].metadata
        assert meta["upstream_commits"].value == {"kubernetes": f"{upstream.url}@{second_commit}"}

        unchanged = _sync_then_sense(instance, store, settings)
        assert isinstance(unchanged, dg.SkipReason) and f"unchanged since {v2}" in unchanged.skip_message
