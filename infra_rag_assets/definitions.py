"""The code location: every asset, check, job, sensor and resource of infra_rag_assets.

``domain_model`` is a stage of the build chain (chunks → domain_model → vectors): it adapts the
embedding model per version, or reuses an adapted model by content address, or names the base
model in a quick build (``BuildSettings.adapt``).

Resources are wired here and only here: CLI builds run these jobs (in-process or through the
run queue) and override resource fields with run config, never with other objects.
"""

import dagster as dg

from .defs import jobs
from .defs.evaluate import evaluation
from .defs.index import chunks, indexes, models
from .defs.ingest import documents, sources
from .defs.operate import automation, operations, release, traces
from .defs.resources import BuildSettings, EmbedderResource, RagStore
from .defs.search.calibration import abstention_calibration
from .defs.search.page_ranker import page_ranker

ASSETS = [sources.source_pages, documents.documents, chunks.chunks, models.domain_model, indexes.vectors,
          indexes.lexical_index, abstention_calibration, page_ranker, evaluation.eval_run, release.release,
          release.serving_release, traces.served_traces]

defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=[
        documents.documents_spans_are_exact, documents.documents_failure_rate,
        chunks.chunks_are_exact_slices, chunks.chunks_within_size,
        indexes.vectors_match_chunks_and_model, indexes.lexical_matches_chunks,
        evaluation.critical_gates, evaluation.warning_gates, operations.release_canary,
    ],
    jobs=[*jobs.build_jobs(ASSETS), release.release_version_job, release.rollback_job, operations.canary_job],
    schedules=[operations.canary_hourly],
    sensors=[automation.sources_changed, automation.serve_approved_builds],
    resources={"store": RagStore(), "settings": BuildSettings(), "embedding": EmbedderResource()},
)
