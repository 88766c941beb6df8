"""The evaluation group: abstention_calibration and page_ranker (search-time knobs fitted per version
on labelled data) and eval_run (every regime scored on the benchmarks, gates as blocking checks)."""
