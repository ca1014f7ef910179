import struct

from kinspect.storage.offsets_records import decode_consumer_protocol, decode_offsets_record
from kinspect.storage.segment import walk_segment
from tests.unit.storage.conftest import KAFKA4, KAFKAFUN, LEGACY, SEGMENT, need


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


def test_real_offsets_topic_written_by_kafka_2_6():
    records = _decoded(KAFKAFUN)
    commits = [r for r in records if r["record_name"] == "OffsetCommit"]
    groups = [r for r in records if r["record_name"] == "GroupMetadata"]
    assert len(commits) == 1521 and {r["value_version"] for r in commits} == {3}
    assert len(groups) == 44 and sum(r["tombstone"] for r in groups) == 8
    first = next(r for r in groups if not r["tombstone"])
    member = first["value"]["members"][0]
    assert first["value"]["protocol_type"] == "consumer"
    assert member["subscription"]["topics"] and member["subscription"]["version"] == 1
    assert member["assignment"]["assigned_partitions"][0]["partitions"]


def test_exact_values_of_a_real_commit():
    record = next(_records(KAFKAFUN / "__consumer_offsets-27" / SEGMENT))
    record = list(_records(KAFKAFUN / "__consumer_offsets-27" / SEGMENT))[1]
    decoded, problems = decode_offsets_record(record["key"], record["value"])
    assert problems == []
    assert decoded == {"record_type": 1, "record_name": "OffsetCommit",
                       "key": {"group": "my-second-app", "topic": "first", "partition": 2},
                       "value_version": 3, "value": {"offset": 6, "leader_epoch": 0,
                                                     "metadata": "",
                                                     "commit_timestamp": 1599689766181},
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
