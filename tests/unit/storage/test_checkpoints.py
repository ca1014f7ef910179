from kinspect.storage import checkpoints
from tests.unit.storage.conftest import KAFKA4, KAFKAFUN, SOC, need


def test_real_offset_checkpoints():
    data, problems = checkpoints.decode_offset_checkpoint(
        (KAFKAFUN / "replication-offset-checkpoint").read_bytes())
    assert problems == [] and data["count"] == len(data["entries"]) == 54
    assert {"topic": "__consumer_offsets", "partition": 39, "offset": 1241} in data["entries"]
    empty, problems = checkpoints.decode_offset_checkpoint(
        (SOC.parent / "cleaner-offset-checkpoint").read_bytes())
    assert problems == [] and empty["entries"] == []


def test_real_leader_epoch_checkpoint_and_partition_metadata():
    data, problems = checkpoints.decode_leader_epoch_checkpoint(
        (SOC / "leader-epoch-checkpoint").read_bytes())
    assert problems == [] and data["entries"] == [{"epoch": 0, "start_offset": 0}]
    meta, problems = checkpoints.decode_partition_metadata(
        (SOC / "partition.metadata").read_bytes())
    assert problems == [] and meta["version"] == 0 and len(meta["topic_id"]) == 22


def test_properties_and_json_files():
    props, problems = checkpoints.decode_properties((SOC.parent / "meta.properties").read_bytes())
    assert problems == [] and props["properties"]["broker.id"] == "1001"
    state, problems = checkpoints.decode_json_file(
        need(KAFKA4 / "__cluster_metadata-0" / "quorum-state").read_bytes(), "q")
    assert problems == [] and state["json"]["leaderId"] == 1
    assert checkpoints.decode_json_file(b"{nope", "q")[1][0].check == "json_file"


def test_malformed_checkpoints():
    _, problems = checkpoints.decode_offset_checkpoint(b"0\n3\nt 0 5\nt x 1\n")
    assert [p.check for p in problems] == ["checkpoint_count", "checkpoint_entry"]
    _, problems = checkpoints.decode_leader_epoch_checkpoint(b"0\n2\n3 100\n2 50\n")
    assert [p.check for p in problems] == ["checkpoint_order"]
    _, problems = checkpoints.decode_offset_checkpoint(b"1\nx\n")
    assert [p.check for p in problems] == ["checkpoint_format"]
    _, problems = checkpoints.decode_partition_metadata(b"version: 1\ntopic_id: short")
    assert [p.check for p in problems] == ["partition_metadata", "partition_metadata"]
    _, problems = checkpoints.decode_offset_checkpoint(b"\xff\xfe")
    assert problems[0].check == "checkpoint_text"
