"""The price of a Claude call, in one place: the answerer's scorecard (cost per answer) and the
Claude judge (cost per judged answer) both read it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# USD per million tokens by model-id prefix (input, output), the Anthropic list price on
# 2026-12-03; a model not listed has no cost rather than a guessed one.
PRICES_PER_MTOK = {"claude-sonnet-4": (3.0, 15.0), "claude-opus-4": (15.0, 75.0), "claude-haiku-4": (1.0, 5.0)}


def cost_usd(model: str, usage: Mapping[str, Any]) -> float | None:
    """List-price cost of one Claude call from its usage, or None for an unpriced model."""
    price = next((p for prefix, p in PRICES_PER_MTOK.items() if model.startswith(prefix)), None)
    if price is None or not usage:
        return None
    tokens_in = sum(float(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens"))
    tokens_in += 0.1 * float(usage.get("cache_read_input_tokens") or 0)  # cache reads bill at a tenth
    return (tokens_in * price[0] + int(usage.get("output_tokens") or 0) * price[1]) / 1e6
