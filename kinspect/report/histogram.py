"""A latency histogram from decode --summary's ``Latencies``: counts in bins five to a decade
(1, 1.58, 2.51, 3.98, 6.31, 10 ms, ...), from its exact values or its 0.1%-wide buckets."""

from __future__ import annotations

import math
from collections import Counter

from kinspect.decode.summary import Latencies

PER_DECADE = 5
_STEP = math.log(1.001)


def bins(latencies: Latencies) -> list[dict]:
    """[{"from_ms", "to_ms", "count"}], in order; latencies of 0 ms fall in the lowest bin shown."""
    counts: Counter = Counter()
    if latencies.values is not None:
        for ms in latencies.values:
            counts[_bin(ms)] += 1
    else:
        for bucket, n in latencies.buckets.items():
            counts[_bin(0.0 if bucket < 0 else (math.exp(bucket * _STEP) - 1) / 1000)] += n
    if not counts:
        return []
    low = min(k for k in counts if k is not None) if any(k is not None for k in counts) else 0
    if None in counts:
        counts[low] += counts.pop(None)
    return [{"from_ms": _edge(k), "to_ms": _edge(k + 1), "count": counts.get(k, 0)}
            for k in range(low, max(counts) + 1)]


def _bin(ms: float) -> int | None:
    return None if ms <= 0 else math.floor(math.log10(ms) * PER_DECADE + 1e-9)


def _edge(k: int) -> float:
    return float(f"{10 ** (k / PER_DECADE):.4g}")
