from kinspect.doctor.finding import WARNING
from kinspect.doctor.throttle import Throttle
from tests.unit.doctor.handmade import batch, produce


def _run(records):
    check = Throttle()
    for record in records:
        check.exchange(record)
    return check, list(check.finish(0))


def test_no_throttle_no_finding():
    assert _run([produce("t", 0, [batch()], at=1.0)])[1] == []


def test_throttle_summed_per_client_and_api_and_honoured():
    records = [produce("t", 0, [batch()], at=1.0, throttle_ms=500, client_id="slowed"),
               produce("t", 0, [batch()], at=1.6, throttle_ms=300, client_id="slowed"),  # after 1.502
               produce("t", 0, [batch()], at=2.0, client_id="slowed")]
    check, [found] = _run(records)
    assert found["severity"] == WARNING
    assert (found["client_id"], found["api_name"], found["throttle_ms"], found["throttled"]) == ("slowed", "Produce", 800, 2)
    assert found["honoured"] is True and check.honoured("slowed") is True and check.honoured("other") is None


def test_a_request_inside_the_throttle_is_not_honouring_it():
    records = [produce("t", 0, [batch()], at=1.0, throttle_ms=1000, client_id="rude"),
               produce("t", 0, [batch()], at=1.2, client_id="rude")]
    check, [found] = _run(records)
    assert found["honoured"] is False and found["early_requests"] == 1
