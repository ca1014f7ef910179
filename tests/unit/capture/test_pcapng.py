import struct

import pytest

from kinspect.capture.pcap import PcapParser
from kinspect.capture.pcapng import PcapngParser
from kinspect.problems import ERROR

from .helpers import block, editcap, epb, idb, opb, parse_all, shb, spb, tshark_fields

NDPI = "ndpi/kafka.pcapng"


def assert_matches_tshark(packets, path, tolerance=1e-6):
    expected = tshark_fields(path, "frame.time_epoch", "frame.cap_len")
    assert len(packets) == len(expected)
    for (ts, _lt, data, number), (t_ts, t_len) in zip(packets, expected):
        assert abs(ts - float(t_ts)) < tolerance, number
        assert len(data) == int(t_len), number


def block_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos + 8 <= len(data):
        starts.append(pos)
        pos += struct.unpack_from("<I", data, pos + 4)[0]
    return starts + [pos]


@pytest.fixture(scope="module")
def ethernet_frames(realdata):
    packets, _ = parse_all((realdata / NDPI).read_bytes())
    return [p[2] for p in packets]


def test_real_pcapng_matches_tshark(realdata, tshark):
    parser = PcapngParser()
    parser.feed((realdata / NDPI).read_bytes())
    packets = list(parser.packets())
    parser.close()
    assert parser.problems == []
    assert len(packets) == 41
    assert {p[1] for p in packets} == {1}
    assert_matches_tshark(packets, realdata / NDPI, tolerance=3e-7)
    # two interfaces: the second one records nanoseconds (if_tsresol 9)
    assert [(lt, div) for lt, div, _off, _snap in parser.interfaces] == [(1, 10**6), (1, 10**9)]


def test_interface_ids_follow_tshark(realdata, tshark, live):
    path = live.files["multi"]
    packets, problems = parse_all(path.read_bytes())
    assert problems == []
    assert_matches_tshark(packets, path)
    linktype_of = {"0": 1, "1": 113}  # dumpcap -i lo -i any: Ethernet, then Linux cooked
    expected = [linktype_of[i] for i, in tshark_fields(path, "frame.interface_id")]
    assert [p[1] for p in packets] == expected
    assert set(expected) == {1, 113}


@pytest.mark.parametrize("name", ["arkime/kafka.pcap", "go-sniffer/kafka.pcap"])
def test_converted_from_pcap_reads_the_same(realdata, tshark, tmp_path, name):
    converted = editcap(realdata / name, tmp_path / "c.pcapng", "-F", "pcapng")
    from_pcapng, problems = parse_all(converted.read_bytes())
    from_pcap, _ = parse_all((realdata / name).read_bytes(), PcapParser)
    assert problems == []
    assert from_pcapng == from_pcap


@pytest.mark.parametrize("chunk", [1, 5, 12, 13, 64, 999])
def test_fed_in_chunks_gives_the_same_packets(realdata, chunk):
    data = (realdata / NDPI).read_bytes()
    whole, _ = parse_all(data)
    pieces, problems = parse_all(data, chunk=chunk)
    assert problems == []
    assert pieces == whole


def test_truncated_at_every_byte(realdata):
    data = (realdata / NDPI).read_bytes()
    whole, _ = parse_all(data)
    starts = block_starts(data)
    for cut in range(1, len(data)):
        packets, problems = parse_all(data[:cut], PcapngParser)
        assert packets == whole[: len(packets)], cut
        if cut in starts:
            assert problems == [], cut
            continue
        assert len(problems) == 1, cut
        assert problems[0].severity == ERROR and problems[0].check == "truncated", cut
        assert problems[0].offset == max(s for s in starts if s < cut), cut
    assert len(parse_all(data[: starts[-2] + 40])[0]) == 40


def test_big_endian_section_with_every_packet_block(ethernet_frames, tshark, tmp_path):
    f0, f1, f2 = ethernet_frames[:3]
    data = (
        shb(">")
        + idb(1, order=">")
        + epb(0, 1_700_000_000_000_001, f0, ">")
        + spb(f1, ">")
        + opb(0, 1_700_000_000_500_000, f2, ">")
    )
    path = tmp_path / "be.pcapng"
    path.write_bytes(data)
    packets, problems = parse_all(data)
    assert problems == []
    assert [p[2] for p in packets] == [f0, f1, f2]
    assert [p[1] for p in packets] == [1, 1, 1]
    # a simple packet block has no timestamp: it takes the last one seen
    assert [p[0] for p in packets] == pytest.approx([1_700_000_000.000001, 1_700_000_000.000001, 1_700_000_000.5])
    assert [p[3] for p in packets] == [1, 2, 3]
    assert len(tshark_fields(path, "frame.number")) == 3


@pytest.mark.parametrize(
    "tsresol, units, seconds",
    [
        (None, 1_700_000_000_250_000, 1_700_000_000.25),  # default: microseconds
        (3, 1_700_000_000_250, 1_700_000_000.25),  # milliseconds
        (9, 1_700_000_000_250_000_000, 1_700_000_000.25),  # nanoseconds
        (0x80 | 20, 1_700_000_000 * 2**20 + 2**18, 1_700_000_000.25),  # 2**-20 s
        (0x80 | 0, 1_700_000_000, 1_700_000_000.0),  # whole seconds, power of two
    ],
)
def test_timestamp_resolutions(ethernet_frames, tshark, tmp_path, tsresol, units, seconds):
    data = shb() + idb(1, tsresol=tsresol) + epb(0, units, ethernet_frames[0])
    packets, problems = parse_all(data)
    assert problems == []
    assert packets[0][0] == pytest.approx(seconds, abs=1e-9)
    path = tmp_path / "r.pcapng"
    path.write_bytes(data)
    assert_matches_tshark(packets, path)


def test_timestamp_offset(ethernet_frames, tshark, tmp_path):
    data = shb() + idb(1, tsresol=6, tsoffset=1_600_000_000) + epb(0, 100_000_000_500_000, ethernet_frames[0])
    packets, problems = parse_all(data)
    assert problems == []
    assert packets[0][0] == pytest.approx(1_700_000_000.5)


def test_interfaces_with_different_linktypes_and_snaplen(ethernet_frames):
    frame = ethernet_frames[1]
    data = shb() + idb(228, snaplen=40) + idb(1, tsresol=9) + epb(1, 5_000_000_000, frame) + spb(frame[14:])
    packets, problems = parse_all(data)
    assert problems == []
    assert [(p[1], p[0]) for p in packets] == [(1, 5.0), (228, 5.0)]
    assert packets[1][2] == frame[14:54]  # simple packet block: cut to interface 0's snaplen


def test_sections_reset_interfaces_and_byte_order(ethernet_frames):
    f0, f1 = ethernet_frames[:2]
    data = shb("<") + idb(1) + idb(113) + epb(1, 1, f0) + shb(">") + idb(228, order=">") + epb(0, 2, f1[14:], ">")
    parser = PcapngParser()
    parser.feed(data)
    packets = list(parser.packets())
    parser.close()
    assert parser.problems == []
    assert [(p[1], p[2]) for p in packets] == [(113, f0), (228, f1[14:])]
    assert parser.sections == 2 and len(parser.interfaces) == 1


def test_other_blocks_are_skipped(ethernet_frames):
    name_resolution = block(4, struct.pack("<HH", 0, 0))
    statistics = block(5, struct.pack("<III", 0, 0, 0))
    custom = block(0x00000BAD, b"\x00\x00\x7e\x8a" + b"vendor data")
    decryption_secrets = block(0x0000000A, struct.pack("<II", 0x544C534B, 3) + b"abc")
    data = shb() + name_resolution + idb(1) + statistics + epb(0, 1, ethernet_frames[0]) + custom + decryption_secrets
    packets, problems = parse_all(data)
    assert problems == []
    assert [p[2] for p in packets] == [ethernet_frames[0]]


def test_unknown_interface_is_skipped_with_a_problem(ethernet_frames):
    bad = epb(3, 1, ethernet_frames[0])
    data = shb() + idb(1) + bad + epb(0, 2, ethernet_frames[1])
    packets, problems = parse_all(data)
    assert [p[2] for p in packets] == [ethernet_frames[1]]
    assert [p[3] for p in packets] == [1]
    assert len(problems) == 1 and problems[0].offset == len(shb() + idb(1))
    assert "interface 3" in problems[0].what


def test_captured_length_beyond_the_block_is_skipped(ethernet_frames):
    bad = bytearray(epb(0, 1, ethernet_frames[0]))
    struct.pack_into("<I", bad, 20, 5000)  # caplen
    data = shb() + idb(1) + bytes(bad) + epb(0, 2, ethernet_frames[1])
    packets, problems = parse_all(data)
    assert [p[2] for p in packets] == [ethernet_frames[1]]
    assert "claims 5000 captured bytes" in problems[0].what


@pytest.mark.parametrize("garbage", [7, 8, 0x7FFFFFFC, 0xFFFFFFFF])
def test_garbage_block_length_stops_cleanly(realdata, garbage):
    data = bytearray((realdata / NDPI).read_bytes())
    starts = block_starts(bytes(data))
    struct.pack_into("<I", data, starts[10] + 4, garbage)
    for chunk in (None, 100):
        packets, problems = parse_all(bytes(data), chunk=chunk)
        assert len(packets) == 10 - 3  # blocks 0..2 are the section and the interfaces
        assert len(problems) == 1
        assert problems[0].offset == starts[10] and problems[0].check == "structure"


def test_trailing_length_mismatch_stops_cleanly(realdata):
    data = bytearray((realdata / NDPI).read_bytes())
    starts = block_starts(bytes(data))
    struct.pack_into("<I", data, starts[5] + 4, struct.unpack_from("<I", data, starts[5] + 4)[0] + 4)
    packets, problems = parse_all(bytes(data))
    assert len(packets) == 2
    assert problems[0].offset == starts[5] and "does not match its trailing copy" in problems[0].what


def test_bad_byte_order_magic(ethernet_frames):
    data = bytearray(shb() + idb(1) + epb(0, 1, ethernet_frames[0]))
    data[8:12] = b"ABCD"
    packets, problems = parse_all(bytes(data), PcapngParser)
    assert packets == []
    assert problems[0].offset == 8 and "byte-order magic" in problems[0].what


def test_not_starting_with_a_section_header():
    packets, problems = parse_all(idb(1) + idb(1), PcapngParser)
    assert packets == []
    assert problems[0].offset == 0 and "not a pcapng file" in problems[0].what


# -- a file of malformed blocks is a few problems, memory bounded (issue 30: output proportionate) --

def test_a_thousand_malformed_blocks_are_ten_problems_and_a_count():
    too_short = struct.pack("<III", 6, 12, 12)  # an enhanced packet block of 12 bytes
    data = shb() + idb(1) + too_short * 1000 + epb(7, 1, b"x" * 60) * 30
    packets, problems = parse_all(data, PcapngParser)
    assert packets == []
    structure = [p for p in problems if p.check == "structure"]
    assert [p.offset for p in structure[:10]] == [len(shb() + idb(1)) + 12 * i for i in range(10)]
    assert len(problems) == 11 and problems[-1].what == (
        "1020 more structure problems like the ones above in this unit (1030 in all; the first 10 are shown)")
    assert problems[-1].severity == ERROR


def test_interfaces_kept_per_section_are_bounded():
    from kinspect.capture.pcapng import MAX_INTERFACES

    data = shb() + idb(1) * (MAX_INTERFACES + 3) + epb(MAX_INTERFACES + 1, 1, b"x" * 60) + epb(0, 2, b"y" * 60)
    parser = PcapngParser()
    parser.feed(data)
    packets = list(parser.packets(final=True))
    assert len(parser.interfaces) == MAX_INTERFACES and [p[2] for p in packets] == [b"y" * 60]
    assert [p.check for p in parser.problems] == ["limit", "limit", "limit", "structure"]


def test_statistics_of_interfaces_never_described_are_not_kept():
    statistics = b"".join(block(5, struct.pack("<III", iface, 0, 0) + struct.pack("<HHQ", 4, 8, 9) + b"\0\0\0\0")
                          for iface in range(0, 50_000, 7))
    parser = PcapngParser()
    parser.feed(shb() + idb(1) + statistics)
    list(parser.packets(final=True))
    assert parser.statistics == {0: {"ifrecv": 9}}
