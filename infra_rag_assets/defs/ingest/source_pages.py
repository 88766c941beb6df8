"""source_pages: snapshot every page of every configured source into the blob store."""

import dagster as dg
import polars as pl

from ...rag.index.config import stable_hash
from ...rag.ingest.pipeline import list_pages, snapshot_pages
from ..partitions import index_version
from ..reporting import counts_pivot, log_progress, md_table
from ..resources import BuildResource, DataHomeResource, version_config


@dg.asset(
    partitions_def=index_version,
    group_name="ingestion",
    kinds={"duckdb", "python"},
    owners=["team:search-platform"],
    description="One row per source file: URL, upstream (the synced commit), license, bytes hash, size, fetch status. "
    "Bytes are snapshotted into a content-addressed blob store so the version stays reproducible.",
)
def source_pages(
    context: dg.AssetExecutionContext, store: DataHomeResource, settings: BuildResource
) -> dg.MaterializeResult:
    version = context.partition_key
    config = version_config(store, settings, version, created_by=f"run:{context.run.run_id}")
    sources = [s for s in settings.sources() if s.name in {snap["name"] for snap in config.sources}]
    pages = list_pages(sources)
    context.log.info(f"snapshotting {len(pages)} pages from {len(sources)} sources for {version}")
    frame = snapshot_pages(pages, store.data_home().blobs(), progress=log_progress(context, "read", 250))
    rows = store.data_home().warehouse().replace_partition("source_pages", version, frame)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": rows,
            "pages_by_project_and_status": md_table(counts_pivot(frame, "project", "fetch_status")),
            "total_bytes": int(frame["size_bytes"].sum()),
            "largest_pages": md_table(
                frame.sort("size_bytes", descending=True).select("doc_id", "size_bytes", "url"), 5
            ),
            "slowest_reads": md_table(frame.sort("read_ms", descending=True).select("doc_id", "read_ms"), 5),
            "preview": md_table(frame.select("doc_id", "project", "url", "bytes_hash", "fetch_status"), 10),
            "upstream_commits": dg.MetadataValue.json({s.name: s.upstream_ref() for s in sources}),
            "synced": md_table(synced_table(sources)),
            "config_hash": config.config_hash(),
            "blob_store": dg.MetadataValue.path(str(store.data_home().blobs().root)),
        },
        data_version=dg.DataVersion(pages_version(frame)),
    )


def synced_table(sources) -> pl.DataFrame:
    """Per source: the upstream commit its mirror holds and when it was synced ('' if never)."""
    rows = [
        {"source": s.name, "upstream": s.upstream_ref(), "synced_at": s.synced.get("synced_at", "")} for s in sources
    ]
    return pl.DataFrame(rows, schema={"source": pl.String, "upstream": pl.String, "synced_at": pl.String})


def pages_version(frame: pl.DataFrame) -> str:
    """Roll page bytes hashes up into one data version: it moves exactly when a page does."""
    pairs = frame.select("doc_id", "bytes_hash").sort("doc_id").rows()
    return stable_hash(pairs, 16)
