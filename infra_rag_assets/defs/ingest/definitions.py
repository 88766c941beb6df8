"""The ingest domain: source_pages and documents, with the documents checks."""

import dagster as dg

from .documents import documents, documents_failure_rate, documents_spans_are_exact
from .source_pages import source_pages

defs = dg.Definitions(
    assets=[source_pages, documents],
    asset_checks=[documents_spans_are_exact, documents_failure_rate],
)
