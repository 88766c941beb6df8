"""Small helpers more than one stage needs (ground level: imports nothing from rag/).

``jsonl_objects`` reads benchmarks, safety cases, answer labels and judge batches alike;
``percentile`` serves eval latency tables and the abstention calibration.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence


def jsonl_objects(
    lines: Iterable[str], name: object, error: type[ValueError] = ValueError
) -> Iterator[tuple[str, dict]]:
    """(``name:line``, object) for each non-blank line; a line that is not a JSON object raises
    ``error`` with one line naming it (benchmarks, safety cases, labels, judge batches)."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise error(f"{where}: expected a JSON object")
        yield where, row


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default method); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
