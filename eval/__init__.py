"""Benchmark and tuning scripts; run from the repository root as `python -m eval.<script>`."""
