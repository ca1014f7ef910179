"""Exchanges in time buckets: nothing lost when buckets merge, at most MAX_BUCKETS of them."""

from kinspect.decode.summary import percentile
from kinspect.report.timeline import MAX_SERIES, OTHERS, Timeline


def _exchange(t, api="Produce", latency=1.0, size=100, conn="10.0.0.1:5000-10.0.0.2:9092", errors=()):
    return {"type": "exchange", "request_time": t, "api_name": api, "latency_ms": latency,
            "request_size": size, "response_size": 0, "conn": conn, "error_codes": list(errors)}


def test_rates_times_width_give_back_every_request_and_byte():
    timeline = Timeline(max_buckets=10)
    for i in range(1000):
        timeline.add(_exchange(1000.0 + i * 0.37, api="Fetch" if i % 3 else "Produce", size=i))
    assert len(timeline.times()) <= 10
    assert timeline.width == 64.0  # 370 s over at most 10 buckets: 1 s doubled six times
    requests = timeline.rates("requests", "api")
    assert sum(sum(v) for v in requests.values()) * timeline.width == 1000
    assert sum(sum(v) for v in timeline.rates("bytes", "api").values()) * timeline.width == sum(range(1000))
    assert round(sum(requests["Produce"]) * timeline.width) == 334


def test_an_earlier_exchange_moves_the_origin_back():
    timeline = Timeline(max_buckets=8)
    timeline.add(_exchange(100.5))
    timeline.add(_exchange(95.2))
    times = timeline.times()
    assert times[0] <= 95.2 < times[0] + timeline.width
    assert times[-1] <= 100.5 < times[-1] + timeline.width
    assert sum(timeline.rates("requests", "api")["Produce"]) * timeline.width == 2


def test_latency_percentiles_per_bucket_are_the_summarys():
    timeline = Timeline()
    values = [float(v) for v in (5, 1, 9, 3, 7, 2, 8)]
    for v in values:
        timeline.add(_exchange(10.1, latency=v))
    timeline.add(_exchange(12.5, latency=None))  # unanswered: counted, no latency
    p99 = timeline.latency(99)["Produce"]
    assert p99[0] == percentile(sorted(values), 99) and p99[2] is None
    assert timeline.latency(50)["Produce"][0] == percentile(sorted(values), 50)


def test_past_max_series_the_least_busy_are_others():
    timeline = Timeline()
    for n in range(MAX_SERIES + 4):
        for _ in range(n + 1):
            timeline.add(_exchange(1.0, conn=f"10.0.0.1:5000-10.0.0.{n}:9092"))
    by_broker = timeline.rates("broker_requests", "broker")
    assert len(by_broker) == MAX_SERIES and OTHERS in by_broker
    assert sum(v[0] for v in by_broker.values()) == sum(range(1, MAX_SERIES + 5))


def test_errors_are_counted_per_code():
    timeline = Timeline()
    timeline.add(_exchange(1.0, errors=["NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_OR_FOLLOWER"]))
    timeline.add(_exchange(1.5, errors=["REQUEST_TIMED_OUT"]))
    assert timeline.rates("errors", "error") == {"NOT_LEADER_OR_FOLLOWER": [2.0], "REQUEST_TIMED_OUT": [1.0]}


def test_records_without_time_or_not_exchanges_are_left_out():
    timeline = Timeline()
    timeline.add({"type": "notice", "kind": "gap"})
    timeline.add(_exchange(None))
    assert timeline.times() == []


def test_the_time_axis_names_the_day_or_gives_dates():
    from kinspect.report.gather import Gathered
    from kinspect.report.model import _time

    one_day = Gathered()
    one_day.timeline.add(_exchange(1_764_288_000.0 + 3600))   # 2025-11-28T01:00Z
    one_day.timeline.add(_exchange(1_764_288_000.0 + 7200))
    axis = _time(one_day)
    assert axis["title"] == "time (UTC, 2025-11-28)" and axis["format"] == "%H:%M:%S"
    assert axis["domain"][0] <= (1_764_288_000.0 + 3600) * 1000 and axis["domain"][1] > (1_764_288_000.0 + 7200) * 1000
    two_days = Gathered()
    two_days.timeline.add(_exchange(1_764_288_000.0 - 60))
    two_days.timeline.add(_exchange(1_764_288_000.0 + 60))
    assert _time(two_days)["title"] == "time (UTC)" and _time(two_days)["format"] == "%Y-%m-%d %H:%M"
