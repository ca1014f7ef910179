"""sniff --write: the pcapng it keeps decodes as what was captured; its interface statistics
blocks (dumpcap's drop counts) are read back."""

import os
import struct
import subprocess

from kinspect.capture.pcapng import PcapngParser
from kinspect.capture.source import open_capture
from kinspect.capture.stream import TICK
from kinspect.capture.write import Recording, _block, interface_description, section_header
from kinspect.decode.pipeline import DecodeRun
from kinspect.render.jsonl import dumps
from tests.conftest import PCAPS
from tests.unit.decode.test_pipeline_seam import ListSource

CAPTURE = PCAPS / "librdkafka-mtu1500.pcap"


def test_the_written_file_holds_every_packet_and_decodes_identically(tmp_path):
    with open_capture(str(CAPTURE)) as capture:
        packets = [(ts, lt, bytes(data), n) for ts, lt, data, n in capture.packets()]
    source = ListSource(packets[:5] + [(packets[5][0], TICK, b"", 0)] + packets[5:])
    out = tmp_path / "kept.pcapng"
    recording = Recording(source, open(out, "wb"))
    assert list(recording.packets()) == source.items
    recording.close()
    assert recording.written == len(packets)
    with open_capture(str(out)) as capture:
        again = [(round(ts, 6), lt, bytes(data)) for ts, lt, data, _ in capture.packets()]
        assert capture.problems == []
    assert again == [(round(ts, 6), lt, data) for ts, lt, data, _ in packets]
    decoded = [dumps(r) for r in DecodeRun(str(out)).records()]
    assert decoded == [dumps(r) for r in DecodeRun(str(CAPTURE)).records()]


def test_interface_statistics_blocks_give_the_drop_counters():
    options = b"".join(struct.pack("<HHQ", code, 8, value) for code, value in ((4, 1000), (5, 7), (7, 2)))
    isb = _block(5, struct.pack("<III", 0, 0, 0) + options + b"\0\0\0\0")
    parser = PcapngParser([])
    parser.feed(section_header() + interface_description(101) + isb)
    assert list(parser.packets(final=True)) == []
    assert parser.statistics == {0: {"ifrecv": 1000, "ifdrop": 7, "osdrop": 2}}


def _packets():
    with open_capture(str(CAPTURE)) as capture:
        return [(ts, lt, bytes(data), n) for ts, lt, data, n in capture.packets()]


def _read(path):
    with open_capture(str(path)) as capture:
        return [(round(ts, 6), lt, bytes(data)) for ts, lt, data, _ in capture.packets()]


def test_a_rotation_cuts_the_packets_into_whole_files_in_order(tmp_path):
    from kinspect.capture.chain import ChainedCapture
    from kinspect.capture.write import RotatingRecording
    packets = _packets()
    recording = RotatingRecording(ListSource(packets), str(tmp_path / "ring.pcapng"), max_bytes=5_000)
    assert len(list(recording.packets())) == len(packets)
    recording.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"ring_{i:05d}.pcapng" for i in range(1, len(names) + 1)] and len(names) > 3
    assert [str(tmp_path / n) for n in names] == recording.files
    assert all(p.stat().st_size < 5_000 + 2_000 for p in tmp_path.iterdir())
    expected = [(round(ts, 6), lt, data) for ts, lt, data, _ in packets]
    assert [p for name in names for p in _read(tmp_path / name)] == expected
    with ChainedCapture(recording.files) as chained:  # and read back as one capture, numbered on
        again = list(chained.packets())
    assert [(round(ts, 6), lt, bytes(data)) for ts, lt, data, _ in again] == expected
    assert [n for *_, n in again] == list(range(1, len(packets) + 1))


def test_a_rotation_keeps_the_newest_files_and_rotates_on_time_even_when_idle(tmp_path):
    from kinspect.capture.write import RotatingRecording
    packets = _packets()[:6]
    start = packets[0][0]
    timed = [packets[0], packets[1], (start + 5, TICK, b"", 0), packets[2], (start + 11, TICK, b"", 0),
             (start + 17, TICK, b"", 0), packets[3]]
    recording = RotatingRecording(ListSource(timed), str(tmp_path / "r.pcapng"), max_seconds=5, keep=2)
    list(recording.packets())
    recording.close()
    assert recording.number == 4  # 0 s, 5 s (a tick), 11 s, 17 s
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r_00003.pcapng", "r_00004.pcapng"]
    assert _read(tmp_path / "r_00004.pcapng") == [(round(packets[3][0], 6), packets[3][1], packets[3][2])]


def test_a_rotated_file_is_seen_under_its_name_only_once_complete(tmp_path):
    """The file being written has a hidden name (the rotation reader of spark/ leaves hidden files
    out); each file that shows is a whole pcapng that tshark reads to the end."""
    from kinspect.capture.write import RotatingRecording, being_written
    from kinspect.spark.rotation import listed
    packets = _packets()
    recording = RotatingRecording(ListSource(packets), str(tmp_path / "ring.pcapng"), max_bytes=12_000)
    seen = []
    for _ in recording.packets():
        writing = being_written(str(tmp_path))
        assert len(writing) == 1 and os.path.basename(writing[0]).startswith(".ring_")
        visible = listed(str(tmp_path))
        assert visible == recording.files
        seen.append(len(visible))
    recording.close()
    assert being_written(str(tmp_path)) == [] and len(recording.files) == max(seen) + 1 > 2
    for name in (recording.files[0], recording.files[-1]):  # the first and the one closed last
        out = subprocess.run(["tshark", "-r", name], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.strip() and out.stderr.count("\n") <= 1, out.stderr


def test_a_rotation_replaces_nothing_and_deletes_only_its_own_files(tmp_path):
    """An earlier run's files stay and numbers go on past them; a name another writer took meanwhile
    is skipped, not replaced; --keep deletes a file of this run only while it is still that file."""
    from kinspect.capture.write import RotatingRecording
    earlier = tmp_path / "ring_00003.pcapng"
    earlier.write_bytes(b"an earlier run's")
    packets = _packets()
    recording = RotatingRecording(ListSource(packets), str(tmp_path / "ring.pcapng"), max_bytes=5_000, keep=2)
    feed = recording.packets()
    next(feed)
    assert recording.number == 4
    taken = tmp_path / "ring_00004.pcapng"  # another writer takes the name of the file being written
    taken.write_bytes(b"someone else's")
    while not recording.files:
        next(feed)
    assert recording.files == [str(tmp_path / "ring_00005.pcapng")]
    first = recording.files[0]
    os.rename(first, tmp_path / "moved")  # and puts another file at the name of the first one written
    (tmp_path / "ring_00005.pcapng").write_bytes(b"put back")
    for _ in feed:
        pass
    recording.close()
    assert earlier.read_bytes() == b"an earlier run's" and taken.read_bytes() == b"someone else's"
    assert (tmp_path / "ring_00005.pcapng").read_bytes() == b"put back"
    assert len(recording.files) == 2 and all(os.path.exists(f) for f in recording.files)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["moved", "ring_00003.pcapng", "ring_00004.pcapng", "ring_00005.pcapng",
         *(os.path.basename(f) for f in recording.files)])


def test_a_rotation_that_never_started_leaves_nothing(tmp_path):
    from kinspect.capture.write import RotatingRecording
    recording = RotatingRecording(None, str(tmp_path / "ring.pcapng"), max_seconds=1)
    assert len(os.listdir(tmp_path)) == 1
    recording.discard()
    assert os.listdir(tmp_path) == []
