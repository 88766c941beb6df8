"""chunks: section-aware, token-sized exact slices of every ok document."""

import dagster as dg
import numpy as np
import polars as pl

from ...rag.index.config import BuildSettings
from ...rag.index.corpus_chunks import chunk_document_batches, chunks_version_of
from ..partitions import index_version
from ..reporting import log_progress, md_table
from ..resources import DataHomeResource

TOKEN_BINS = [32, 64, 128, 192, 256]
DOCUMENT_BATCH_ROWS = 256  # documents chunked and written per batch (their text and chunks in memory)


@dg.asset(
    partitions_def=index_version,
    deps=["documents"],
    group_name="indexing",
    kinds={"duckdb", "python"},
    owners=["team:search-platform"],
    description="Section-aware chunks sized in the embedding model's tokens. Each is an exact slice "
    "document.text[start:end]; a context line (project › title › section) is kept beside it for "
    "embedding and indexing only.",
)
def chunks(context: dg.AssetExecutionContext, store: DataHomeResource) -> dg.MaterializeResult:
    from ...rag.index.embedding import resolve_model_path
    from ...rag.index.tokens import HFTokenCounter

    version = context.partition_key
    warehouse = store.data_home().warehouse()
    config = BuildSettings.from_dict(warehouse.version_config(version) or {})
    total = warehouse.row_count("documents", version)
    if not total:
        raise dg.Failure(f"no documents for {version}: materialize documents first")
    counter = HFTokenCounter.from_model_path(resolve_model_path(config.model_id))
    truncated: list[str] = []
    batches = chunk_document_batches(  # a batch of documents at a time: memory is one batch, not the version
        (batch.iter_rows(named=True) for batch in warehouse.document_batches(version, rows=DOCUMENT_BATCH_ROWS)),
        counter,
        config.chunking,
        total,
        progress=log_progress(context, "chunked documents", 250),
        truncated=truncated,
    )
    rows = warehouse.replace_partition_batches("chunks", version, batches)
    if truncated:
        context.log.warning(
            f"{len(truncated)} documents stopped at {config.chunking.max_chunks} chunks: " + ", ".join(truncated[:5])
        )
    summary = warehouse.chunk_summary(version)  # no text: a few numbers per chunk
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": rows,
            "chunks_by_project": md_table(
                summary.group_by("project")
                .agg(
                    pl.len().alias("chunks"),
                    pl.col("token_count").mean().round(1).alias("mean_tokens"),
                    pl.col("token_count").max().alias("max_tokens"),
                )
                .sort("project")
            ),
            "token_histogram": md_table(token_histogram(summary)),
            "max_chunk_chars": int(summary["chars"].max() or 0),
            "truncated_documents": md_table(pl.DataFrame({"doc_id": truncated}, schema={"doc_id": pl.String}), 20),
            "chunk_settings": dg.MetadataValue.json(config.to_dict()["chunking"]),
            "preview": md_table(warehouse.chunk_preview(version), 10),
            "documents_per_batch": DOCUMENT_BATCH_ROWS,
        },
        data_version=dg.DataVersion(
            chunks_version_of(warehouse.chunk_batches(version, ("chunk_id", "embed_hash"), rows=65_536))
        ),
    )


def token_histogram(frame: pl.DataFrame) -> pl.DataFrame:
    """Chunk counts per token-size bin (columns) and project (rows)."""
    labels = [f"≤{b}" for b in TOKEN_BINS] + [f">{TOKEN_BINS[-1]}"]
    index = np.digitize(frame["token_count"].to_numpy(), TOKEN_BINS, right=True)
    binned = frame.with_columns(pl.Series("bin", [labels[i] for i in index], dtype=pl.String))
    table = binned.group_by("project", "bin").len().pivot(on="bin", index="project", values="len").fill_null(0)
    return table.select("project", *[lab for lab in labels if lab in table.columns]).sort("project")


@dg.asset_check(
    asset=chunks,
    blocking=True,
    partitions_def=index_version,
    description="Every chunk is the exact slice document.text[start:end] (ERROR, blocking).",
)
def chunks_are_exact_slices(context: dg.AssetCheckExecutionContext, store: DataHomeResource) -> dg.AssetCheckResult:
    bad = store.data_home().warehouse().chunks_not_slices(context.partition_key)
    total = store.data_home().warehouse().chunk_count(context.partition_key)
    return dg.AssetCheckResult(
        passed=bad.is_empty() and total > 0,
        metadata={"chunks_checked": total, "violations": len(bad), "examples": md_table(bad, 10)},
    )


@dg.asset_check(
    asset=chunks,
    blocking=True,
    partitions_def=index_version,
    description="No empty chunk and none over the version's max_tokens or max_chars (ERROR, blocking).",
)
def chunks_within_size(context: dg.AssetCheckExecutionContext, store: DataHomeResource) -> dg.AssetCheckResult:
    warehouse = store.data_home().warehouse()
    config = BuildSettings.from_dict(warehouse.version_config(context.partition_key) or {})
    bad = warehouse.chunks_out_of_bounds(context.partition_key, config.chunking.max_tokens, config.chunking.max_chars)
    return dg.AssetCheckResult(
        passed=bad.is_empty(),
        metadata={
            "max_tokens": config.chunking.max_tokens,
            "max_chars": config.chunking.max_chars,
            "violations": len(bad),
            "examples": md_table(bad, 10),
        },
    )
