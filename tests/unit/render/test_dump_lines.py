import json
from datetime import datetime, timezone

from kinspect.render.dump_lines import TableFormat
from tests.samples_oracle import counts, dump_lines, oracle
from tests.unit.storage.conftest import KAFKA4, SEGMENT, events, need


def _plain(formatter, found):
    return [text.plain for event in found for text in formatter.lines(event)]


def _sent(producer: str) -> list[dict]:
    """The records a producer of the main sample sent, as its RecordMetadata reported them."""
    manifest = json.loads(need(KAFKA4.parent / "manifest.json").read_text())
    [step] = [s for s in manifest["steps"] if s["step"] == "java_produce" and s["name"] == producer]
    return [e for e in step["events"] if e["event"] == "sent"]


def _utc(millis: int) -> str:
    return datetime.fromtimestamp(millis / 1000, timezone.utc).isoformat(timespec="milliseconds")[:-6] + "Z"


def test_segment_lines_with_records_and_data():
    path = need(KAFKA4 / "codec-none-0" / SEGMENT)
    found = events(path, records=True, data=True)
    lines = _plain(TableFormat(data=True), found)
    assert lines[0] == f"\n{path}  (segment, {path.stat().st_size:,} bytes, topic codec-none partition 0)"
    assert lines[1].split() == ["POSITION", "OFFSETS", "COUNT", "SIZE", "CODEC", "MAX",
                                "TIMESTAMP", "(UTC)", "TYPE", "PRODUCER", "FLAGS", "CRC"]
    batches, sent = oracle(path), _sent("codec-none")
    first = batches[0]
    assert lines[2].split()[:5] == [first["position"], f"{first['baseOffset']}..{first['lastOffset']}",
                                    first["count"], first["size"], first["compresscodec"]]
    assert lines[2].split()[5] == _utc(int(first["CreateTime"])) and lines[2].endswith("ok")
    records = [line.strip() for line in lines if line.lstrip().startswith("offset ")]
    assert len(records) == len(sent) == counts(path)[1]
    for line, record in zip(records, sent):
        headers = " ".join(f"{k}={v}" for k, v in record["headers"])
        assert line == (f"offset {record['offset']}  {_utc(record['timestamp'])}  "
                        f"key={record['key'] or 'null'} value={record['value']}"
                        + (f"  headers {headers}" if headers else "")).strip()
    last = batches[-1]["lastOffset"]
    assert lines[-1] == f"{len(batches)} batches, {len(sent)} records, offsets 0..{last}; no problems"


def _compact(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def test_internal_records_and_checkpoints():
    """Every offset commit in group-classic's __consumer_offsets partition (commits with
    metadata, then --delete-offsets' tombstones), as kafka-dump-log's offsets decoder read it;
    the broker's replication-offset-checkpoint (plain text) entry by entry."""
    path = need(KAFKA4 / "__consumer_offsets-24" / SEGMENT)
    expected = []
    for line in dump_lines(path):
        if line.startswith("| offset: ") and ' key: {"type":"1",' in line:  # an offset commit
            fields = line.split()
            key, _, value = line.split(" key: ", 1)[1].partition(" payload: ")
            if value == "<DELETE>":
                shown = "tombstone"
            else:
                data = json.loads(value)["data"]
                shown = _compact({"offset": data["offset"], "leader_epoch": data["leaderEpoch"],
                                  "metadata": data["metadata"], "commit_timestamp": data["commitTimestamp"]})
            expected.append(f"offset {fields[2]}  {_utc(int(fields[4]))}  "
                            f"OffsetCommit {_compact(json.loads(key)['data'])} → {shown}")
    lines = _plain(TableFormat(data=True), events(path, records=True, data=True))
    assert [line.strip() for line in lines if "OffsetCommit" in line] == expected
    assert len(expected) > 20 and expected[-1].endswith("tombstone")

    checkpoint = need(KAFKA4 / "replication-offset-checkpoint")
    version, count, *entries = checkpoint.read_text().splitlines()
    lines = _plain(TableFormat(), events(checkpoint))
    assert lines[1] == f"version {version}, {count} entries"
    assert lines[2].split() == ["TOPIC", "PARTITION", "OFFSET"]
    assert [line.split() for line in lines[3:-1]] == [entry.split() for entry in entries]
    assert lines[-1] == f"{count} entries; no problems"


def test_damage_line():
    damage = {"type": "damage", "file": "f", "position": 149, "size": 80, "resumed_at": 229,
              "what": "unknown magic 103", "problems": []}
    assert [t.plain for t in TableFormat().lines(damage)] == [
        "         149 DAMAGE: 80 bytes skipped to the next valid batch at 229 "
        "(unknown magic 103)"]
