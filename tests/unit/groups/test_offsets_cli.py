"""kinspect offsets (kinspect/cli/offsets.py), invoked through click as a user would."""

import json

from click.testing import CliRunner

from kinspect.cli.offsets import offsets
from kinspect.groups.partition import partition_for
from tests.conftest import KAFKAFUN, PCAPS



def invoke(*args):
    result = CliRunner().invoke(offsets, [str(a) for a in args])
    return result


def lines(result):
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_describe_a_group_from_a_log_dir_as_json():
    result = invoke("third", "--log-dir", KAFKAFUN, "--json")
    assert result.exit_code == 0, result.output
    records = lines(result)
    assert records[0] == {"type": "notice", "kind": "note",
                          "what": "group third is in __consumer_offsets-39 (abs(hashCode) % 50)"}
    rows = [r for r in records if r["type"] == "offset"]
    assert [(r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"])
            for r in rows] == [("first", 0, 7, 9, 2), ("first", 1, 11, 11, 0),
                               ("first", 2, 7, 7, 0), ("first_topic", 0, 3, 3, 0)]
    assert rows[0]["committed_at"] == "2020-09-10T22:57:54.777Z"
    assert rows[0]["record_offset"] is not None and rows[0]["consumer_id"] is None


def test_describe_as_a_table_like_kafka_consumer_groups():
    result = invoke("third", "--log-dir", KAFKAFUN)
    assert result.exit_code == 0
    header = next(line for line in result.stdout.splitlines() if line.startswith("GROUP"))
    assert header.split()[:9] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                  "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert "third  first" in result.stdout.replace("   ", "  ")


def test_no_group_lists_every_group_with_state_and_partition_count():
    result = invoke("--log-dir", KAFKAFUN, "--json")
    groups = {r["group"]: r for r in lines(result) if r["type"] == "group"}
    assert groups["third"]["state"] == "Empty" and groups["third"]["partitions"] == 4
    assert groups["console-consumer-51959"]["state"] == "Dead"
    assert result.exit_code == 0


def test_state_members_and_history():
    result = invoke("third", "--log-dir", KAFKAFUN, "--json", "--state", "--history")
    records = lines(result)
    [state] = [r for r in records if r["type"] == "group"]
    assert state["coordinator"] == "__consumer_offsets-39" and state["epoch"] == 8
    history = [r for r in records if r["type"] == "commit"]
    assert len(history) > 100 and all(r["group"] == "third" for r in history)
    assert [r["record_offset"] for r in history] == sorted(r["record_offset"] for r in history)
    assert all(r["source"].endswith(".log") and r["position"] is not None for r in history)
    assert not [r for r in records if r["type"] == "offset"]


def test_segment_files_after_the_group(tmp_path):
    segment = KAFKAFUN / "__consumer_offsets-39" / "00000000000000000000.log"
    result = invoke("third", segment, "--json")
    assert result.exit_code == 0, result.output
    assert len([r for r in lines(result) if r["type"] == "offset"]) == 4


def test_capture_source():
    result = invoke("lab-librdkafka-group", "--capture",
                    PCAPS / "librdkafka-produce-consume.pcapng", "--json")
    assert result.exit_code == 0
    assert {(r["partition"], r["current_offset"]) for r in lines(result)
            if r["type"] == "offset"} == {(1, 10), (2, 5), (3, 10)}


def test_exit_codes(tmp_path):
    assert invoke("third").exit_code == 2                                       # no source
    assert invoke("third", "--log-dir", KAFKAFUN, "--bootstrap", "x:1").exit_code == 2
    assert invoke("third", "--log-dir", tmp_path / "missing").exit_code == 3
    assert invoke("nobody", "--log-dir", KAFKAFUN).exit_code == 1               # not found
    assert invoke("third", "--bootstrap", "127.0.0.1:1").exit_code == 3         # unreachable
    damaged = tmp_path / "__consumer_offsets-39"
    damaged.mkdir()
    data = (KAFKAFUN / "__consumer_offsets-39" / "00000000000000000000.log").read_bytes()
    (damaged / "00000000000000000000.log").write_bytes(data[:-40])
    result = invoke("third", damaged / "00000000000000000000.log", "--json")
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
    result = invoke("console-consumer-51959", "--log-dir", KAFKAFUN, "--state", "--json")
    assert result.exit_code == 0
    [state] = [r for r in lines(result) if r["type"] == "group"]
    assert state["state"] == "Dead" and state["deleted"]
    assert "was deleted" in result.stderr
