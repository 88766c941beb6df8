"""Search-time knobs fitted per version: abstention_calibration (the dense floor) and page_ranker
(the learned page order)."""
