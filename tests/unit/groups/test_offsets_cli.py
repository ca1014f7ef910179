"""kinspect offsets (kinspect/cli/offsets.py), invoked through click as a user would."""

import json

from click.testing import CliRunner

from kinspect.cli.offsets import offsets
from kinspect.groups.partition import partition_for
from tests.conftest import PCAPS
from tests.unit.groups.oracles import describe_blocks
from tests.unit.groups.sample_oracles import (KAFKA4, SEGMENT, commits, coordinator,
                                              deleted_groups, described_offsets,
                                              described_states, dumped, iso_millis,
                                              last_group_metadata)

LOGS = KAFKA4 / "logs"


def invoke(*args):
    result = CliRunner().invoke(offsets, [str(a) for a in args])
    return result


def lines(result):
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_describe_every_group_from_a_log_dir_as_json():
    """Every group kafka-consumer-groups --describe --all-groups showed, row for row; each row's
    record is the commit kafka-dump-log printed at that offset."""
    described = described_offsets(KAFKA4)
    for group in sorted({g for g, _, _ in described}):
        result = invoke(group, "--log-dir", LOGS, "--json")
        assert result.exit_code == 0, result.output
        records = lines(result)
        where = coordinator(KAFKA4, group)
        assert records[0] == {"type": "notice", "kind": "note",
                              "what": f"group {group} is in {where.name} (abs(hashCode) % 50)"}
        rows = [r for r in records if r["type"] == "offset"]
        expected = sorted((t, p, row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"])
                          for (g, t, p), row in described.items() if g == group)
        assert [(r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"])
                for r in rows] == expected
        by_offset = {r["offset"]: r for r in commits(dumped(where))}
        for row in rows:
            record = by_offset[row["record_offset"]]
            assert (record["key"]["data"]["topic"], record["key"]["data"]["partition"],
                    record["payload"]["data"]["offset"]) == (row["topic"], row["partition"],
                                                            row["current_offset"])
            assert row["committed_at"] == iso_millis(record["payload"]["data"]["commitTimestamp"])
            assert row["consumer_id"] is None  # the group is empty: '-' in Kafka's table


def test_describe_as_a_table_like_kafka_consumer_groups():
    result = invoke("group-read-committed", "--log-dir", LOGS)
    assert result.exit_code == 0
    header = next(line for line in result.stdout.splitlines() if line.startswith("GROUP"))
    assert header.split()[:9] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                  "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    columns = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
               "CONSUMER-ID", "HOST", "CLIENT-ID"]
    [block] = describe_blocks(result.stdout[result.stdout.index("GROUP"):])
    ours = {(r["GROUP"], r["TOPIC"], r["PARTITION"]): [r[c] for c in columns] for r in block}
    theirs = {key: [row[c] for c in columns] for key, row in described_offsets(KAFKA4).items()
              if key[0] == "group-read-committed"}
    assert ours == theirs and len(ours) == 3


def test_no_group_lists_every_group_with_state_and_partition_count():
    result = invoke("--log-dir", LOGS, "--json")
    assert result.exit_code == 0
    groups = {r["group"]: r for r in lines(result) if r["type"] == "group"}
    described = described_offsets(KAFKA4)
    for group, row in described_states(KAFKA4).items():
        assert groups[group]["state"] == row["STATE"], group
        assert groups[group]["members"] == row["#MEMBERS"], group
        assert groups[group]["partitions"] == sum(g == group for g, _, _ in described), group
    deleted = deleted_groups(KAFKA4)
    assert deleted == {"group-deleted", "group-consumer-deleted"}
    for group in deleted:
        assert groups[group]["state"] == "Dead" and groups[group]["deleted"], group


def test_state_members_and_history():
    result = invoke("group-classic", "--log-dir", LOGS, "--json", "--state", "--history")
    records = lines(result)
    where = coordinator(KAFKA4, "group-classic")
    [state] = [r for r in records if r["type"] == "group"]
    metadata = last_group_metadata(dumped(where), "group-classic")
    assert state["coordinator"] == where.name and state["epoch"] == metadata["generation"]
    assert state["state"] == described_states(KAFKA4)["group-classic"]["STATE"]
    assert state["members"] == len(metadata["members"])
    history = [r for r in records if r["type"] == "commit"]
    assert [r["record_offset"] for r in history] == [
        r["offset"] for r in commits(dumped(where), "group-classic")]
    assert all(r["group"] == "group-classic" for r in history)
    assert all(r["source"].endswith(".log") and r["position"] is not None for r in history)
    assert not [r for r in records if r["type"] == "offset"]


def test_segment_files_after_the_group(tmp_path):
    segment = coordinator(KAFKA4, "group-classic") / SEGMENT
    result = invoke("group-classic", segment, "--json")
    assert result.exit_code == 0, result.output
    assert {(r["topic"], r["partition"], r["current_offset"])
            for r in lines(result) if r["type"] == "offset"} == {
        (t, p, row["CURRENT-OFFSET"]) for (g, t, p), row in described_offsets(KAFKA4).items()
        if g == "group-classic"}


def test_capture_source():
    result = invoke("lab-librdkafka-group", "--capture",
                    PCAPS / "librdkafka-produce-consume.pcapng", "--json")
    assert result.exit_code == 0
    assert {(r["partition"], r["current_offset"]) for r in lines(result)
            if r["type"] == "offset"} == {(1, 10), (2, 5), (3, 10)}


def test_exit_codes(tmp_path):
    assert invoke("group-classic").exit_code == 2                                # no source
    assert invoke("group-classic", "--log-dir", LOGS, "--bootstrap", "x:1").exit_code == 2
    assert invoke("group-classic", "--log-dir", tmp_path / "missing").exit_code == 3
    assert invoke("nobody", "--log-dir", LOGS).exit_code == 1                    # not found
    assert invoke("group-classic", "--bootstrap", "127.0.0.1:1").exit_code == 3  # unreachable
    where = coordinator(KAFKA4, "group-classic")
    damaged = tmp_path / where.name
    damaged.mkdir()
    (damaged / SEGMENT).write_bytes((where / SEGMENT).read_bytes()[:-40])
    result = invoke("group-classic", damaged / SEGMENT, "--json")
    assert result.exit_code == 1
    assert any(r["type"] == "notice" and r["kind"] == "problem" and r["offset"] is not None
               for r in lines(result))


def test_partition_for():
    result = invoke("partition-for", "third", "组-消费者", "polygenelubricants", "--json")
    assert result.exit_code == 0
    assert [(r["group"], r["partition"]) for r in lines(result)] == [
        ("third", 39), ("组-消费者", partition_for("组-消费者")), ("polygenelubricants", 0)]
    assert invoke("partition-for", "third", "--partitions", "7").stdout.split()[1] == \
        "__consumer_offsets-4"  # 110331239 % 7
    assert invoke("partition-for", "g", "--partitions", "0").exit_code == 2


def test_help_shows_examples():
    result = invoke("--help")
    assert result.exit_code == 0 and "kinspect offsets my-app --log-dir" in result.stdout
    assert "partition-for" in result.stdout
    assert "Exit codes" in invoke("show", "--help").stdout


def test_a_deleted_group_is_shown_dead_with_a_warning():
    """A classic and a KIP-848 group deleted with kafka-consumer-groups --delete."""
    deleted = deleted_groups(KAFKA4)
    assert deleted == {"group-deleted", "group-consumer-deleted"}
    for group in sorted(deleted):
        result = invoke(group, "--log-dir", LOGS, "--state", "--json")
        assert result.exit_code == 0
        [state] = [r for r in lines(result) if r["type"] == "group"]
        assert state["state"] == "Dead" and state["deleted"], group
        assert state["coordinator"] == coordinator(KAFKA4, group).name
        assert f"group '{group}' was deleted" in result.stderr
