"""decode --summary's numbers stay exact for ordinary captures and bounded for any."""

from __future__ import annotations

import random

from kinspect.decode import summary
from kinspect.decode.summary import Latencies, Summary, percentile


def test_latencies_are_exact_while_few_then_within_a_tenth_of_a_percent(monkeypatch):
    monkeypatch.setattr(summary, "EXACT_LATENCIES", 1000)
    rng = random.Random(10)
    values = [round(rng.expovariate(1 / 5), 3) for _ in range(20_000)]
    few, many = Latencies(), Latencies()
    for value in values[:1000]:
        few.add(value)
    for value in values:
        many.add(value)
    assert few.exact and few.percentile(99) == percentile(sorted(values[:1000]), 99)
    assert not many.exact and len(many.buckets) < 20_000
    for q in (50, 99):
        exact = percentile(sorted(values), q)
        assert abs(many.percentile(q) - exact) <= exact * 0.001 + 0.001
    assert many.largest == max(values) and many.count == 20_000


def test_error_rows_past_the_bound_count_as_others(monkeypatch):
    monkeypatch.setattr(summary, "ERROR_KEYS", 3)
    totals = Summary()
    for n in range(10):
        totals.add({"type": "exchange", "api_name": "Produce", "api_version": 9, "latency_ms": 1.0,
                    "error_codes": ["NOT_LEADER_OR_FOLLOWER"], "_topics": [f"t{n}"]})
    rows = totals.error_rows()
    assert len(rows) == 4 and rows[0] == {"type": "summary_error", "api_name": "Produce",
                                          "error": "NOT_LEADER_OR_FOLLOWER", "topic": "(others)",
                                          "count": 7}
