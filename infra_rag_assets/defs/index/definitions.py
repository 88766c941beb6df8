"""The index domain: chunks, domain_model, vectors and lexical_index, with their checks."""

import dagster as dg

from .chunks import chunks, chunks_are_exact_slices, chunks_within_size
from .domain_model import domain_model
from .indexes import lexical_index, lexical_matches_chunks, vectors, vectors_match_chunks_and_model

defs = dg.Definitions(
    assets=[chunks, domain_model, vectors, lexical_index],
    asset_checks=[chunks_are_exact_slices, chunks_within_size, vectors_match_chunks_and_model, lexical_matches_chunks],
)
