"""documents: parse each snapshotted page into one normalized record with exact spans."""

import json

import dagster as dg
import polars as pl

from ...rag.index.config import stable_hash
from ...rag.ingest.models import PageSpan, ParsedDocument, Section, check_spans
from ...rag.ingest.pipeline import parse_documents, parser_tag
from ..partitions import index_version
from ..reporting import counts_pivot, log_progress, md_table
from ..resources import DataHomeResource

FAILURE_RATE_WARN = 0.10  # share of a project's pages that may fail to parse before we warn


@dg.asset(
    partitions_def=index_version,
    deps=["source_pages"],
    group_name="ingestion",
    kinds={"duckdb", "python"},
    owners=["team:search-platform"],
    description="One normalized record per page: cleaned text, title, section tree with exact spans, "
    "PDF page spans, page kind, parse status/reason, provenance. Duplicates are kept, marked.",
)
def documents(context: dg.AssetExecutionContext, store: DataHomeResource) -> dg.MaterializeResult:
    version = context.partition_key
    warehouse = store.data_home().warehouse()
    pages = warehouse.source_pages_of(version)
    if pages.is_empty():
        raise dg.Failure(f"no source_pages rows for {version}: materialize source_pages first")
    reusable = _reusable_parses(warehouse, version, pages)
    frame, reused = parse_documents(
        pages, store.data_home().blobs(), reusable, progress=log_progress(context, "parsed", 250)
    )
    rows = warehouse.replace_partition("documents", version, frame)
    frame = frame.with_columns(pl.col("status").str.replace(r"^duplicate_of:.*", "duplicate"))
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": rows,
            "documents_by_project_and_status": md_table(counts_pivot(frame, "project", "status")),
            "documents_by_page_kind": md_table(counts_pivot(frame, "page_kind", "project")),
            "reused_parses": reused,
            "not_ok": md_table(frame.filter(pl.col("status") != "ok").select("doc_id", "status", "reason"), 15),
            "slowest_pages": md_table(frame.sort("parse_ms", descending=True).select("doc_id", "parse_ms"), 5),
            "largest_pages": md_table(frame.sort("char_count", descending=True).select("doc_id", "char_count"), 5),
            "preview": md_table(frame.select("doc_id", "title", "page_kind", "status", "section_count"), 10),
        },
        data_version=dg.DataVersion(
            stable_hash(frame.select("doc_id", "content_hash", "status").sort("doc_id").rows(), 16)
        ),
    )


def _reusable_parses(warehouse, version: str, pages: pl.DataFrame) -> dict[tuple[str, str], dict]:
    """Earlier versions' parses of identical bytes with the same parser: reused, not redone."""
    hashes = [h for h in pages["bytes_hash"].unique().to_list() if h]
    if not hashes:
        return {}
    prior = warehouse.parses_of_bytes(hashes, exclude_version=version)
    kinds = dict(zip(pages["bytes_hash"], pages["kind"]))
    found = {}
    for row in prior.to_dicts():
        kind = kinds.get(row["source_hash"])
        if kind and parser_tag(kind) == f"{row['parser']}@{row['parser_version']}+pipeline{row['pipeline_version']}":
            found[(row["source_hash"], parser_tag(kind))] = row
    return found


def document_from_row(row: dict) -> ParsedDocument:
    """Rebuild the record (with typed spans) from a warehouse row."""
    return ParsedDocument(
        text=row["text"],
        title=row["title"],
        status=row["status"],
        reason=row["reason"],
        description=row["description"],
        page_kind=row["page_kind"],
        sections=[Section(**{**s, "path": tuple(s["path"])}) for s in json.loads(row["sections_json"])],
        page_spans=[PageSpan(**p) for p in json.loads(row["page_spans_json"])],
        parser=row["parser"],
        parser_version=row["parser_version"],
    )


@dg.asset_check(
    asset=documents,
    blocking=True,
    partitions_def=index_version,
    description="Every section and page span lies inside its document and every heading span "
    "slices its heading text (ERROR, blocking).",
)
def documents_spans_are_exact(context: dg.AssetCheckExecutionContext, store: DataHomeResource) -> dg.AssetCheckResult:
    version = context.partition_key
    rows = (
        store.data_home()
        .warehouse()
        .documents_of(
            version,
            (
                "doc_id",
                "text",
                "title",
                "status",
                "reason",
                "description",
                "page_kind",
                "sections_json",
                "page_spans_json",
                "parser",
                "parser_version",
            ),
        )
    )
    bad = []
    for row in rows.to_dicts():
        problems = check_spans(document_from_row(row))
        if problems:
            bad.append({"doc_id": row["doc_id"], "problem": problems[0], "count": len(problems)})
    return dg.AssetCheckResult(
        passed=not bad,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "documents_checked": len(rows),
            "documents_with_bad_spans": len(bad),
            "examples": md_table(pl.DataFrame(bad) if bad else pl.DataFrame(), 10),
        },
    )


@dg.asset_check(
    asset=documents,
    partitions_def=index_version,
    description="Share of pages per project that failed to parse "
    f"(error/too_large) stays under {FAILURE_RATE_WARN:.0%} (WARN).",
)
def documents_failure_rate(context: dg.AssetCheckExecutionContext, store: DataHomeResource) -> dg.AssetCheckResult:
    version = context.partition_key
    rates = (
        store.data_home()
        .warehouse()
        .parse_failures_by_project(version)
        .with_columns((pl.col("failed") / pl.col("pages")).round(4).alias("failure_rate"))
    )
    worst = float(rates["failure_rate"].max() or 0.0) if not rates.is_empty() else 0.0
    over = rates.filter(pl.col("failure_rate") > FAILURE_RATE_WARN)
    summary = ", ".join(f"{r['project']} {r['failed']}/{r['pages']} ({r['failure_rate']:.0%})" for r in over.to_dicts())
    return dg.AssetCheckResult(
        passed=worst <= FAILURE_RATE_WARN,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "worst_failure_rate": worst,
            "by_project": md_table(rates),
            "summary": f"pages failing to parse over {FAILURE_RATE_WARN:.0%}: {summary}" if summary else "ok",
        },
    )
