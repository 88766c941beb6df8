"""Dagster objects only: thin wrappers over the framework-free library in ``rag/``."""

import warnings

import dagster as dg

# Partitioned asset checks (a check per index version) are a Dagster preview feature that we
# use on purpose; the warning would otherwise print on every load of the code location.
warnings.filterwarnings("ignore", category=dg.PreviewWarning)
