"""Operate: the data home, the DuckDB warehouse, releases, query traces, lineage and process
helpers."""
