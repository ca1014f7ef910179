import json
import re
import struct

from kinspect.storage.offsets_records import decode_consumer_protocol, decode_offsets_record
from kinspect.storage.segment import walk_segment
from tests.unit.storage.conftest import KAFKA4, LEGACY, manifest, dump_lines, need, sample_roots

ORACLE_RECORD = re.compile(r'^\| offset: (\d+) .* key: (\{"type":"\d+","data":\{[^{}]*\}\}) '
                           r'payload: (<DELETE>|\{.*\}) *$')


def _records(path):
    for kind, unit, _ in walk_segment(path.read_bytes()):
        if kind == "batch" and not unit.get("is_control"):
            yield from unit["records"]


def _decoded(directory):
    out = []
    for log in sorted(directory.glob("__consumer_offsets-*/*.log")):
        for record in _records(log):
            decoded, problems = decode_offsets_record(record["key"], record["value"])
            assert problems == [], (log, record["offset"], problems)
            out.append(decoded)
    return out


def _oracle_records(directory) -> list[tuple[str, int, dict, dict | None]]:
    """(log, offset, key, value; None for a tombstone) of every record kafka-dump-log
    --offsets-decoder printed for the __consumer_offsets logs under directory."""
    out = []
    for log in sorted(directory.glob("__consumer_offsets-*/*.log")):
        for line in dump_lines(log):
            match = ORACLE_RECORD.match(line)
            if match:
                value = None if match[3] == "<DELETE>" else json.loads(match[3])
                out.append((log, int(match[1]), json.loads(match[2]), value))
    return out


def _member(decoded: dict) -> tuple:
    assigned = decoded["assignment"]["assigned_partitions"] if decoded["assignment"] else []
    return (decoded["member_id"], decoded["client_id"], decoded["session_timeout"],
            decoded["subscription"]["topics"], [(a["topic"], a["partitions"]) for a in assigned])


def _oracle_member(member: dict) -> tuple:
    assigned = member["assignment"]["assignedPartitions"] if member["assignment"] else []
    return (member["memberId"], member["clientId"], member["sessionTimeout"],
            member["subscription"]["topics"], [(a["topic"], a["partitions"]) for a in assigned])


def test_real_offsets_topics_of_the_sample_brokers():
    """Every __consumer_offsets record of the three brokers against kafka-dump-log: type,
    tombstone, value version; each commit's offset, metadata and time; each group's members."""
    commits = members = tombstones = 0
    for root in sample_roots():
        records, expected = _decoded(root), _oracle_records(root)
        assert [(r["record_type"], r["tombstone"]) for r in records] == [
            (int(key["type"]), value is None) for _, _, key, value in expected], root
        for record, (_, _, key, value) in zip(records, expected):
            if value is None:
                tombstones += 1
                continue
            assert record["value_version"] == int(value["version"])
            data = value["data"]
            if record["record_name"] == "OffsetCommit":
                assert record["key"] == key["data"]
                assert (record["value"]["offset"], record["value"]["metadata"],
                        record["value"]["commit_timestamp"]) == (
                    data["offset"], data["metadata"], data["commitTimestamp"])
                commits += 1
            elif record["record_name"] == "GroupMetadata":
                group = record["value"]
                assert (group["protocol_type"], group["generation"], group["protocol"],
                        group["leader"]) == (data["protocolType"], data["generation"],
                                             data["protocol"], data["leader"])
                assert [_member(m) for m in group["members"]] == [
                    _oracle_member(m) for m in data["members"]]
                members += len(group["members"])
    assert commits > 100 and members > 10 and tombstones > 10


def test_exact_values_of_a_real_commit():
    """The first commit group-classic made, as the client reported it (manifest) and as the
    broker stored it (kafka-dump-log: the commit time and leader epoch it added)."""
    steps = manifest(KAFKA4)["steps"]
    made = next(e for s in steps if s.get("properties", {}).get("group.id") == "group-classic"
                for e in s.get("events", ()) if e["event"] == "commit" and e["ok"])
    [commit] = made["offsets"]
    key = {"group": "group-classic", "topic": commit["topic"], "partition": commit["partition"]}
    log, offset, _, value = next(
        (log, offset, k, v) for log, offset, k, v in _oracle_records(KAFKA4)
        if k == {"type": "1", "data": key} and v and v["data"]["offset"] == commit["offset"])
    record = next(r for r in _records(log) if r["offset"] == offset)
    decoded, problems = decode_offsets_record(record["key"], record["value"])
    assert problems == []
    assert decoded == {"record_type": 1, "record_name": "OffsetCommit", "key": key,
                       "value_version": int(value["version"]),
                       "value": {"offset": commit["offset"],
                                 "leader_epoch": value["data"]["leaderEpoch"],
                                 "metadata": commit["metadata"],
                                 "commit_timestamp": value["data"]["commitTimestamp"]},
                       "tombstone": False}


def test_every_record_type_the_lab_broker_wrote():
    records = _decoded(need(KAFKA4))
    names = {r["record_name"] for r in records}
    assert {"OffsetCommit", "GroupMetadata", "ConsumerGroupMetadata",
            "ConsumerGroupPartitionMetadata", "ConsumerGroupMemberMetadata",
            "ConsumerGroupTargetAssignmentMetadata", "ConsumerGroupTargetAssignmentMember",
            "ConsumerGroupCurrentMemberAssignment", "ConsumerGroupRegularExpression"} <= names
    members = [r for r in records if r["record_type"] == 5 and not r["tombstone"]]
    assert all(r["value"]["classic_member_metadata"] is None for r in members)
    assert all(r["value"]["subscribed_topic_names"] or r["value"]["subscribed_topic_regex"]
               for r in members)


def test_legacy_broker_offsets_topic():
    records = _decoded(need(LEGACY))
    assert {(r["record_type"], r["value_version"]) for r in records} == {(1, 1), (2, 0)}
    commit = next(r for r in records if r["record_type"] == 1)
    assert commit["value"]["expire_timestamp"] == -1


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_share_and_streams_group_records():
    key = struct.pack(">h", 11) + _string("share-g")
    value = struct.pack(">hiq", 0, 7, 99) + b"\x00"
    decoded, problems = decode_offsets_record(key, value)
    assert problems == []
    assert (decoded["record_name"], decoded["key"], decoded["value"]) == (
        "ShareGroupMetadata", {"group_id": "share-g"}, {"epoch": 7, "metadata_hash": 99})
    key = struct.pack(">h", 17) + _string("streams-g")
    tagged = b"\x01" + b"\x00" + b"\x04" + struct.pack(">i", 3)  # ValidatedTopologyEpoch = 3
    decoded, problems = decode_offsets_record(key, struct.pack(">hiq", 0, 2, 5) + tagged)
    assert problems == []
    assert decoded["value"] == {"epoch": 2, "metadata_hash": 5, "validated_topology_epoch": 3}


def test_unknown_types_and_versions_are_raw_with_a_notice():
    decoded, problems = decode_offsets_record(struct.pack(">h", 99) + b"xyz", b"\x00\x00abc")
    assert decoded["record_type"] == 99 and decoded["record_name"] is None
    assert decoded["value"] == b"\x00\x00abc"
    assert [(p.check, p.severity) for p in problems] == [("record_type", "warning")]
    key = struct.pack(">h", 1) + _string("g") + _string("t") + struct.pack(">i", 0)
    decoded, problems = decode_offsets_record(key, struct.pack(">h", 42) + b"\x00" * 8)
    assert decoded["key"] == {"group": "g", "topic": "t", "partition": 0}
    assert decoded["value_version"] == 42 and decoded["value"] == struct.pack(">h", 42) + bytes(8)
    assert [p.check for p in problems] == ["record_version"]


def test_truncated_values_keep_what_decoded():
    key = struct.pack(">h", 1) + _string("g") + _string("t") + struct.pack(">i", 3)
    value = struct.pack(">hq", 3, 42) + struct.pack(">i", 7)  # offset, leader epoch, cut
    decoded, problems = decode_offsets_record(key, value)
    assert decoded["value"] == {"offset": 42, "leader_epoch": 7}
    assert problems[0].severity == "error" and "metadata" in problems[0].path
    for bad_key in (None, b"", b"\x00"):
        assert decode_offsets_record(bad_key, None)[1][0].check == "record_key"
    assert decode_offsets_record(key, b"\x00")[1][0].check == "record_value"


def test_consumer_protocol_versions_above_the_known_are_read_as_the_highest():
    subscription = struct.pack(">hi", 9, 1) + _string("t") + struct.pack(">i", -1)
    subscription += struct.pack(">i", 0) + struct.pack(">i", 5) + struct.pack(">h", -1)
    decoded = decode_consumer_protocol("ConsumerProtocolSubscription", subscription)
    assert decoded["version"] == 9 and decoded["topics"] == ["t"]
    assert decode_consumer_protocol("ConsumerProtocolSubscription", b"\x00") is None
