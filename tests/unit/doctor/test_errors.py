from kinspect.doctor.errors import Errors
from kinspect.doctor.finding import INFO, WARNING
from tests.unit.doctor.handmade import exchange, produce, batch


def _run(records):
    check = Errors()
    for record in records:
        check.exchange(record)
    return list(check.finish(0))


def test_routine_codes_are_info_and_others_warnings_by_api_topic_and_broker():
    records = [exchange(11, {"group_id": "g"}, {"error_code": 79}, error_codes=["MEMBER_ID_REQUIRED"])]
    for i in range(3):
        record = produce("orders", 0, [batch()], error=87, at=float(i))
        record["error_codes"] = ["INVALID_RECORD"]
        records.append(record)
    found = {f["error"]: f for f in _run(records)}
    assert found["MEMBER_ID_REQUIRED"]["severity"] == INFO
    bad = found["INVALID_RECORD"]
    assert bad["severity"] == WARNING and bad["count"] == 3 and bad["api_name"] == "Produce"
    assert bad["topics"] == [{"topic": "orders", "count": 3}]
    assert bad["brokers"] == [{"broker": "10.0.0.9:9092", "count": 3}] and len(bad["evidence"]) == 3


def test_the_brokers_own_clients_are_not_counted():
    record = exchange(27, {}, {}, client_id="broker-1-txn-marker-sender", error_codes=["NOT_LEADER_OR_FOLLOWER"])
    assert _run([record]) == []
