import gzip
import io
import os
import random
import subprocess
import sys

import pytest

from kinspect.capture.link import decode_tcp
from kinspect.capture.source import CHUNK, Capture, CaptureError, open_capture
from kinspect.capture.tcp import TcpReassembler

from .helpers import parse_all, pcap_header, pcap_record, tshark_fields

REAL = ["ndpi/kafka.pcapng", "arkime/kafka.pcap", "go-sniffer/kafka.pcap"]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def read_all(source):
    with open_capture(source) as capture:
        packets = list(capture.packets())
        return capture, packets


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("name", REAL)
def test_real_files(realdata, tshark, name):
    path = realdata / name
    capture, packets = read_all(path)
    assert isinstance(capture, Capture)
    assert capture.format == ("pcapng" if name.endswith("ng") else "pcap")
    assert capture.problems == []
    assert capture.size == capture.bytes_read == path.stat().st_size
    assert packets == parse_all(path.read_bytes())[0]
    expected = tshark_fields(path, "frame.time_epoch", "frame.cap_len")
    assert [(round(ts, 6), len(data)) for ts, _lt, data, _n in packets] == [
        (round(float(t), 6), int(n)) for t, n in expected
    ]


def test_path_as_string_and_packet_numbers(realdata):
    _capture, packets = read_all(str(realdata / "arkime/kafka.pcap"))
    assert [p[3] for p in packets] == [1, 2, 3, 4, 5]
    assert all(type(p[2]) is bytes for p in packets)


@pytest.mark.parametrize("name", REAL)
def test_gzip_is_detected_by_content_not_name(realdata, tmp_path, name):
    raw = (realdata / name).read_bytes()
    expected = parse_all(raw)[0]
    for filename in ("capture.pcap.gz", "capture.pcap"):
        path = tmp_path / filename
        path.write_bytes(gzip.compress(raw))
        capture, packets = read_all(path)
        assert packets == expected
        assert capture.problems == []
        assert capture.size == capture.bytes_read == path.stat().st_size


def test_gzip_file_object_and_multiple_members(realdata):
    raw = (realdata / "ndpi/kafka.pcapng").read_bytes()
    members = gzip.compress(raw[:3000]) + gzip.compress(raw[3000:])
    capture, packets = read_all(io.BytesIO(members))
    assert packets == parse_all(raw)[0]
    assert capture.size is None and capture.bytes_read == len(members)


def test_plain_file_object(realdata):
    raw = (realdata / "go-sniffer/kafka.pcap").read_bytes()
    capture, packets = read_all(io.BytesIO(raw))
    assert capture.format == "pcap" and packets == parse_all(raw)[0]


@pytest.mark.parametrize("compress", [False, True])
def test_stdin(realdata, compress):
    raw = (realdata / "ndpi/kafka.pcapng").read_bytes()
    script = (
        "from kinspect.capture.source import open_capture\n"
        "with open_capture('-') as c:\n"
        "    n = sum(len(d) for _t, _l, d, _n in c.packets())\n"
        "print(c.format, n, c.bytes_read, c.size, len(c.problems))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=gzip.compress(raw) if compress else raw,
        capture_output=True,
        cwd=REPO,
        check=True,
    )
    total = sum(len(p[2]) for p in parse_all(raw)[0])
    sent = len(gzip.compress(raw)) if compress else len(raw)
    assert done.stdout.decode().split() == ["pcapng", str(total), str(sent), "None", "0"]


def test_truncated_file_yields_a_prefix_and_a_problem(realdata, tmp_path):
    raw = (realdata / "go-sniffer/kafka.pcap").read_bytes()
    path = tmp_path / "cut.pcap"
    path.write_bytes(raw[:-50])
    capture, packets = read_all(path)
    assert len(packets) == 19
    assert len(capture.problems) == 1
    assert capture.problems[0].offset == len(raw) - 100 and "truncated packet record #20" in capture.problems[0].what


def test_truncated_gzip_yields_a_prefix_and_a_problem(realdata, tmp_path):
    raw = (realdata / "ndpi/kafka.pcapng").read_bytes()
    packed = gzip.compress(raw)
    path = tmp_path / "cut.pcapng.gz"
    path.write_bytes(packed[: len(packed) // 2])
    capture, packets = read_all(path)
    whole = parse_all(raw)[0]
    assert 0 < len(packets) < len(whole)
    assert packets == whole[: len(packets)]
    checks = [p.check for p in capture.problems]
    assert checks[0] == "truncated" and "gzip" in capture.problems[0].what
    assert len(checks) == 2  # and the block cut in the middle


def test_corrupt_gzip_is_a_problem(realdata, tmp_path):
    raw = (realdata / "ndpi/kafka.pcapng").read_bytes()
    whole = parse_all(raw)[0]
    packed = bytearray(gzip.compress(raw))
    packed[-8:-4] = bytes(4)  # the CRC-32 trailer: every packet decompresses, then the check fails
    path = tmp_path / "bad-crc.gz"
    path.write_bytes(bytes(packed))
    capture, packets = read_all(path)
    assert packets == whole
    assert [p.path for p in capture.problems] == ["gzip"] and "CRC" in capture.problems[0].what

    packed = bytearray(gzip.compress(raw))
    packed[len(packed) // 2 : len(packed) // 2 + 16] = bytes(16)  # garbage in the deflate stream
    path = tmp_path / "bad-data.gz"
    path.write_bytes(bytes(packed))
    capture, packets = read_all(path)
    assert capture.problems
    assert 0 < len(packets) < len(whole) and packets[:10] == whole[:10]


class _GeneratedCapture(io.RawIOBase):
    """A 50 MB pcap made on the fly, remembering how far it has been read."""

    def __init__(self, packets: int = 500_000) -> None:
        self.left = [pcap_header(1)]
        self.record = pcap_record(1, 0, bytes(84))
        self.packets = packets
        self.served = 0
        self.largest_read = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.largest_read = max(self.largest_read, size)
        out = b"".join(self.left)
        self.left = []
        want = max(0, (size - len(out)) // len(self.record) + 1)
        take = min(want, self.packets)
        self.packets -= take
        out += self.record * take
        self.served += len(out)
        return out


def test_streams_with_bounded_reads():
    source = _GeneratedCapture()
    with open_capture(source) as capture:
        packets = capture.packets()
        next(packets)
        assert source.served <= 2 * CHUNK  # the first packet came before the rest was read
        assert sum(1 for _ in packets) == 500_000 - 1
    assert source.largest_read <= CHUNK
    assert capture.problems == []


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty input"),
        (b"hello, this is text\n", "not a pcap or pcapng capture"),
        (b"\x28\xb5\x2f\xfd" + bytes(20), "zstd-compressed"),
        (b"\xa1\xb2\xcd\x34" + bytes(20), "editcap -F pcap"),
        (gzip.compress(b"just text, gzipped"), "(inside gzip): not a pcap or pcapng capture"),
    ],
)
def test_not_a_capture(tmp_path, content, message):
    path = tmp_path / "x.pcap"
    path.write_bytes(content)
    before = open_fds()
    with pytest.raises(CaptureError, match=message.replace("(", r"\(").replace(")", r"\)")):
        open_capture(path)
    with pytest.raises(CaptureError):
        open_capture(io.BytesIO(content))
    assert open_fds() == before


def test_unreadable_paths(tmp_path):
    with pytest.raises(CaptureError, match="cannot open"):
        open_capture(tmp_path / "missing.pcap")
    with pytest.raises(CaptureError, match="cannot open"):
        open_capture(tmp_path)


def test_close_releases_the_file(realdata):
    before = open_fds()
    with open_capture(realdata / "ndpi/kafka.pcapng") as capture:
        packets = capture.packets()
        next(packets)
        assert open_fds() > before
    assert open_fds() == before


@pytest.mark.parametrize("name, linktype", [("ethernet", 1), ("sll", 113), ("sll2_ns", 276)])
def test_live_captures(live, tshark, name, linktype):
    path = live.files[name]
    capture, packets = read_all(path)
    assert capture.problems == []
    assert {p[1] for p in packets} == {linktype}
    expected = tshark_fields(path, "frame.time_epoch", "frame.cap_len")
    assert len(packets) == len(expected) > 10
    for (ts, _lt, data, _n), (t_ts, t_len) in zip(packets, expected):
        assert abs(ts - float(t_ts)) < 5e-7 and len(data) == int(t_len)


@pytest.mark.parametrize("name", REAL)
def test_mutated_captures_never_raise(realdata, name):
    """Random damage to real captures: the whole path reports problems, never raises."""
    raw = (realdata / name).read_bytes()
    rng = random.Random(name)
    for _ in range(300):
        data = bytearray(raw)
        for _ in range(rng.randrange(1, 8)):
            at = rng.randrange(len(data))
            data[at : at + rng.randrange(1, 5)] = rng.randbytes(rng.randrange(0, 5))
        try:
            capture = open_capture(io.BytesIO(bytes(data)))
        except CaptureError:
            continue  # the magic itself was damaged
        reassembler = TcpReassembler(max_buffered=4096)
        with capture:
            for ts, linktype, frame, _n in capture.packets():
                segment = decode_tcp(linktype, frame)
                if segment is not None:
                    src, dst, sport, dport, seq, flags, payload, _ack = segment
                    reassembler.segment(ts, src, sport, dst, dport, seq, flags, payload)
        reassembler.finish()


# -- the outer gzip of a capture inflates within a bound of work (issue 30, item 9) -------------

def test_a_gzip_bomb_of_empty_records_stops_early_and_names_the_option(tmp_path):
    from kinspect.limits import Limits
    from tests.hostile.inputs_wire import empty_records_gzip_bomb

    path = empty_records_gzip_bomb(tmp_path, compressed=40_000)
    records = (len(gzip.decompress(path.read_bytes())) - 24) // 16  # 8 MB: 524,287 records
    limits = Limits(max_batch_bytes=1 << 20, max_file_ratio=100)
    with open_capture(path, limits) as capture:
        count = sum(1 for _ in capture.packets())
        problems = capture.problems
    assert [(p.path, p.check) for p in problems] == [("gzip", "decompress")]  # no record "cut short"
    assert "raise it with --max-file-ratio" in problems[0].what and "128 bytes" in problems[0].what
    read = problems[0].offset  # checked before each chunk is read: the last may pass it by a chunk
    assert 0 < read < 40_000 and count <= ((1 << 20) + 100 * read) // (16 + 128) + CHUNK // 16
    assert count < records // 4


@pytest.mark.parametrize("ratio", [100, 10_000])
def test_the_bound_is_the_option_given(tmp_path, ratio):
    from kinspect.limits import Limits
    from tests.hostile.inputs_wire import empty_records_gzip_bomb

    path = empty_records_gzip_bomb(tmp_path, compressed=20_000)  # 144 bytes of work a record
    records = (len(gzip.decompress(path.read_bytes())) - 24) // 16
    with open_capture(path, Limits(max_batch_bytes=1 << 20, max_file_ratio=ratio)) as capture:
        count = sum(1 for _ in capture.packets())
        assert (capture.problems == []) == (ratio == 10_000)
    assert (count == records) == (ratio == 10_000)


def test_honest_gzipped_captures_inflate_within_the_bound_without_its_first_allowance(tmp_path):
    """Every committed capture, gzip'ed, gives the same packets with no allowance but the ratio."""
    from kinspect.limits import Limits

    from tests.conftest import PCAPS

    for path in sorted(PCAPS.glob("*.pcap*")):
        packed = tmp_path / (path.name + ".gz")
        packed.write_bytes(gzip.compress(path.read_bytes(), 9))
        with open_capture(packed, Limits(max_batch_bytes=0)) as capture:
            packets = list(capture.packets())
            assert capture.problems == [], path.name
        assert packets == read_all(path)[1], path.name


def _mapped_rss(path) -> int:
    """Resident bytes of the mappings of ``path`` in this process, from /proc/self/smaps."""
    resident, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:
                inside = line.rstrip("\n").endswith(str(path))
            elif inside and line.startswith("Rss:"):
                resident += int(line.split()[1]) << 10
    return resident


def test_a_mapped_capture_of_large_packets_stays_resident_within_a_few_steps(tmp_path):
    """Pages of a mapped capture are handed back every few MB, however large its packets are
    (they were looked at every 16,384 packets: 94 MB of a loopback capture stayed resident)."""
    from kinspect.capture.source import RELEASE_BEHIND, RELEASE_STEP

    size, count = 8000, 8000  # 64 MB
    path = tmp_path / "large.pcap"
    with open(path, "wb") as out:
        out.write(pcap_header(1))
        for number in range(count):
            out.write(pcap_record(number, 0, number.to_bytes(4, "big") * (size // 4)))
    peak = 0
    with open_capture(path) as capture:
        for number, packet in enumerate(capture.packets()):
            assert packet[2][:4] == number.to_bytes(4, "big")
            if not number % 64:
                peak = max(peak, _mapped_rss(path))
        assert number == count - 1
    assert 0 < peak <= RELEASE_STEP + RELEASE_BEHIND + 2 * 1024 * size + (1 << 20)  # 26 MB
