"""Ingest assets: source_pages (walk the mirrors, store blobs) and documents (parse, normalize),
with their checks."""
