import re
from pathlib import Path

from kinspect.storage import checkpoints
from tests.unit.storage.conftest import (KAFKA4, LEGACY, SEGMENT, manifest, dump_lines, need,
                                         oracle_batches, sample_roots)

METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's fixed Uuid(0, 1) of __cluster_metadata


def _partition_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and any(p.glob("*.log")))


def _topic_partition(directory: Path) -> tuple[str, int]:
    topic, _, partition = directory.name.rpartition("-")
    return topic, int(partition)


def _log_end_offset(directory: Path) -> int:
    """The next offset after the last batch kafka-dump-log read in a partition directory."""
    logs = sorted(directory.glob("*.log"))
    batches = [b for log in logs for b in oracle_batches(log)]
    return max(b["last_offset"] for b in batches) + 1 if batches else int(logs[-1].stem)


def test_real_offset_checkpoints():
    """A cleanly stopped broker's high watermarks and recovery points are its log end offsets;
    the partitions it holds no directory for (empty internal ones) are at 0."""
    for root in sample_roots():
        ends = {_topic_partition(d): _log_end_offset(d) for d in _partition_dirs(root)
                if not d.name.startswith("__cluster_metadata")}
        for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
            data, problems = checkpoints.decode_offset_checkpoint((root / name).read_bytes())
            assert problems == [] and data["count"] == len(data["entries"]), (root, name)
            found = {(e["topic"], e["partition"]): e["offset"] for e in data["entries"]}
            assert len(found) == len(data["entries"]) > len(ends), (root, name)
            assert {tp: found.get(tp) for tp in ends} == ends, (root, name)
            assert {o for tp, o in found.items() if tp not in ends} == {0}, (root, name)
        # Kafka writes only log start offsets above 0, and every sample log starts at 0
        assert all(int(min(d.glob("*.log")).stem) == 0 for d in _partition_dirs(root))
        data, problems = checkpoints.decode_offset_checkpoint(
            (root / "log-start-offset-checkpoint").read_bytes())
        assert problems == [] and data["entries"] == [], root
    cleaned = [s["cleaner_offset_checkpoint"] for s in manifest(KAFKA4)["steps"]
               if "cleaner_offset_checkpoint" in s]
    data, problems = checkpoints.decode_offset_checkpoint(
        (KAFKA4 / "cleaner-offset-checkpoint").read_bytes())
    assert problems == [] and data["entries"] == [
        {"topic": "compacted", "partition": 0, "offset": cleaned[-1]}]
    empty = need(LEGACY / "cleaner-offset-checkpoint").read_bytes()
    assert empty == b""  # the cleaner never checkpointed there: Kafka leaves the file empty
    data, problems = checkpoints.decode_offset_checkpoint(empty)
    assert problems == [] and data["entries"] == []


def test_real_leader_epoch_checkpoint_and_partition_metadata():
    """Each leader epoch starts at the first batch kafka-dump-log saw with it; each topic id is
    the one the topic's TopicRecord in __cluster_metadata gave it."""
    directories = 0
    for root in sample_roots()[:2]:  # the legacy broker's protocol has neither file
        topic_ids = dict(re.findall(r'"type":"TOPIC_RECORD","version":\d+,'
                                    r'"data":\{"name":"([^"]+)","topicId":"([^"]+)"\}',
                                    "\n".join(dump_lines(root / "__cluster_metadata-0" / SEGMENT))))
        topic_ids["__cluster_metadata"] = METADATA_TOPIC_ID
        for directory in _partition_dirs(root):
            starts = {}
            for log in sorted(directory.glob("*.log")):
                for batch in oracle_batches(log):
                    starts.setdefault(batch["leader_epoch"], batch["base_offset"])
            data, problems = checkpoints.decode_leader_epoch_checkpoint(
                (directory / "leader-epoch-checkpoint").read_bytes())
            assert problems == [], directory
            assert data["entries"] == [{"epoch": e, "start_offset": o} for e, o in starts.items()]
            meta, problems = checkpoints.decode_partition_metadata(
                (directory / "partition.metadata").read_bytes())
            assert problems == [] and meta["version"] == 0, directory
            assert meta["topic_id"] == topic_ids[_topic_partition(directory)[0]], directory
            directories += 1
    assert directories > 30
    assert not list(LEGACY.glob("*/leader-epoch-checkpoint"))


def test_properties_and_json_files():
    for root in sample_roots():
        props, problems = checkpoints.decode_properties((root / "meta.properties").read_bytes())
        assert problems == [], root
        run = manifest(root)
        broker = run["broker_config"]
        if "node.id" in broker:  # KRaft
            assert props["properties"]["node.id"] == broker["node.id"]
            assert props["properties"]["cluster.id"] == run["cluster_id"]
        else:  # ZooKeeper: the cluster id came from ZooKeeper, not the run's settings
            assert props["properties"]["broker.id"] == broker["broker.id"]
    state, problems = checkpoints.decode_json_file(
        need(KAFKA4 / "__cluster_metadata-0" / "quorum-state").read_bytes(), "q")
    assert problems == [] and state["json"]["leaderId"] == int(
        manifest(KAFKA4)["broker_config"]["node.id"])
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
