from kinspect.doctor.finding import ERROR, WARNING
from kinspect.doctor.hanging import Hanging
from tests.unit.doctor.handmade import batch, exchange, produce

TXN_CONN = "10.0.0.7:40000-10.0.0.9:9092"


def _init(at, producer_id=7, timeout_ms=60000):
    return exchange(22, {"transactional_id": "tx", "transaction_timeout_ms": timeout_ms},
                    {"error_code": 0, "producer_id": producer_id, "producer_epoch": 0}, at=at, conn=TXN_CONN)


def _txn_produce(at, producer_id=7):
    return produce("t", 0, [batch(producer_id=producer_id, epoch=0, sequence=0, transactional=True)], at=at,
                   transactional_id="tx", conn=TXN_CONN)


def _end(at, producer_id=7):
    return exchange(26, {"transactional_id": "tx", "producer_id": producer_id, "committed": True},
                    {"error_code": 0}, at=at, conn=TXN_CONN)


def _other(at):
    return exchange(3, {}, {"error_code": 0}, at=at)


def _run(records, end):
    check = Hanging()
    for record in records:
        check.exchange(record)
    return list(check.finish(end))


def test_an_ended_transaction_is_no_finding():
    assert _run([_init(1.0), _txn_produce(2.0), _end(3.0), _other(100.0)], 100.0) == []


def test_a_producer_that_vanished_mid_transaction_is_a_warning():
    [found] = _run([_init(1.0), _txn_produce(2.0), _other(30.0)], 30.0)
    assert found["severity"] == WARNING and found["state"] == "vanished"
    assert (found["transactional_id"], found["producer_id"], found["partitions"]) == ("tx", 7, ["t-0"])
    assert found["open_since"] == 2.0 and found["silent_s"] == 28.0


def test_past_the_transaction_timeout_it_is_an_error():
    [found] = _run([_init(1.0, timeout_ms=10_000), _txn_produce(2.0), _other(20.0)], 20.0)
    assert found["severity"] == ERROR and found["state"] == "past_timeout"


def test_a_producer_still_talking_is_not_gone():
    assert _run([_init(1.0), _txn_produce(2.0), exchange(3, {}, {}, at=9.5, conn=TXN_CONN)], 10.0) == []


def test_the_coordinators_markers_end_it():
    markers = exchange(27, {"markers": [{"producer_id": 7, "transaction_result": False}]}, {"markers": []},
                       at=70.0, client_id="broker-1-txn-marker-sender")
    assert _run([_init(1.0), _txn_produce(2.0), markers, _other(100.0)], 100.0) == []


def test_a_new_epoch_of_the_transactional_id_aborts_the_old_one():
    assert _run([_init(1.0), _txn_produce(2.0), _init(50.0, producer_id=7), _other(100.0)], 100.0) == []
