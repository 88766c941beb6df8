"""What every model trained here shares (ground level: the support judge and the answer reader
both use it): length-bucketed training batches and an int8 copy for CPU scoring."""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable, Sequence
from typing import Any

TrainProgress = Callable[[int, int, float], None]  # (step, total_steps, running mean loss)


def length_batches(lengths: Sequence[int], batch_size: int, seed: int) -> list[list[int]]:
    """Shuffled batches of similar length (little padding): shuffle, sort within windows of
    eight batches, cut, shuffle the batches."""
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    span = batch_size * 8
    batches: list[list[int]] = []
    for start in range(0, len(order), span):
        window = sorted(order[start : start + span], key=lambda i: lengths[i])
        batches.extend(window[i : i + batch_size] for i in range(0, len(window), batch_size))
    rng.shuffle(batches)
    return batches


def quantized(model: Any) -> Any | None:
    """An int8 dynamically quantized copy for scoring (~1.5x faster on CPU), or None where this
    torch no longer has ``quantize_dynamic`` (deprecated upstream; torch is pinned here)."""
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=False)
    except (AttributeError, RuntimeError, NotImplementedError):
        return None
