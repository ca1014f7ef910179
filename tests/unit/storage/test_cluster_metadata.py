from collections import Counter

from kinspect.storage.checkpoints import decode_partition_metadata
from kinspect.storage.cluster_metadata import decode_metadata_record, type_name
from kinspect.storage.segment import walk_segment
from tests.unit.storage.conftest import KAFKA4, SEGMENT, need


def _metadata(path):
    out = []
    for kind, unit, _ in walk_segment(path.read_bytes()):
        if kind == "batch" and not unit["is_control"]:
            for record in unit["records"]:
                decoded, problems = decode_metadata_record(record["value"])
                assert problems == [], (path, record["offset"], problems)
                out.append(decoded)
    return out


def test_metadata_log_and_snapshots_decode_completely():
    directory = need(KAFKA4 / "__cluster_metadata-0")
    records = _metadata(directory / SEGMENT)
    for snapshot in sorted(directory.glob("*.checkpoint")):
        records += _metadata(snapshot)
    records += _metadata(KAFKA4 / "bootstrap.checkpoint")
    types = Counter(r["type"] for r in records)
    assert {"TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD", "CONFIG_RECORD",
            "FEATURE_LEVEL_RECORD", "REGISTER_BROKER_RECORD", "REGISTER_CONTROLLER_RECORD",
            "PRODUCER_IDS_RECORD", "NO_OP_RECORD", "BEGIN_TRANSACTION_RECORD",
            "END_TRANSACTION_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD"} <= set(types)


def test_topic_ids_agree_with_partition_metadata_files():
    """TopicRecord ids in the metadata log are the ids in each partition.metadata."""
    records = _metadata(need(KAFKA4 / "__cluster_metadata-0" / SEGMENT))
    topics = {r["data"]["name"]: r["data"]["topic_id"] for r in records
              if r["type"] == "TOPIC_RECORD"}
    checked = 0
    for meta in KAFKA4.glob("*-0/partition.metadata"):
        topic = meta.parent.name.rsplit("-", 1)[0]
        if topic in topics:
            assert decode_partition_metadata(meta.read_bytes())[0]["topic_id"] == topics[topic]
            checked += 1
    assert checked >= 10


def test_partition_record_tagged_fields():
    records = _metadata(need(KAFKA4 / "__cluster_metadata-0" / SEGMENT))
    partition = next(r for r in records if r["type"] == "PARTITION_RECORD")
    assert partition["version"] >= 1 and partition["data"]["replicas"] == [1]
    assert len(partition["data"]["directories"]) == 1


def test_frame_version_unknown_types_and_versions():
    decoded, problems = decode_metadata_record(b"\x01\x0c\x00\x03ab\x00\x01\x00")
    assert problems == [] and decoded["data"] == {"name": "ab", "feature_level": 1}
    decoded, problems = decode_metadata_record(b"\x01\x63\x00\x00")
    assert decoded["type"] == "UNKNOWN(99)" and problems[0].check == "record_type"
    decoded, problems = decode_metadata_record(b"\x01\x02\x09\x00")
    assert problems[0].check == "record_version" and decoded["data"] == b"\x00"
    assert decode_metadata_record(b"\x02\x14\x00\x00")[1][0].check == "metadata_record"
    assert decode_metadata_record(None)[1][0].check == "metadata_record"
    assert decode_metadata_record(b"\x01\xff")[1][0].check == "metadata_record"


def test_type_names():
    assert type_name("RegisterBrokerRecord") == "REGISTER_BROKER_RECORD"
    assert type_name("NoOpRecord") == "NO_OP_RECORD"
