"""The benchmarks' one percentile.

Nearest rank, as Kafka's own performance tools report it (and ``whatif``'s grid): the
p-th percentile of n values is the ceil(p/100 * n)-th smallest, so p99 of 100 values is
the 99th, p50 of 4 the 2nd, p100 the largest. None for no values: a row prints "-".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence


def percentile(values: Iterable[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile (``p`` in 0..100) of ``values`` (any order)."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def median(values: Sequence[float]) -> float | None:
    """``statistics.median`` (the mean of the middle two of an even count), None for no
    values: where a bench reports a median of runs rather than a percentile of samples."""
    return statistics.median(values) if values else None
