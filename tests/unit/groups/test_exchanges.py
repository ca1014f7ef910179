import json

import pytest

from kinspect.groups.exchanges import CaptureReplay
from kinspect.groups.model import ABORTED, COMMITTED, FETCHED, PENDING, REJECTED, UNANSWERED
from kinspect.decode.pipeline import DecodeRun
from kinspect.wire.encode import encode_body
from kinspect.wire.messages import decode_body
from tests.conftest import PCAPS
from tests.unit.groups.oracles import describe_offsets

TANSU = ["aiokafka-mtu1500.pcapng", "kafka-python-legacy-groups.pcapng", "kafka-python-sll2.pcap",
         "librdkafka-mtu1500.pcap", "librdkafka-produce-consume.pcapng"]
TOPIC_ID = "5b6d8a4e-1c6f-4f0e-9a39-0d2a4b7f2c11"


def replay_capture(path, **options):
    replay = CaptureReplay(**options)
    for record in DecodeRun(str(path)).records():
        replay.exchange(record)
    return replay.finish()


@pytest.mark.parametrize("name", TANSU)
def test_real_clients_committed_view_matches_the_capture(name):
    """Each manifest lists what the client's committed() said after the run (Tansu broker)."""
    manifest = json.loads((PCAPS / name.rsplit(".", 1)[0]).with_suffix(".manifest.json")
                          .read_text())
    expected = {(c["group"], c["topic"], c["partition"]): c["offset"]
                for client in manifest["clients"] for c in client.get("committed") or ()}
    assert expected
    view = replay_capture(PCAPS / name, history=True)
    got = {(g, t, p): c.offset for g, group in view.groups.items()
           for (t, p), c in group.offsets.items()}
    assert got == expected
    assert any(c.outcome == COMMITTED for c in view.history)
    assert view.log_end_offsets


# -- the rules, on exchanges encoded and decoded by kinspect's own codec ---------------------

def exchange(api_key, version, request, response, when=1.0, conn="c1"):
    def roundtrip(kind, body):
        if body is None:
            return None
        decoded, problems = decode_body(api_key, version, kind, encode_body(api_key, version,
                                                                            kind, body))
        assert problems == []
        return decoded
    return {"type": "exchange", "api_key": api_key, "api_version": version, "conn": conn,
            "request_time": when, "response_time": None if response is None else when + 0.001,
            "request": roundtrip("request", request), "response": roundtrip("response", response)}


def commit(group, partitions, errors=None, when=1.0, version=9, topic="t"):
    topic_field = {"topic_id": TOPIC_ID} if version >= 10 else {"name": topic}
    request = {"group_id": group, "generation_id_or_member_epoch": 1, "member_id": "m",
               "topics": [{**topic_field, "partitions": [
                   {"partition_index": p, "committed_offset": o, "committed_leader_epoch": 0,
                    "committed_metadata": "meta"} for p, o in partitions]}]}
    response = None if errors is False else {"topics": [{**topic_field, "partitions": [
        {"partition_index": p, "error_code": (errors or {}).get(p, 0)} for p, _ in partitions]}]}
    return exchange(8, version, request, response, when)


def txn_commit(group, producer_id, partitions, when):
    return exchange(28, 4, {"transactional_id": "tx", "group_id": group, "producer_id": producer_id,
                            "producer_epoch": 0, "topics": [{"name": "t", "partitions": [
                                {"partition_index": p, "committed_offset": o} for p, o in partitions]}]},
                    {"topics": [{"name": "t", "partitions": [{"partition_index": p, "error_code": 0}
                                                             for p, _ in partitions]}]}, when)


def end_txn(producer_id, committed, when, error=0):
    return exchange(26, 4, {"transactional_id": "tx", "producer_id": producer_id,
                            "producer_epoch": 0, "committed": committed},
                    {"error_code": error}, when)


def offsets(view, group="g"):
    return {tp: c.offset for tp, c in view.groups[group].offsets.items()}


def run(*records, **options):
    replay = CaptureReplay(history=True, **options)
    for record in records:
        replay.exchange(record)
    return replay.finish()


def test_rejected_and_unanswered_commits_are_not_commits():
    view = run(commit("g", [(0, 5), (1, 6)], when=1.0),
               commit("g", [(0, 9), (1, 10)], errors={1: 22}, when=2.0),
               commit("g", [(0, 11)], errors=False, when=3.0))
    assert offsets(view) == {("t", 0): 9, ("t", 1): 6}
    assert [(c.offset, c.outcome, c.error) for c in view.history] == [
        (5, COMMITTED, None), (6, COMMITTED, None), (9, COMMITTED, None),
        (10, REJECTED, "ILLEGAL_GENERATION"), (11, UNANSWERED, None)]


def test_exchanges_apply_in_the_order_the_broker_answered():
    view = run(commit("g", [(0, 9)], when=5.0), commit("g", [(0, 4)], when=1.0))
    assert offsets(view) == {("t", 0): 9}


def test_transactional_commits_wait_for_end_txn():
    view = run(txn_commit("g", 7, [(0, 5)], 1.0), end_txn(7, True, 2.0),
               txn_commit("g", 7, [(0, 8), (1, 2)], 3.0), end_txn(7, False, 4.0),
               txn_commit("g", 8, [(2, 4)], 5.0), end_txn(8, True, 6.0, error=48))
    assert offsets(view) == {("t", 0): 5}
    assert [c.outcome for c in view.history] == [COMMITTED, ABORTED, ABORTED, PENDING]
    assert "pending" in view.notes[0]


def test_the_coordinators_markers_end_a_transaction_too():
    markers = exchange(27, 1, {"markers": [
        {"producer_id": 7, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
         "topics": [{"name": "__consumer_offsets", "partition_indexes": [3]}]}]},
        {"markers": [{"producer_id": 7, "topics": [{"name": "__consumer_offsets", "partitions": [
            {"partition_index": 3, "error_code": 0}]}]}]}, 2.0)
    view = run(txn_commit("g", 7, [(0, 5)], 1.0), markers)
    assert offsets(view) == {("t", 0): 5}


def test_offset_fetch_deletes_and_group_deletion():
    fetch_all = exchange(9, 7, {"group_id": "g", "topics": None},
                         {"topics": [{"name": "t", "partitions": [
                             {"partition_index": 1, "committed_offset": 6, "metadata": "",
                              "committed_leader_epoch": -1, "error_code": 0}]}], "error_code": 0}, 2.0)
    view = run(commit("g", [(0, 5)], when=1.0), fetch_all)
    assert offsets(view) == {("t", 1): 6}
    assert view.groups["g"].offsets[("t", 1)].outcome == FETCHED
    delete = exchange(47, 0, {"group_id": "g", "topics": [{"name": "t", "partitions": [
        {"partition_index": 1}]}]}, {"error_code": 0, "topics": [{"name": "t", "partitions": [
            {"partition_index": 1, "error_code": 0}]}]}, 3.0)
    assert offsets(run(commit("g", [(0, 5)], when=1.0), fetch_all, delete)) == {}
    groups = exchange(42, 2, {"groups_names": ["g"]}, {"results": [{"group_id": "g",
                                                                    "error_code": 0}]}, 3.0)
    gone = run(commit("g", [(0, 5)], when=1.0), groups)
    assert gone.groups["g"].state == "Dead" and not gone.groups["g"].exists


def test_topic_ids_are_named_from_metadata_and_log_ends_come_from_list_offsets():
    metadata = exchange(3, 12, {"topics": None}, {"brokers": [], "topics": [
        {"error_code": 0, "name": "orders", "topic_id": TOPIC_ID, "partitions": []}]}, 0.5)
    listed = exchange(2, 7, {"replica_id": -1, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "timestamp": -1}]}]}, {"topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 42}]}]}, 3.0)
    view = run(metadata, commit("g", [(0, 5)], when=1.0, version=10), listed)
    assert offsets(view) == {("orders", 0): 5}
    assert view.log_end_offsets == {("orders", 0): 42}


def test_described_groups_give_state_and_members():
    described = exchange(15, 5, {"groups": ["g"]}, {"groups": [
        {"error_code": 0, "group_id": "g", "group_state": "Stable", "protocol_type": "consumer",
         "protocol_data": "range", "members": [
             {"member_id": "m-1", "client_id": "c", "client_host": "/10.1.1.1",
              "member_metadata": b"", "member_assignment": b"\x00\x03\x00\x00\x00\x01\x00\x01t"
              b"\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"}]}]}, 2.0)
    view = run(commit("g", [(0, 5)], when=1.0), described)
    group = view.groups["g"]
    assert group.state == "Stable" and group.protocol == "range"
    assert group.members["m-1"].assignment == [("t", 0)]
    assert offsets(view) == {("t", 0): 5}


def test_only_the_asked_group_is_kept():
    view = run(commit("a", [(0, 1)]), commit("b", [(0, 2)]), group="b")
    assert list(view.groups) == ["b"]


# -- Kafka 4.1's own Java clients (pcaps/java-*.pcap, tools/make_samples.py) ------------------

def java_clients(name):
    path = PCAPS / f"{name}.clients.json"
    if not path.exists():
        pytest.fail(f"{path} is missing: pcaps/java-* are committed (tools/make_samples.py regenerates them)")
    return json.loads(path.read_text())


def test_kafka_consumer_groups_describe_seen_on_the_wire():
    rows = describe_offsets(java_clients("java-consumer-groups-describe")["output"])
    view = replay_capture(PCAPS / "java-consumer-groups-describe.pcap")
    assert rows
    for (group, topic, partition), row in rows.items():
        assert view.groups[group].offsets[(topic, partition)].offset == row["CURRENT-OFFSET"]
        assert view.log_end_offsets[(topic, partition)] == row["LOG-END-OFFSET"]
    assert {g.state for g in view.groups.values()} == {"Empty"}
    assert view.groups["java-console-848"].kind == "consumer"


@pytest.mark.parametrize("name", ["java-console-consumer", "java-console-consumer-kip848"])
def test_console_consumers_commits_are_what_kafka_consumer_groups_saw_next(name):
    java_clients(name)
    rows = describe_offsets(java_clients("java-consumer-groups-describe")["output"])
    view = replay_capture(PCAPS / f"{name}.pcap", history=True)
    [group] = view.groups
    assert {(group, t, p): c.offset for (t, p), c in view.groups[group].offsets.items()} == {
        key: row["CURRENT-OFFSET"] for key, row in rows.items() if key[0] == group}
    assert all(c.outcome == COMMITTED for c in view.history)


def test_java_transaction_commits_its_offsets_and_the_aborted_one_sends_none():
    events = java_clients("java-transactions")["events"]
    [sent] = [e["offsets"] for e in events if e["event"] == "txn_offsets"]
    view = replay_capture(PCAPS / "java-transactions.pcap", history=True)
    assert {(t, p): c.offset for (t, p), c in view.groups[sent["group"]].offsets.items()} == {
        (o["topic"], o["partition"]): o["offset"] for o in sent["offsets"]}
    assert [c.producer_id >= 0 and c.outcome == COMMITTED for c in view.history] == [True]
