"""The code location: every asset, check, job, sensor and resource of infra_rag_assets.

``domain_model`` is a stage of the build chain (chunks → domain_model → vectors): it adapts the
embedding model per version, or reuses an adapted model by content address, or names the base
model in a quick build (``BuildResource.adapt``).

Resources are wired here and only here: CLI builds run these jobs (in-process or through the
run queue) and override resource fields with run config, never with other objects.
"""

import dagster as dg

from . import settings
from .defs import jobs
from .defs.evaluate import abstention_calibration, answer_reader, eval_run, page_ranker, support_judge
from .defs.index import chunks, indexes, models
from .defs.ingest import documents, source_pages
from .defs.operate import automation, operations, release, served_traces, upstream
from .defs.resources import BuildResource, DataHomeResource, EmbedderResource, from_env

ASSETS = [
    source_pages.source_pages,
    documents.documents,
    chunks.chunks,
    models.domain_model,
    indexes.vectors,
    indexes.lexical_index,
    abstention_calibration.abstention_calibration,
    page_ranker.page_ranker,
    support_judge.support_judge,
    answer_reader.answer_reader,
    eval_run.eval_run,
    release.release,
    release.serving_release,
    served_traces.served_traces,
]

BUILD_JOBS = jobs.build_jobs(ASSETS)
REINDEX = next(job for job in BUILD_JOBS if job.name == "reindex")

defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=[
        documents.documents_spans_are_exact,
        documents.documents_failure_rate,
        chunks.chunks_are_exact_slices,
        chunks.chunks_within_size,
        indexes.vectors_match_chunks_and_model,
        indexes.lexical_matches_chunks,
        eval_run.critical_gates,
        eval_run.warning_gates,
        operations.release_canary,
    ],
    jobs=[
        *BUILD_JOBS,
        release.release_version_job,
        release.rollback_job,
        operations.canary_job,
        upstream.sync_upstream,
    ],
    schedules=[operations.canary_hourly, upstream.sync_upstream_hourly],
    sensors=[automation.sources_changed, automation.serve_approved_builds, upstream.reindex_after_sync(REINDEX)],
    resources={
        "store": DataHomeResource(home=from_env("HOME", settings.home()), lancedb_uri=from_env("LANCEDB_URI", "")),
        "settings": BuildResource(sources_file=from_env("SOURCES", settings.sources_file())),
        "embedding": EmbedderResource(),
    },
)
