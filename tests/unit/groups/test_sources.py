import json
import shutil

import pytest

from kinspect.groups import logdir
from kinspect.groups.sources import SourceUnreadable, read_capture, read_log_dir, read_segments
from kinspect.storage.segment import walk_segment
from kinspect.groups.partition import partition_for
from tests.conftest import PCAPS
from tests.unit.groups.handmade import batch, offset_key, offset_value
from tests.unit.groups.oracles import describe_blocks, describe_offsets
from tests.unit.groups.sample_oracles import (EXPIRY, KAFKA4, LEGACY, SEGMENT, commits,
                                              coordinator, deleted_groups, described_offsets,
                                              dumped, labelled, need, offsets_dirs, steps)


def offsets(view, group):
    return {tp: c.offset for tp, c in view.groups[group].offsets.items()}


def test_log_dir_picks_the_groups_partition_and_says_which():
    view = read_log_dir(KAFKA4 / "logs", "group-read-committed")
    where = coordinator(KAFKA4, "group-read-committed").name
    assert view.notes == [f"group group-read-committed is in {where} (abs(hashCode) % 50)"]
    assert list(view.groups) == ["group-read-committed"]
    assert view.groups["group-read-committed"].coordinator == where
    # log end offsets from the topic partitions' own segments
    assert view.log_end_offsets == {(t, p): row["LOG-END-OFFSET"]
                                    for (g, t, p), row in described_offsets(KAFKA4).items()
                                    if g == "group-read-committed"}


def test_log_dir_without_a_group_lists_every_group():
    """kafka-consumer-groups --list names the consumer groups; the share group is not one, and
    the two deleted groups (a tombstone for their metadata) exist no more."""
    view = read_log_dir(KAFKA4 / "logs")
    listed = set(labelled(KAFKA4, "list")["output"].split())
    shared = {s["properties"]["group.id"] for s in steps(KAFKA4) if s["step"] == "java_share"}
    assert {g for g, group in view.groups.items() if group.exists} == listed | shared
    assert {g for g, group in view.groups.items() if not group.exists} == \
        deleted_groups(KAFKA4) == {"group-deleted", "group-consumer-deleted"}


def test_a_wrong_partition_count_still_finds_the_group_and_says_so():
    where = coordinator(KAFKA4, "group-classic").name
    held = {d.name for d in offsets_dirs(KAFKA4)}
    # 7 partitions: the partition is not in the log dir; 16: it is there, holding another group
    for count, there in ((7, False), (16, True)):
        assert (f"__consumer_offsets-{partition_for('group-classic', count)}" in held) == there
        view = read_log_dir(KAFKA4 / "logs", "group-classic", partitions=count)
        assert "group-classic" in view.groups
        assert f"found in {where}" in view.notes[0] and "--partitions" in view.notes[0]
        assert ("does not hold it" in view.notes[0]) == there
    missing = read_log_dir(KAFKA4 / "logs", "no-such-group")
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
    directory = coordinator(KAFKA4, "group-classic")
    view = read_segments([directory / SEGMENT], "group-classic")
    assert offsets(view, "group-classic") == {
        (t, p): row["CURRENT-OFFSET"] for (g, t, p), row in described_offsets(KAFKA4).items()
        if g == "group-classic"}
    assert offsets(view, "group-classic") == offsets(read_log_dir(KAFKA4 / "logs",
                                                                  "group-classic"), "group-classic")
    assert view.log_end_offsets  # the log dir around the partition is used when there
    copy = tmp_path / "elsewhere.log"
    shutil.copy(directory / SEGMENT, copy)
    alone = read_segments([copy], "group-classic")
    assert offsets(alone, "group-classic") == offsets(view, "group-classic")
    assert alone.log_end_offsets == {}


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
    """64 bytes overwritten in the middle, 37 cut off the end: every commit whose batch
    (kafka-dump-log's positions) is untouched is still replayed, and only those."""
    source = coordinator(KAFKA4, "group-classic")
    logs = tmp_path / "logs"
    shutil.copytree(source, logs / source.name)
    segment = logs / source.name / SEGMENT
    data = bytearray(segment.read_bytes())
    middle, end = len(data) // 2, len(data) - 37
    data[middle:middle + 64] = b"\xee" * 64
    segment.write_bytes(bytes(data[:end]))
    view = read_log_dir(logs, "group-classic", history=True)
    assert {p.check for p in view.problems} & {"damage", "crc", "replay_crc"}
    assert all(p.offset is not None for p in view.problems if p.severity == "error")
    records = commits(dumped(source), "group-classic")
    starts = sorted({r["position"] for r in dumped(source)}) + [len(data)]
    ends = {start: following for start, following in zip(starts, starts[1:])}
    sound = [r["offset"] for r in records if ends[r["position"]] <= middle
             or (r["position"] >= middle + 64 and ends[r["position"]] <= end)]
    assert sound and any(offset > records[len(records) // 2]["offset"] for offset in sound)
    assert [c.record_offset for c in view.history] == sound
    assert offsets(view, "group-classic")


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
