from kinspect.render.dump_lines import TableFormat
from tests.unit.storage.conftest import KAFKAFUN, SEGMENT, events


def _plain(formatter, found):
    return [text.plain for event in found for text in formatter.lines(event)]


def test_segment_lines_with_records_and_data():
    found = events(KAFKAFUN / "first-1" / SEGMENT, records=True, data=True)
    lines = _plain(TableFormat(data=True), found)
    assert lines[0].startswith(f"\n{KAFKAFUN / 'first-1' / SEGMENT}  (segment, 682 bytes")
    assert lines[1].split() == ["POSITION", "OFFSETS", "COUNT", "SIZE", "CODEC", "MAX",
                                "TIMESTAMP", "(UTC)", "TYPE", "PRODUCER", "FLAGS", "CRC"]
    assert lines[2].split()[:5] == ["0", "0", "1", "73", "none"] and lines[2].endswith("ok")
    assert lines[3].strip() == "offset 0  2020-09-09T22:00:44.740Z  key=null value=hello"
    assert lines[-1] == "9 batches, 11 records, offsets 0..10; no problems"


def test_internal_records_and_checkpoints():
    found = events(KAFKAFUN / "__consumer_offsets-27" / SEGMENT, records=True, data=True)
    lines = _plain(TableFormat(data=True), found)
    assert any("OffsetCommit {\"group\":\"my-second-app\",\"topic\":\"first\",\"partition\":2}"
               " → {\"offset\":6," in line for line in lines)
    lines = _plain(TableFormat(), events(KAFKAFUN / "replication-offset-checkpoint"))
    assert lines[1] == "version 0, 54 entries"
    assert lines[2].split() == ["TOPIC", "PARTITION", "OFFSET"]
    assert "__consumer_offsets" in lines[3] and lines[-1] == "54 entries; no problems"


def test_damage_line():
    damage = {"type": "damage", "file": "f", "position": 149, "size": 80, "resumed_at": 229,
              "what": "unknown magic 103", "problems": []}
    assert [t.plain for t in TableFormat().lines(damage)] == [
        "         149 DAMAGE: 80 bytes skipped to the next valid batch at 229 "
        "(unknown magic 103)"]
