"""The index_version partitions: one immutable build per key, e.g. ``2026-11-29T1830-3f9a2c``."""

import dagster as dg

index_version = dg.DynamicPartitionsDefinition(name="index_version")
