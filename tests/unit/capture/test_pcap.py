import struct

import pytest

from kinspect.capture.pcap import PcapParser
from kinspect.problems import ERROR, WARNING

from .helpers import editcap, parse_all, pcap_file, pcap_header, pcap_record, swap_pcap, tshark_fields

REAL_PCAPS = {"arkime/kafka.pcap": (1, 5), "go-sniffer/kafka.pcap": (113, 20)}


def assert_matches_tshark(packets, path, tolerance=1e-6):
    expected = tshark_fields(path, "frame.time_epoch", "frame.cap_len")
    assert len(packets) == len(expected)
    for (ts, _lt, data, number), (t_ts, t_len) in zip(packets, expected):
        assert abs(ts - float(t_ts)) < tolerance, number
        assert len(data) == int(t_len), number
    assert [p[3] for p in packets] == list(range(1, len(packets) + 1))


def record_ends(data: bytes) -> list[int]:
    ends, pos = [], 24
    while pos + 16 <= len(data):
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
        ends.append(pos)
    return ends


@pytest.mark.parametrize("name", REAL_PCAPS)
def test_real_pcap_matches_tshark(realdata, tshark, name):
    path = realdata / name
    packets, problems = parse_all(path.read_bytes(), PcapParser)
    linktype, count = REAL_PCAPS[name]
    assert problems == []
    assert len(packets) == count
    assert {p[1] for p in packets} == {linktype}
    assert_matches_tshark(packets, path)


def test_packet_data_is_the_record_bytes(realdata):
    data = (realdata / "arkime/kafka.pcap").read_bytes()
    packets, _ = parse_all(data, PcapParser)
    first = packets[0][2]
    assert data[24 + 16 : 24 + 16 + len(first)] == first
    assert first[12:14] == b"\x81\x00" and first[16:18] == b"\x08\x00"  # Ethernet, 802.1Q, IPv4


@pytest.mark.parametrize("name", ["ndpi/kafka.pcapng", "go-sniffer/kafka.pcap"])
def test_nanosecond_pcap(realdata, tshark, tmp_path, name):
    # ndpi's second interface has nanosecond timestamps, which nsecpcap keeps
    converted = editcap(realdata / name, tmp_path / "ns.pcap", "-F", "nsecpcap")
    data = converted.read_bytes()
    assert data[:4] == b"\x4d\x3c\xb2\xa1"
    packets, problems = parse_all(data, PcapParser)
    assert problems == []
    assert_matches_tshark(packets, converted, tolerance=5e-7)


def test_microsecond_pcap_converted_from_pcapng(realdata, tshark, tmp_path):
    converted = editcap(realdata / "ndpi/kafka.pcapng", tmp_path / "us.pcap", "-F", "pcap")
    packets, problems = parse_all(converted.read_bytes(), PcapParser)
    assert problems == []
    assert len(packets) == 41
    assert_matches_tshark(packets, converted)


@pytest.mark.parametrize("name", REAL_PCAPS)
def test_big_endian_reads_the_same(realdata, tshark, tmp_path, name):
    data = (realdata / name).read_bytes()
    swapped = swap_pcap(data)
    assert swapped[:4] == b"\xa1\xb2\xc3\xd4"
    (tmp_path / "be.pcap").write_bytes(swapped)
    little, _ = parse_all(data, PcapParser)
    big, problems = parse_all(swapped, PcapParser)
    assert problems == []
    assert big == little
    assert_matches_tshark(big, tmp_path / "be.pcap")


def test_big_endian_nanoseconds(tshark, tmp_path):
    data = pcap_header(101, ">", nanos=True) + pcap_record(1_700_000_000, 123_456_789, b"\x45" + bytes(19), ">")
    (tmp_path / "f.pcap").write_bytes(data)
    packets, problems = parse_all(data, PcapParser)
    assert problems == []
    assert packets[0][0] == pytest.approx(1_700_000_000.123456789, abs=3e-7)
    assert packets[0][1] == 101
    assert_matches_tshark(packets, tmp_path / "f.pcap", tolerance=3e-7)


@pytest.mark.parametrize("chunk", [1, 3, 16, 17, 100, 1000])
def test_fed_in_chunks_gives_the_same_packets(realdata, chunk):
    data = (realdata / "go-sniffer/kafka.pcap").read_bytes()
    whole, _ = parse_all(data, PcapParser)
    pieces, problems = parse_all(data, PcapParser, chunk=chunk)
    assert problems == []
    assert pieces == whole


def test_need_more_bytes_is_not_an_error(realdata):
    data = (realdata / "arkime/kafka.pcap").read_bytes()
    parser = PcapParser()
    parser.feed(data[:30])
    assert list(parser.packets()) == []
    assert parser.problems == [] and parser.offset == 24
    parser.feed(data[30:])
    assert len(list(parser.packets())) == 5
    parser.close()
    assert parser.problems == [] and parser.offset == len(data)


def test_final_packets_call_reports_the_end(realdata):
    data = (realdata / "arkime/kafka.pcap").read_bytes()
    parser = PcapParser()
    parser.feed(data[:-5])
    assert len(list(parser.packets(final=True))) == 4
    assert [p.check for p in parser.problems] == ["truncated"]
    parser.close()  # closing twice reports nothing new
    assert len(parser.problems) == 1


def test_truncated_at_every_byte(realdata):
    data = (realdata / "go-sniffer/kafka.pcap").read_bytes()
    whole, _ = parse_all(data, PcapParser)
    ends = record_ends(data)
    for cut in range(1, len(data)):
        packets, problems = parse_all(data[:cut], PcapParser)
        complete = sum(1 for e in ends if e <= cut)
        assert packets == whole[:complete], cut
        if cut == 24 or cut in ends:
            assert problems == [], cut
            continue
        assert len(problems) == 1, cut
        problem = problems[0]
        assert problem.severity == ERROR and problem.check == "truncated"
        assert "truncated" in problem.what and "file ends" in problem.what
        assert problem.offset == (0 if cut < 24 else ([24] + ends)[complete]), cut


def test_truncated_problem_reads_well(realdata):
    data = (realdata / "arkime/kafka.pcap").read_bytes()
    packets, problems = parse_all(data[:-10], PcapParser)
    assert len(packets) == 4
    assert str(problems[0]) == (
        f"pcap: truncated packet record #5: file ends after 60 of 70 packet bytes at byte {len(data) - 86:#x}"
    )


def test_snaplen_cut_packets_are_noted(realdata, tshark, tmp_path):
    cut = editcap(realdata / "go-sniffer/kafka.pcap", tmp_path / "cut.pcap", "-F", "pcap", "-s", "80")
    packets, problems = parse_all(cut.read_bytes(), PcapParser)
    assert_matches_tshark(packets, cut)
    longer = [length for length, in tshark_fields(realdata / "go-sniffer/kafka.pcap", "frame.len") if int(length) > 80]
    assert longer  # the test means something only if some packets were cut
    assert len(problems) == 1
    assert problems[0].severity == WARNING and problems[0].check == "snaplen"
    assert problems[0].what.startswith(f"{len(longer)} of 20 packets were cut short")


def test_corrupt_record_length_stops_cleanly(realdata):
    data = bytearray((realdata / "go-sniffer/kafka.pcap").read_bytes())
    ends = record_ends(bytes(data))
    struct.pack_into("<I", data, ends[2] + 8, 0x7FFFFFF0)  # fourth record's caplen
    packets, problems = parse_all(bytes(data), PcapParser)
    assert len(packets) == 3
    assert len(problems) == 1
    assert problems[0].offset == ends[2] and problems[0].check == "structure"
    assert "corrupt" in problems[0].what


def test_linktype_upper_bits_are_ignored():
    data = pcap_header(1 | 0x1000_0000) + pcap_record(1, 0, bytes(60))
    packets, problems = parse_all(data, PcapParser)
    assert problems == [] and packets[0][1] == 1


def test_bad_magic_is_a_problem_not_an_exception():
    packets, problems = parse_all(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n", PcapParser)
    assert packets == []
    assert problems[0].offset == 0 and "not a pcap file" in problems[0].what


def test_short_header_is_reported():
    packets, problems = parse_all(pcap_header(1)[:10], PcapParser)
    assert packets == []
    assert problems[0].what == "truncated file header: file ends after 10 of 24 bytes"


def test_hand_built_file_round_trip():
    frames = [bytes([i]) * (i * 7) for i in range(10)]
    packets, problems = parse_all(pcap_file(frames, 228), PcapParser)
    assert problems == []
    assert [p[2] for p in packets] == frames
    assert packets[3][0] == pytest.approx(1_700_000_000.000003)
