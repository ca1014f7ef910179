from kinspect.doctor.finding import ERROR, WARNING
from kinspect.doctor.producer_sequence import ProducerSequence
from tests.unit.doctor.handmade import batch, exchange, produce


def _run(records):
    check = ProducerSequence()
    for record in records:
        check.exchange(record)
    return list(check.finish(0))


def test_healthy_sequences_are_no_finding():
    assert _run([produce("t", 0, [batch(producer_id=3, epoch=0, sequence=s * 5, count=5)], base_offset=s * 5,
                         at=float(s)) for s in range(10)]) == []


def test_out_of_order_sequence_with_what_led_up_to_it():
    records = [produce("t", 0, [batch(producer_id=3, epoch=0, sequence=0, count=5)], at=1.0),
               produce("t", 0, [batch(producer_id=3, epoch=0, sequence=5, count=5)], base_offset=5, at=2.0),
               produce("t", 0, [batch(producer_id=3, epoch=0, sequence=20, count=5)], error=45, at=3.0,
                       correlation_id=9)]
    [found] = _run(records)
    assert found["severity"] == ERROR and found["error"] == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert (found["producer_id"], found["topic"], found["partition"]) == (3, "t", 0)
    assert [s["base_sequence"] for s in found["timeline"]] == [0, 5, 20]
    assert found["timeline"][-1]["last_sequence"] == 24 and found["evidence"][0]["correlation_id"] == 9


def test_fenced_producer_on_end_txn_is_a_warning():
    record = exchange(26, {"transactional_id": "tx", "producer_id": 4, "producer_epoch": 1, "committed": True},
                      {"error_code": 47}, at=5.0)
    [found] = _run([record])
    assert found["severity"] == WARNING and found["error"] == "INVALID_PRODUCER_EPOCH" and found["topic"] is None
