from kinspect.doctor.finding import WARNING
from kinspect.doctor.slow import Slow
from tests.unit.doctor.handmade import exchange, fetch, join


def _run(records):
    check = Slow()
    for record in records:
        check.exchange(record)
    return list(check.finish(0))


def test_long_polls_waiting_what_they_asked_are_not_slow():
    assert _run([fetch("t", 0, 1, float(i), max_wait_ms=500, latency_ms=501.0) for i in range(5)]) == []


def test_join_group_waits_for_the_group_by_design():
    record = join("g", "a", 1, 1.0)
    record["latency_ms"] = 30_000.0
    assert _run([record]) == []


def test_outliers_by_broker_and_api_worst_first():
    records = [exchange(3, {}, {"throttle_time_ms": 0}, at=float(i), latency_ms=2.0, correlation_id=i) for i in range(50)]
    records += [exchange(3, {}, {"throttle_time_ms": 0}, at=60.0, latency_ms=2500.0, correlation_id=60),
                exchange(3, {}, {"throttle_time_ms": 0}, at=61.0, latency_ms=4000.0, correlation_id=61),
                fetch("t", 0, 1, 62.0, max_wait_ms=500, latency_ms=1600.0)]
    found = {f["api_name"]: f for f in _run(records)}
    metadata = found["Metadata"]
    assert metadata["severity"] == WARNING and metadata["slow"] == 2 and metadata["count"] == 52
    assert [e["correlation_id"] for e in metadata["evidence"]] == [61, 60]
    assert found["Fetch"]["slowest"][0]["excess_ms"] == 1100.0


def test_requests_queued_behind_a_throttled_connection_are_not_slow():
    """KIP-219: the broker mutes a throttled connection; pipelined requests wait out the throttle
    (found on the lab scenario's quota client: 85 Produce exchanges of up to 30 s called slow)."""
    from tests.unit.doctor.handmade import batch, produce

    throttled = produce("t", 0, [batch()], at=1.0, throttle_ms=2000)
    queued = produce("t", 0, [batch()], at=1.1, correlation_id=2)
    queued["response_time"], queued["latency_ms"] = 3.01, 1910.0
    assert _run([throttled, queued]) == []
