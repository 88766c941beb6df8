"""The code location: every asset, check, sensor and resource of infra_rag_assets."""

import dagster as dg

from .defs import documents, sources
from .defs.resources import BuildSettings, RagStore

defs = dg.Definitions(
    assets=[sources.source_pages, documents.documents],
    asset_checks=[documents.documents_spans_are_exact, documents.documents_failure_rate],
    resources={"store": RagStore(), "settings": BuildSettings()},
)
