"""eval_run: every regime scored on the benchmarks, per-question rows, scorecard, gates as blocking checks."""
