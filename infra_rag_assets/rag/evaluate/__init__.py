"""Evaluate: benchmark loading, retrieval metrics, benchmark runs and scorecards, release gates
and the canary suite."""
