import json
import re

from kinspect.storage.dump import DumpOptions, dump_file, increment_sequence
from kinspect.storage.files import describe
from tests.unit.records.handmade import record, record_body, v2_batch
from tests.conftest import SAMPLES
from tests.unit.storage.conftest import (KAFKA4, LEGACY, SEGMENT, dump_lines, events, need, of_type,
                                         oracle_batches, oracle_index, problems_of, sample_roots)

# an __consumer_offsets record as kafka-dump-log --offsets-decoder prints it
OFFSETS_RECORD = re.compile(r'^\| offset: (\d+) .* key: (\{"type":"\d+","data":\{[^{}]*\}\}) '
                            r'payload: (?:<DELETE>|\{"version":"(\d+)")')


def _logs(pattern: str = "*") -> list:
    return [log for root in sample_roots() for log in sorted(root.glob(f"{pattern}/*.log"))]


def _oracle_records(log) -> list[int]:
    return [int(n) for n in re.findall(r"^\| offset: (\d+)", "\n".join(dump_lines(log)), re.M)]


def test_segment_events_and_summary():
    logs = _logs()
    assert len(logs) > 40
    for log in logs:
        found = events(log)
        topic, _, partition = log.parent.name.rpartition("-")
        assert found[0]["type"] == "file" and (found[0]["topic"], found[0]["partition"]) == (
            topic, int(partition)), log
        expected, records = oracle_batches(log), _oracle_records(log)
        batches = of_type(found, "batch")
        assert [(b["position"], b["crc"]) for b in batches] == [
            (b["position"], b["crc"]) for b in expected], log
        assert all(b["crc_valid"] for b in batches) and "records" not in batches[0], log
        summary = found[-1]
        assert summary["type"] == "summary" and summary["items"] == len(expected), log
        first = min(records + [b["base_offset"] for b in expected if b["base_offset"] is not None])
        assert (summary["record_count"], summary["first_offset"], summary["last_offset"]) == (
            len(records), first, expected[-1]["last_offset"]), log
        counts = summary["problem_counts"]
        assert (counts["error"], counts["warning"]) == (0, 0), log
        if log.parent.name != "compacted-0":  # the cleaner's empty batch: an info
            assert counts["info"] == 0, log


def test_records_and_internal_decoding_with_data():
    """Every __consumer_offsets record of the samples decodes to the type, group and value
    version kafka-dump-log --offsets-decoder gave it (None: a tombstone)."""
    names = set()
    for log in _logs("__consumer_offsets-*"):
        found = events(log, records=True, data=True)
        assert problems_of(found) == [], log
        records = [r for b in of_type(found, "batch") if not b.get("is_control")
                   for r in b["records"]]
        got = []
        for r in records:
            decoded = r["decoded"]
            names.add(decoded["record_name"])
            group = decoded["key"].get("group", decoded["key"].get("group_id"))
            version = None if decoded["tombstone"] else decoded["value_version"]
            got.append((r["offset"], decoded["record_type"], group, version))
        expected = []
        for line in dump_lines(log):
            match = OFFSETS_RECORD.match(line)
            if match:
                key = json.loads(match[2])
                expected.append((int(match[1]), int(key["type"]),
                                 key["data"].get("group", key["data"].get("groupId")),
                                 None if match[3] is None else int(match[3])))
        assert got == expected, log
        plain = events(log, records=True)
        assert all("decoded" not in r for b in of_type(plain, "batch") for r in b["records"])
    assert {"GroupMetadata", "OffsetCommit", "ConsumerGroupMemberMetadata"} <= names


def test_kraft_snapshot_frame_is_checked():
    directory = need(KAFKA4 / "__cluster_metadata-0")
    snapshot = sorted(directory.glob("*.checkpoint"))[0]
    found = events(snapshot)
    assert found[0]["end_offset"] == int(snapshot.name[:20]) and found[0]["epoch"] == 1
    assert problems_of(found) == []
    batches = of_type(found, "batch")
    assert batches[0]["control"]["type"] == "SNAPSHOT_HEADER"
    assert batches[-1]["control"]["type"] == "SNAPSHOT_FOOTER"


def test_cut_off_kraft_snapshot(tmp_path):
    snapshot = sorted(need(KAFKA4 / "__cluster_metadata-0").glob("*.checkpoint"))[0]
    cut = tmp_path / snapshot.name
    cut.write_bytes(snapshot.read_bytes()[:-40])
    checks = [p.get("check") for p in problems_of(events(cut))]
    assert checks.count("kraft_snapshot") == 1 and "damage" in checks


def test_index_without_its_log_is_a_warning(tmp_path):
    sample = KAFKA4 / "__cluster_metadata-0" / "00000000000000000000.index"
    index = tmp_path / sample.name
    index.write_bytes(need(sample).read_bytes())
    found = events(index)
    assert [p["check"] for p in problems_of(found)] == ["index_log"]
    assert [(e["offset"], e["position"]) for e in of_type(found, "index_entry")] == oracle_index(
        sample)


def test_txnindex_markers_checked_against_the_log():
    found = events(need(KAFKA4 / "transactions-1" / "00000000000000000000.txnindex"))
    assert len(of_type(found, "aborted_txn")) == 2 and problems_of(found) == []


def test_legacy_records_carry_their_crcs():
    found = events(need(LEGACY / "legacy-v1-gzip-0" / SEGMENT), records=True)
    records = [r for b in of_type(found, "batch") for r in b["records"]]
    assert all(isinstance(r["crc"], int) and r["crc_valid"] for r in records)
    assert len({r["crc"] for r in records}) == len(records)


def test_shallow_walk_skips_records_and_crc():
    for log in _logs():
        found = events(log, shallow=True, checks=False)
        batches = of_type(found, "batch")
        assert [b["position"] for b in batches] == [b["position"] for b in oracle_batches(log)]
        assert all(b["crc_valid"] is None and "records" not in b for b in batches), log


def test_every_file_of_every_log_dir_dumps_without_exceptions():
    roots = sorted(SAMPLES.glob("*/logs"))
    assert set(sample_roots()) < set(roots)
    kinds = set()
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            found = events(path, records=True, data=True)
            kinds.add(found[0]["kind"])
            assert found[-1]["type"] == "summary"
            if found[0]["kind"] is not None and not path.name.endswith(".dump.txt"):
                errors = problems_of(found, ("error",))
                assert errors == [], (path, errors[:2])
    assert {"log", "index", "timeindex", "producer_snapshot", "leader_epoch_checkpoint",
            "offset_checkpoint", "partition_metadata", "meta_properties"} <= kinds


def test_sequence_wraps_like_kafka():
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(2**31 - 2, 3) == 1


def test_each_record_gets_its_sizes_and_its_sequence_wrapping_past_int32_max(tmp_path):
    """A producer's batch starting two below INT32_MAX: its records' sequences wrap to 0, as
    their batch's last_sequence does; null and empty keys and values sized -1 and 0."""
    bodies = [record_body(0, 0, None, b"value"), record_body(1, 0, b"", None),
              record_body(2, 0, b"key", b""), record_body(3, 0, b"k", b"v")]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(v2_batch(b"".join(record(b) for b in bodies), 4, base_offset=10,
                              producer_id=7, producer_epoch=0, base_sequence=2**31 - 2)
                     + v2_batch(record(record_body()), 1, base_offset=14))
    first, second = [e for e in dump_file(path.name, path.read_bytes(), describe(path),
                                          DumpOptions(records=True), lambda suffix: None)
                     if e["type"] == "batch"]
    assert first["last_sequence"] == 1 and second["last_sequence"] == -1
    assert [(r["key_size"], r["value_size"], r["sequence"]) for r in first["records"]] == [
        (-1, 5, 2**31 - 2), (0, -1, 2**31 - 1), (3, 0, 0), (1, 1, 1)]
    assert [(r["key_size"], r["value_size"], r["sequence"]) for r in second["records"]] == [(1, 1, -1)]


def test_control_records_carry_their_value_decoded_as_its_struct():
    snapshot = need(KAFKA4 / "__cluster_metadata-0" / "00000000000000000037-0000000001.checkpoint")
    header = of_type(events(snapshot, records=True), "batch")[0]
    assert header["control"]["type"] == "SNAPSHOT_HEADER"
    [record] = header["records"]
    printed = next(line for line in dump_lines(snapshot) if " SnapshotHeader {" in line)
    printed = json.loads(printed.split(" SnapshotHeader ", 1)[1])
    assert record["control_value"] == {"struct": "SnapshotHeaderRecord", "version": 0,
                                       "data": {"version": printed["version"],
                                                "last_contained_log_timestamp":
                                                    printed["lastContainedLogTimestamp"]}}
    data_batches = [b for b in of_type(events(snapshot, records=True), "batch") if not b["is_control"]]
    assert all("control_value" not in r for b in data_batches for r in b["records"])
