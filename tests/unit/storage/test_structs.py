import struct

from kinspect.storage import structs
from kinspect.storage.metadata_schemas import METADATA_RECORDS


def test_every_struct_version_compiles_and_decodes_its_minimal_encoding_partially():
    """Each known struct version builds a decoder that never raises, whatever the bytes."""
    for name, segments in structs.SEGMENTS.items():
        for first, last, *_ in segments:
            for version in range(first, min(last, first + 5) + 1):
                for data in (b"", b"\x00" * 3, b"\xff" * 40):
                    decoded, problems = structs.decode_struct(name, version, data)
                    assert isinstance(decoded, dict)


def test_uuids_are_kafka_base64():
    raw = bytes(range(16))
    decoded, problems = structs.decode_struct("TopicRecord", 0, b"\x02t" + raw + b"\x00")
    assert problems == []
    assert decoded == {"name": "t", "topic_id": structs.kafka_uuid(raw)}
    assert structs.kafka_uuid(raw) == "AAECAwQFBgcICQoLDA0ODw"


def test_tagged_nullable_struct_marker_is_a_varint():
    """ConsumerGroupMemberMetadataValue.ClassicMemberMetadata: tag with 00 is null, 01 struct."""
    head = b"\x00\x00\x02c\x02h\x01\x00" + struct.pack(">i", 1000) + b"\x00"
    null, problems = structs.decode_struct("ConsumerGroupMemberMetadataValue", 0,
                                           head + b"\x01\x00\x01\x00")
    assert problems == [] and null["classic_member_metadata"] is None
    body = struct.pack(">i", 45000) + b"\x02\x06range\x02\x00\x00" + b"\x00"
    present, problems = structs.decode_struct(
        "ConsumerGroupMemberMetadataValue", 0,
        head + b"\x01\x00" + bytes([len(body) + 1]) + b"\x01" + body)
    assert problems == []
    assert present["classic_member_metadata"] == {
        "session_timeout_ms": 45000,
        "supported_protocols": [{"name": "range", "metadata": b"\x00"}]}


def test_unknown_version_is_a_problem_not_an_exception():
    decoded, problems = structs.decode_struct("OffsetCommitValue", 99, b"")
    assert decoded == {} and problems[0].check == "record_version"
    assert structs.versions("OffsetCommitValue") == (0, 4)
    assert structs.versions("NoSuchStruct") is None


def test_metadata_table_names_and_versions():
    assert METADATA_RECORDS[3][0] == "PartitionRecord" and METADATA_RECORDS[3][1] == 2
    assert all(structs.has_version(name, last) for name, last, _ in METADATA_RECORDS.values())


def test_record_structs_picks_the_table_by_record_name():
    assert structs.record_structs("TransactionLog", 0) == ("TransactionLogKey", 0, "TransactionLogValue")
    assert structs.record_structs("ShareUpdate", 1) == ("ShareUpdateKey", 0, "ShareUpdateValue")
    assert structs.record_structs("OffsetCommit", 1) == ("OffsetCommitKey", 0, "OffsetCommitValue")
    assert structs.record_structs("GroupMetadata", 2) == ("GroupMetadataKey", 0, "GroupMetadataValue")
    assert structs.record_structs("TransactionLog", 1) is None
    assert structs.record_structs(None, None) is None
