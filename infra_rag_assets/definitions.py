"""The code location: every asset, check, sensor and resource of infra_rag_assets."""

import dagster as dg

from .defs import (automation, chunks, documents, evaluation, indexes, models, operations, release, sources,
                   traces)
from .defs.resources import BuildSettings, EmbedderResource, RagStore

defs = dg.Definitions(
    assets=[sources.source_pages, documents.documents, chunks.chunks, indexes.vectors, indexes.lexical_index,
            evaluation.eval_run, release.release, models.domain_model, traces.served_traces],
    asset_checks=[
        documents.documents_spans_are_exact, documents.documents_failure_rate,
        chunks.chunks_are_exact_slices, chunks.chunks_within_size,
        indexes.vectors_match_chunks_and_model, indexes.lexical_matches_chunks,
        evaluation.critical_gates, evaluation.warning_gates, operations.release_canary,
    ],
    jobs=[automation.reindex_job, operations.canary_job],
    schedules=[operations.canary_hourly],
    sensors=[automation.sources_changed],
    resources={"store": RagStore(), "settings": BuildSettings(), "embedding": EmbedderResource()},
)
