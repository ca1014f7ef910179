import json
from pathlib import Path

from kinspect.groups.model import (ABORTED, COMMITTED, CONSUMER, DELETED, PENDING, SUPERSEDED,
                                   Group, Member)
from kinspect.groups.replay import OffsetsReplay, derive_state
from kinspect.groups.sources import read_segments
from kinspect.storage.segment import walk_segment
from tests.unit.groups.handmade import (batch, classic_value, group_key, marker, offset_key,
                                        offset_value, replay_bytes)
from tests.unit.groups.oracles import (check_history_against_dump, committed_events,
                                       describe_offsets, dump_log_records)
from tests.unit.groups.sample_oracles import (EXPIRY, GROUP_METADATA_TYPES, KAFKA4, LEGACY,
                                              commits, coordinator, deleted_groups,
                                              described_offsets, described_states, dumped,
                                              group_of, last_group_metadata, need, offsets_dirs)


def replay_dir(directory: Path, **options):
    replay = OffsetsReplay(**options)
    for log in sorted(directory.glob("*.log")):
        replay_bytes_no_finish(replay, log.read_bytes(), str(log))
    return replay.finish()


def replay_bytes_no_finish(replay, data, source):
    for kind, item, problems in walk_segment(data, source):
        if kind == "batch":
            replay.batch(item, source)


def manifest_steps(sample: Path, step: str):
    manifest = json.loads((need(sample) / "manifest.json").read_text())
    return [s for s in manifest["steps"] if s["step"] == step]


# -- real data ------------------------------------------------------------------------------

def last_writes(records: list[dict]) -> tuple[dict, dict]:
    """Kafka's rules walked over kafka-dump-log's records in offset order: the last commit of a
    partition wins, a tombstone removes it; a transaction's commits apply at its COMMIT marker
    unless a plain commit of the partition was written after them; a group metadata record
    (classic, KIP-848, share) or its tombstone says whether the group is there."""
    committed, pending, alive = {}, {}, {}
    for record in records:
        if "marker" in record:
            done = pending.pop(record["producer_id"], {})
            for tp, (at, offset) in done.items() if record["marker"] == "COMMIT" else ():
                if tp not in committed or committed[tp][0] < at:
                    committed[tp] = (at, offset)
            continue
        key, payload = record["key"], record["payload"]
        group = group_of(record)
        if key["type"] in GROUP_METADATA_TYPES:
            alive[group] = payload is not None
        elif key["type"] in ("0", "1"):
            alive.setdefault(group, True)
            tp = (group, key["data"]["topic"], key["data"]["partition"])
            if payload is None:
                committed.pop(tp, None)
            elif record["transactional"]:
                pending.setdefault(record["producer_id"], {})[tp] = (record["offset"],
                                                                     payload["data"]["offset"])
            else:
                committed[tp] = (record["offset"], payload["data"]["offset"])
    return {tp: offset for tp, (_, offset) in committed.items()}, alive


def test_last_write_wins_over_every_offsets_partition_of_the_samples():
    """Kafka 4.1.2 (classic, KIP-848, share and transactional groups, deletions), its expired
    offsets, and Kafka 3.9.2's magic-1 __consumer_offsets, against kafka-dump-log's records."""
    walked = 0
    for sample in (KAFKA4, EXPIRY, LEGACY):
        for directory in offsets_dirs(sample):
            expected, alive = last_writes(dumped(directory))
            view = replay_dir(directory)
            got = {(g, t, p): c.offset for g, group in view.groups.items()
                   for (t, p), c in group.offsets.items()}
            assert got == expected, directory
            assert {g: not group.deleted for g, group in view.groups.items()} == alive, directory
            assert view.problems == [], directory
            walked += 1
    assert walked == 13


def test_sample_groups_end_empty_or_deleted():
    """Each group kafka-consumer-groups --describe --state showed (Kafka 4.1.2 and 3.9.2) has
    its state, protocol, generation and offsets; the deleted and the expired groups are Dead."""
    for sample in (KAFKA4, LEGACY):
        offsets = described_offsets(sample)
        for group, row in described_states(sample).items():
            directory = coordinator(sample, group)
            view = replay_dir(directory, history=True)
            got = view.groups[group]
            assert (got.state, len(got.members)) == (row["STATE"], row["#MEMBERS"]), group
            assert {(group, t, p): c.offset for (t, p), c in got.offsets.items()} == {
                key: r["CURRENT-OFFSET"] for key, r in offsets.items() if key[0] == group}
            records = dumped(directory)
            if any(r["key"]["type"] == "2" for r in records if group_of(r) == group):
                metadata = last_group_metadata(records, group)
                assert (got.protocol_type, got.epoch) == (metadata["protocolType"],
                                                          metadata["generation"]), group
            assert len(view.history) == len(commits(records))
    expired = {g for g, _, _ in described_offsets(EXPIRY, "describe before expiry")}
    ended = deleted_groups(KAFKA4) | expired
    assert ended == {"group-deleted", "group-consumer-deleted",
                     "expired-classic", "expired-consumer"}
    for group in ended:
        sample = EXPIRY if group in expired else KAFKA4
        gone = replay_dir(coordinator(sample, group)).groups[group]
        assert gone.state == "Dead" and gone.deleted and gone.offsets == {}, group


def test_every_group_of_the_lab_broker_agrees_with_kafka_consumer_groups_and_committed():
    logs = need(KAFKA4) / "logs"
    mine, states = {}, {}
    for directory in sorted(logs.glob("__consumer_offsets-*")):
        view = replay_dir(directory, history=True)
        assert [p for p in view.problems if p.severity != "info"] == []
        for group in view.groups.values():
            states[group.group_id] = group.state
            for (topic, partition), commit in group.offsets.items():
                mine[(group.group_id, topic, partition)] = commit
    [described] = [s for s in manifest_steps(KAFKA4, "kafka-consumer-groups")
                   if s["label"] == "describe offsets"]
    rows = describe_offsets(described["output"])
    assert rows and set(rows) == set(mine)
    for key, row in rows.items():
        assert mine[key].offset == row["CURRENT-OFFSET"], key
    committed = {}
    for step in manifest_steps(KAFKA4, "java_committed"):
        committed.update(committed_events(step["events"]))
    assert committed
    for key, seen in committed.items():
        if seen is None:
            assert key not in mine, key
        else:
            assert (mine[key].offset, mine[key].metadata) == (seen["offset"], seen["metadata"]), key
    [listed] = [s for s in manifest_steps(KAFKA4, "kafka-consumer-groups") if s["label"] == "list"]
    alive = {g for g, state in states.items() if state != "Dead"}
    assert set(listed["output"].split()) <= alive


def test_transactional_commits_of_the_lab_broker_commit_and_abort():
    """group-txn: commit {codec-none: 5}, abort {codec-none: 10, codec-gzip: 3}, commit
    {codec-lz4: 15 "txn"} (tools/make_samples.py), on the partition Kafka wrote them to."""
    view = replay_dir(need(KAFKA4) / "logs" / "__consumer_offsets-30", history=True)
    outcomes = [(c.topic, c.offset, c.outcome) for c in view.history]
    assert outcomes == [("codec-none", 5, COMMITTED), ("codec-none", 10, ABORTED),
                        ("codec-gzip", 3, ABORTED), ("codec-lz4", 15, COMMITTED)]
    group = view.groups["group-txn"]
    assert {tp: (c.offset, c.metadata) for tp, c in group.offsets.items()} == {
        ("codec-none", 0): (5, ""), ("codec-lz4", 0): (15, "txn")}
    assert group.protocol_type == "" and group.state == "Empty"  # a "simple" group
    assert all(c.producer_id >= 0 for c in view.history)


def test_consumer_protocol_group_members_assignment_and_deletion():
    logs = need(KAFKA4) / "logs"
    group = replay_dir(logs / "__consumer_offsets-6").groups["group-consumer"]
    assert group.kind == CONSUMER and group.state == "Empty" and group.members == {}
    assert group.epoch is not None and group.target_epoch is not None
    deleted = replay_dir(logs / "__consumer_offsets-18").groups["group-consumer-deleted"]
    assert deleted.deleted and deleted.state == "Dead" and deleted.offsets == {}


# -- the broker's rules, on hand-built records ----------------------------------------------

def test_transaction_commit_applies_abort_drops_and_open_stays_pending():
    data = (batch([(offset_key("g", "t", 0), offset_value(5))], 0)
            + batch([(offset_key("g", "t", 0), offset_value(8))], 1, producer_id=7, transactional=True)
            + batch([(offset_key("g", "t", 1), offset_value(3))], 2, producer_id=9, transactional=True)
            + marker(3, 9, commit=False)
            + batch([(offset_key("g", "t", 2), offset_value(4))], 4, producer_id=11, transactional=True))
    view = replay_bytes(OffsetsReplay(history=True), data)
    assert {tp: c.offset for tp, c in view.groups["g"].offsets.items()} == {("t", 0): 5}
    assert [c.outcome for c in view.history] == [COMMITTED, PENDING, ABORTED, PENDING]
    assert "pending" in view.notes[0]
    view = replay_bytes(OffsetsReplay(history=True), data + marker(5, 7, commit=True))
    assert {tp: c.offset for tp, c in view.groups["g"].offsets.items()} == {("t", 0): 8}


def test_a_plain_commit_written_after_a_pending_one_wins_when_the_transaction_commits():
    data = (batch([(offset_key("g", "t", 0), offset_value(8))], 0, producer_id=7, transactional=True)
            + batch([(offset_key("g", "t", 0), offset_value(6))], 1)
            + marker(2, 7, commit=True))
    view = replay_bytes(OffsetsReplay(history=True), data)
    assert view.groups["g"].offsets[("t", 0)].offset == 6
    assert [c.outcome for c in view.history] == [SUPERSEDED, COMMITTED]


def test_tombstones_delete_offsets_pending_commits_and_groups():
    data = (batch([(group_key("g"), classic_value(members=[("m-1", "client-1", "/10.0.0.1")])),
                   (offset_key("g", "t", 0), offset_value(5)),
                   (offset_key("g", "t", 1), offset_value(6))], 0)
            + batch([(offset_key("g", "t", 1), offset_value(9))], 3, producer_id=4, transactional=True)
            + batch([(offset_key("g", "t", 1), None)], 4)
            + marker(5, 4, commit=True))
    view = replay_bytes(OffsetsReplay(history=True), data)
    group = view.groups["g"]
    assert group.state == "Stable" and list(group.members) == ["m-1"]
    assert {tp: c.offset for tp, c in group.offsets.items()} == {("t", 0): 5}
    assert view.history[-1].outcome == DELETED and view.history[2].outcome == SUPERSEDED
    gone = replay_bytes(OffsetsReplay(), data + batch([(offset_key("g", "t", 0), None),
                                                       (group_key("g"), None)], 6))
    assert gone.groups["g"].state == "Dead" and not gone.groups["g"].exists
    again = replay_bytes(OffsetsReplay(), data + batch([(group_key("g"), None)], 6)
                         + batch([(offset_key("g", "t", 3), offset_value(1))], 8))
    assert again.groups["g"].protocol_type == "" and again.groups["g"].state == "Empty"


def test_one_group_is_replayed_alone():
    data = batch([(offset_key("a", "t", 0), offset_value(1)),
                  (offset_key("b", "t", 0), offset_value(2))], 0)
    replay = OffsetsReplay(group="b")
    view = replay_bytes(replay, data)
    assert list(view.groups) == ["b"] and replay.records == 1


def test_damage_is_reported_with_its_position_and_replay_goes_on():
    good = batch([(offset_key("g", "t", 0), offset_value(5))], 0)
    truncated = batch([(offset_key("g", "t", 1), offset_value(6)[:9])], 1)
    future = batch([(offset_key("g", "t", 2), b"\x00\x63" + offset_value(7)[2:])], 2)
    unknown_type = batch([(b"\x00\x63\x00\x01g", b"\x00\x00")], 3)
    corrupt = bytearray(batch([(offset_key("g", "t", 3), offset_value(8))], 4))
    corrupt[-3] ^= 0xFF
    after = batch([(offset_key("g", "t", 4), offset_value(9))], 5)
    data = good + truncated + future + unknown_type + bytes(corrupt) + after
    view = replay_bytes(OffsetsReplay(), data)
    assert {tp: c.offset for tp, c in view.groups["g"].offsets.items()} == {("t", 0): 5, ("t", 4): 9}
    checks = {p.check for p in view.problems}
    assert {"replay_record", "record_type", "replay_crc"} <= checks
    assert any("version 99 is unknown" in p.what for p in view.problems)
    positions = {p.offset for p in view.problems}
    assert len(good) in positions  # the truncated value's batch
    assert len(good + truncated + future + unknown_type) in positions  # the corrupt batch


def test_batches_out_of_offset_order_are_flagged():
    data = batch([(offset_key("g", "t", 0), offset_value(5))], 7) + \
        batch([(offset_key("g", "t", 0), offset_value(3))], 2)
    view = replay_bytes(OffsetsReplay(), data)
    assert [p.check for p in view.problems] == ["replay_order"]


def test_consumer_group_states_follow_epochs_and_member_states():
    group = Group("g", CONSUMER, epoch=3, target_epoch=3)
    assert derive_state(group) == "Empty"
    group.members["m"] = Member("m", member_epoch=3, member_state=0)
    assert derive_state(group) == "Stable"
    group.members["m"].member_state = 1
    assert derive_state(group) == "Reconciling"
    group.epoch = 4
    assert derive_state(group) == "Assigning"


def test_every_commit_record_agrees_with_the_samples_kafka_dump_log_output():
    """samples/ keep kafka-dump-log --offsets-decoder's output beside each segment."""
    compared = 0
    for directory in sorted(need(KAFKA4).parent.glob("*/logs/__consumer_offsets-*")):
        logs = sorted(directory.glob("*.log"))
        view = read_segments(logs, history=True)
        records = []
        for log in logs:
            records += dump_log_records(log.with_name(log.name + ".dump.txt").read_text())
        compared += check_history_against_dump(records, view.history)
    assert compared > 100
