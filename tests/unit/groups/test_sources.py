import json
import shutil

import pytest

from kinspect.groups import logdir
from kinspect.groups.sources import SourceUnreadable, read_capture, read_log_dir, read_segments
from kinspect.storage.segment import walk_segment
from tests.conftest import KAFKAFUN, PCAPS, SAMPLES
from tests.unit.groups.handmade import batch, offset_key, offset_value
from tests.unit.groups.oracles import describe_blocks, describe_offsets
from tests.unit.groups.test_replay import need

KAFKA4 = SAMPLES / "kafka-4.1.2"
EXPIRY = SAMPLES / "kafka-4.1.2-expiry"
LEGACY = SAMPLES / "kafka-3.9.2-legacy"
SEGMENT = "00000000000000000000.log"


def offsets(view, group):
    return {tp: c.offset for tp, c in view.groups[group].offsets.items()}


def test_log_dir_picks_the_groups_partition_and_says_which():
    view = read_log_dir(KAFKAFUN, "third")
    assert view.notes == ["group third is in __consumer_offsets-39 (abs(hashCode) % 50)"]
    assert list(view.groups) == ["third"]
    assert view.groups["third"].coordinator == "__consumer_offsets-39"
    # log end offsets from the topic partitions' own segments
    assert view.log_end_offsets == {("first", 0): 9, ("first", 1): 11, ("first", 2): 7,
                                    ("first_topic", 0): 3}


def test_log_dir_without_a_group_lists_every_group():
    view = read_log_dir(KAFKAFUN)
    assert {g for g, group in view.groups.items() if group.exists} == {
        "my-first-app", "my-second-app", "third"}
    assert sum(not group.exists for group in view.groups.values()) == 8


def test_a_wrong_partition_count_still_finds_the_group_and_says_so():
    view = read_log_dir(KAFKAFUN, "third", partitions=7)
    assert "third" in view.groups
    assert "found in __consumer_offsets-39" in view.notes[0] and "--partitions" in view.notes[0]
    missing = read_log_dir(KAFKAFUN, "no-such-group")
    assert missing.groups == {} and "not found" in missing.notes[0]


def test_lab_log_dir_matches_kafka_consumer_groups_with_log_end_offsets():
    manifest = json.loads((need(KAFKA4) / "manifest.json").read_text())
    [described] = [s for s in manifest["steps"] if s.get("label") == "describe offsets"]
    rows = describe_offsets(described["output"])
    for group in {g for g, _, _ in rows}:
        view = read_log_dir(KAFKA4 / "logs", group)
        for (g, topic, partition), row in rows.items():
            if g != group:
                continue
            assert view.groups[g].offsets[(topic, partition)].offset == row["CURRENT-OFFSET"]
            assert view.log_end_offsets[(topic, partition)] == row["LOG-END-OFFSET"]


def test_expired_offsets_are_gone_as_kafka_says():
    """offsets.retention.minutes=1 ran out (tools/make_samples.py expiry): Kafka wrote offset
    tombstones and then group tombstones; committed() saw nothing, --list was empty."""
    manifest = json.loads((need(EXPIRY) / "manifest.json").read_text())
    [listed] = [s for s in manifest["steps"] if s.get("label") == "list after expiry"]
    assert listed["output"].split() == []
    view = read_log_dir(EXPIRY / "logs", history=True)
    assert {g for g, group in view.groups.items() if group.exists} == set()
    expired = {g.group_id for g in view.groups.values()}
    assert {"expired-classic", "expired-consumer"} <= expired
    assert any(c.outcome == "deleted" for c in view.history)


def test_segment_files_given_directly(tmp_path):
    directory = KAFKAFUN / "__consumer_offsets-39"
    view = read_segments([directory / SEGMENT], "third")
    assert offsets(view, "third") == offsets(read_log_dir(KAFKAFUN, "third"), "third")
    assert view.log_end_offsets  # the log dir around the partition is used when there
    copy = tmp_path / "elsewhere.log"
    shutil.copy(directory / SEGMENT, copy)
    alone = read_segments([copy], "third")
    assert offsets(alone, "third") == offsets(view, "third") and alone.log_end_offsets == {}


def test_segments_of_one_partition_replay_in_offset_order(tmp_path):
    partition = tmp_path / "__consumer_offsets-3"
    partition.mkdir()
    (partition / "00000000000000000000.log").write_bytes(
        batch([(offset_key("g", "t", 0), offset_value(1))], 0))
    (partition / "00000000000000000001.log").write_bytes(
        batch([(offset_key("g", "t", 0), offset_value(2))], 1))
    files = sorted(partition.iterdir(), reverse=True)
    view = read_segments(files, "g")
    assert offsets(view, "g") == {("t", 0): 2} and view.problems == []


def test_damaged_copies_report_and_keep_what_is_sound(tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(KAFKAFUN / "__consumer_offsets-39", logs / "__consumer_offsets-39")
    segment = logs / "__consumer_offsets-39" / SEGMENT
    data = bytearray(segment.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = b"\xee" * 64
    segment.write_bytes(bytes(data[:-37]))
    view = read_log_dir(logs, "third")
    assert {p.check for p in view.problems} & {"damage", "crc", "replay_crc"}
    assert all(p.offset is not None for p in view.problems if p.severity == "error")
    assert offsets(view, "third")  # the sound batches before and after still count


def test_unreadable_sources_raise(tmp_path):
    with pytest.raises(SourceUnreadable):
        read_log_dir(tmp_path / "missing")
    with pytest.raises(SourceUnreadable):
        read_log_dir(tmp_path)
    with pytest.raises(SourceUnreadable):
        read_segments([tmp_path / "missing.log"])
    (tmp_path / "not.pcap").write_text("hello")
    with pytest.raises(SourceUnreadable):
        read_capture(str(tmp_path / "not.pcap"))


def test_capture_source():
    view = read_capture(str(PCAPS / "librdkafka-produce-consume.pcapng"), "lab-librdkafka-group")
    assert offsets(view, "lab-librdkafka-group") == {("lab-librdkafka", 1): 10,
                                                     ("lab-librdkafka", 2): 5,
                                                     ("lab-librdkafka", 3): 10}


def test_log_end_offset_of_an_empty_rolled_segment_is_its_base(tmp_path):
    partition = tmp_path / "t-0"
    partition.mkdir()
    (partition / "00000000000000000042.log").write_bytes(b"")
    assert logdir.log_end_offset(partition) == 42
    assert logdir.log_end_offset(tmp_path / "nothing-0") is None


def test_kafka_3_9_zookeeper_broker_with_magic_1_offsets_topic():
    """samples/kafka-3.9.2-legacy: inter.broker.protocol 0.10.0, so the group coordinator wrote
    __consumer_offsets as magic-1 messages; kafka-python and console consumers committed."""
    manifest = json.loads((need(LEGACY) / "manifest.json").read_text())
    steps = {s.get("label") or s["step"]: s for s in manifest["steps"]}
    rows = describe_offsets(steps["describe offsets"]["output"])
    states = {r["GROUP"]: r for block in describe_blocks(steps["describe state"]["output"])
              for r in block}
    view = read_log_dir(LEGACY / "logs")
    assert {g for g, group in view.groups.items() if group.exists} == set(states)
    for (group, topic, partition), row in rows.items():
        assert view.groups[group].offsets[(topic, partition)].offset == row["CURRENT-OFFSET"]
        assert view.log_end_offsets[(topic, partition)] == row["LOG-END-OFFSET"]
    for group, row in states.items():
        assert (view.groups[group].state, len(view.groups[group].members)) == (
            row["STATE"], row["#MEMBERS"])
    committed = steps["kafka_python_consume"]["committed"]
    assert {(c["topic"], c["partition"]): c["offset"] for c in committed} == {
        tp: c.offset for tp, c in view.groups["legacy-group"].offsets.items()}
    magics = set()
    for log in (LEGACY / "logs").glob("__consumer_offsets-*/*.log"):
        magics |= {unit["magic"] for kind, unit, _ in walk_segment(log.read_bytes())
                   if kind == "batch"}
    assert magics == {1}
