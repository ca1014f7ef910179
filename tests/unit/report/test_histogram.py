"""Latency histograms from decode --summary's Latencies: every exchange counted once."""

from kinspect.decode.summary import Latencies
from kinspect.report.histogram import bins
from kinspect.report.timeline import _to_histogram


def _latencies(values):
    latencies = Latencies()
    for v in values:
        latencies.add(v)
    return latencies


def test_bins_count_every_latency_five_bins_a_decade():
    values = [0.0, 0.5, 1.0, 1.2, 3.0, 9.9, 10.0, 250.0, 1200.0]
    shown = bins(_latencies(values))
    assert sum(b["count"] for b in shown) == len(values)
    assert all(b["to_ms"] > b["from_ms"] for b in shown)
    assert all(a["to_ms"] == b["from_ms"] for a, b in zip(shown, shown[1:]))
    ten = next(b for b in shown if b["from_ms"] == 10.0)
    assert ten["to_ms"] == 15.85 and ten["count"] == 1


def test_bins_from_the_histogram_form_match_the_exact_form_in_count():
    values = [0.3 * i for i in range(1, 2000)]
    exact = bins(_latencies(values))
    coarse = _latencies(values)
    _to_histogram(coarse)
    from_histogram = bins(coarse)
    assert sum(b["count"] for b in from_histogram) == len(values)
    assert [b["from_ms"] for b in from_histogram] == [b["from_ms"] for b in exact]


def test_no_latency_no_bins():
    assert bins(Latencies()) == []
