"""rotation.py: rotating files decoded with connections stitched across neighbours, each exchange
given out by one file."""

import os

import pytest

from kinspect.capture.source import open_capture
from kinspect.capture.write import RotatingRecording
from kinspect.spark.plan import Input
from kinspect.spark.reading import rotation_units, stream_end, stream_partitions
from kinspect.spark.rotation import listed, order, owned, rotation_rows
from kinspect.spark.rows import EXCHANGES
from kinspect.spark.task import file_rows
from tests.conftest import PCAPS

LEGACY = PCAPS / "kafka39-legacy.pcap"  # microsecond pcap: rewritten as pcapng, its times stay exact


def _rotated(directory, capture=LEGACY, max_bytes=15_000) -> list[str]:
    recording = RotatingRecording(open_capture(str(capture)), str(directory / "ring.pcapng"), max_bytes=max_bytes)
    for _ in recording.packets():
        pass
    recording.close()
    return recording.files


def _rows(rows) -> list[tuple]:
    return sorted(tuple(str(row[name]) for name in EXCHANGES.names if name != "capture") for row in rows
                  if row["table"] == "exchanges")


def test_rotated_files_give_the_exchanges_of_the_whole_capture(tmp_path):
    files = _rotated(tmp_path)
    assert len(files) == 9
    whole = _rows(file_rows(Input(str(LEGACY), LEGACY.stat().st_size)))
    stitched = _rows(row for unit in rotation_units([str(tmp_path)]) for row in rotation_rows(*unit[1:]))
    assert stitched == whole
    # each file alone: the exchanges that straddle two files are cut in two
    alone = _rows(row for f in files for row in file_rows(Input(f, os.path.getsize(f))))
    assert alone != whole


def test_names_sort_in_writing_order(tmp_path):
    assert sorted(["r_10.pcap", "r_9.pcap", "r_00011_2026.pcap"], key=order) == \
        ["r_9.pcap", "r_10.pcap", "r_00011_2026.pcap"]
    for name in ("b_2.pcap", "b_10.pcap", ".b_11.pcap", "notes.txt"):
        (tmp_path / name).write_bytes(LEGACY.read_bytes() if name.endswith("pcap") else b"text")
    assert [os.path.basename(f) for f in listed(str(tmp_path))] == ["b_2.pcap", "b_10.pcap"]


@pytest.mark.parametrize("record, prev_final, final, here", [
    ({"request_time": 5, "response_time": 12}, False, False, True),  # answered in this file
    ({"request_time": 5, "response_time": 9}, False, False, False),  # answered in the one before
    ({"request_time": 12, "response_time": None, "response_expected": False}, False, False, True),
    ({"request_time": 5, "response_time": None, "response_expected": False}, False, False, False),
    ({"request_time": 5, "response_time": None}, False, False, True),  # unanswered: the file after its request's
    ({"request_time": 5, "response_time": None}, True, False, False),  # ... unless that one was the last
    ({"request_time": 12, "response_time": None}, False, False, False),  # the next file's to give
    ({"request_time": 12, "response_time": None}, False, True, True),  # ... or this one's, the last
])
def test_each_exchange_belongs_to_one_file(record, prev_final, final, here):
    assert owned(record, 10.0, prev_final, final) is here


def test_the_stream_offsets_plan_each_file_once(tmp_path):
    files = _rotated(tmp_path)
    names = [os.path.basename(f) for f in files]
    first = stream_end(str(tmp_path), None)
    assert first == {"last": names[-2], "final": False}  # the newest is still being written
    batch1 = stream_partitions(str(tmp_path), {"last": "", "final": False}, first)
    assert [p[1] for p in batch1] == files[:-1] and batch1[0][0] is None
    settled = stream_end(str(tmp_path), 3.0, now=os.stat(files[-1]).st_mtime + 5)
    assert settled == {"last": names[-1], "final": True}
    assert stream_partitions(str(tmp_path), first, settled) == [(files[-2], files[-1], False, True)]
    assert stream_partitions(str(tmp_path), settled, settled) == []


def test_the_newest_file_is_not_settled_while_a_sniff_rotation_writes_the_next(tmp_path):
    """sniff --write's rotation writes each file under a hidden name: the newest visible file stops
    changing at once, yet it is not the last while the hidden one grows (settle_seconds counts it)."""
    from kinspect.capture.write import being_written
    files = _rotated(tmp_path)
    done = os.stat(files[-1]).st_mtime
    writing = tmp_path / ".ring_00010.pcapng.0123456789abcdef.part"
    writing.write_bytes(b"")
    os.utime(writing, (done + 10, done + 10))
    assert being_written(str(tmp_path)) == [str(writing)]
    assert stream_end(str(tmp_path), 3.0, now=done + 5) == {"last": os.path.basename(files[-2]), "final": False}
    assert stream_end(str(tmp_path), 3.0, now=done + 14) == {"last": os.path.basename(files[-1]), "final": True}
