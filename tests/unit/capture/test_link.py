import socket
import struct

import pytest

from kinspect.capture import link
from kinspect.capture.link import decode_tcp, decoder_for, format_addr
from kinspect.capture.source import open_capture

from .helpers import pcap_file, tshark_fields

FIELDS = ("ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "tcp.srcport", "tcp.dstport", "tcp.seq_raw", "tcp.flags", "tcp.payload")


def ip_text(ip: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET if len(ip) == 4 else socket.AF_INET6, ip)


def as_tshark(segment):
    """A decode_tcp result in the shape of tshark's fields, for comparison."""
    if segment is None:
        return None
    src, dst, sport, dport, seq, flags, payload, _ack = segment
    return (ip_text(src), ip_text(dst), str(sport), str(dport), str(seq), flags, bytes(payload).hex())


def tshark_segments(path):
    out = []
    for v4src, v4dst, v6src, v6dst, sport, dport, seq, flags, payload in tshark_fields(path, *FIELDS):
        if not sport:
            out.append(None)
            continue
        out.append((v4src or v6src, v4dst or v6dst, sport, dport, seq, int(flags, 16) & 0xFF, payload.replace(":", "")))
    return out


def decoded(path):
    with open_capture(path) as capture:
        return [as_tshark(decode_tcp(lt, data)) for _ts, lt, data, _n in capture.packets()]


def frames(path):
    with open_capture(path) as capture:
        return [data for _ts, _lt, data, _n in capture.packets()]


def check_with_tshark(tmp_path, linktype, variants):
    """decode_tcp agrees with tshark on ``variants`` written as a ``linktype`` capture."""
    path = tmp_path / f"lt{linktype}.pcap"
    path.write_bytes(pcap_file(variants, linktype))
    ours = [as_tshark(decode_tcp(linktype, v)) for v in variants]
    assert ours == tshark_segments(path)
    assert None not in ours
    return ours


@pytest.mark.parametrize("name", ["ndpi/kafka.pcapng", "arkime/kafka.pcap", "go-sniffer/kafka.pcap"])
def test_real_frames_match_tshark(realdata, tshark, name):
    expected = tshark_segments(realdata / name)
    assert None not in expected
    assert decoded(realdata / name) == expected


@pytest.mark.parametrize("name", ["ethernet", "sll", "sll2_ns", "multi"])
def test_live_frames_match_tshark(live, tshark, name):
    path = live.files[name]
    expected = tshark_segments(path)
    assert decoded(path) == expected
    assert any(":" in seg[0] for seg in expected) and any("." in seg[0] for seg in expected)  # v6 and v4


# ---- the same real IP packets behind every other link layer ----

@pytest.fixture(scope="module")
def ipv4_packets(realdata):
    # ndpi frames are plain Ethernet; the ones with payload and without
    return [f[14:] for f in frames(realdata / "ndpi/kafka.pcapng")[:4] + frames(realdata / "ndpi/kafka.pcapng")[22:26]]


@pytest.fixture(scope="module")
def ipv6_packets(live):
    packets = [f[14:] for f in frames(live.files["ethernet"]) if f[12:14] == b"\x86\xdd"]
    assert len(packets) > 10
    return packets[:8]


def ethernet(ip: bytes, *tags: int) -> bytes:
    etype = 0x0800 if ip[0] >> 4 == 4 else 0x86DD
    vlan = b"".join(struct.pack("!HH", tpid, 100 + i) for i, tpid in enumerate(tags))
    return bytes(range(12)) + vlan + struct.pack("!H", etype) + ip


def sll(ip: bytes) -> bytes:
    etype = 0x0800 if ip[0] >> 4 == 4 else 0x86DD
    return struct.pack("!HHH8sH", 0, 772, 6, bytes(8), etype) + ip


def sll2(ip: bytes) -> bytes:
    etype = 0x0800 if ip[0] >> 4 == 4 else 0x86DD
    return struct.pack("!HHIHBB8s", etype, 0, 1, 772, 0, 6, bytes(8)) + ip


def test_raw_ip(tshark, tmp_path, ipv4_packets, ipv6_packets):
    expected = check_with_tshark(tmp_path, 101, ipv4_packets + ipv6_packets)
    for linktype in (12, 14):  # older numbers for raw IP
        assert [as_tshark(decode_tcp(linktype, p)) for p in ipv4_packets + ipv6_packets] == expected
    check_with_tshark(tmp_path, 228, ipv4_packets)
    check_with_tshark(tmp_path, 229, ipv6_packets)
    assert decode_tcp(228, ipv6_packets[0]) is None and decode_tcp(229, ipv4_packets[0]) is None


@pytest.mark.parametrize("order", ["<", ">"])
def test_bsd_null_and_loop_in_both_byte_orders(tshark, tmp_path, ipv4_packets, ipv6_packets, order):
    raw = [as_tshark(decode_tcp(101, p)) for p in ipv4_packets + ipv6_packets]
    for family in (24, 28, 30):
        variants = [struct.pack(order + "I", 2) + p for p in ipv4_packets]
        variants += [struct.pack(order + "I", family) + p for p in ipv6_packets]
        assert [as_tshark(decode_tcp(0, v)) for v in variants] == raw
        assert [as_tshark(decode_tcp(108, v)) for v in variants] == raw
    if order == "<":  # what tshark reads as the capturing host's byte order
        check_with_tshark(tmp_path, 0, [struct.pack("<I", 2) + p for p in ipv4_packets])
    else:  # LOOP is big-endian by definition
        check_with_tshark(tmp_path, 108, [struct.pack(">I", 2) + p for p in ipv4_packets])
    assert decode_tcp(0, struct.pack(order + "I", 7) + ipv4_packets[0]) is None


def test_linux_cooked_v1_and_v2(tshark, tmp_path, ipv4_packets, ipv6_packets):
    packets = ipv4_packets + ipv6_packets
    raw = [as_tshark(decode_tcp(101, p)) for p in packets]
    assert check_with_tshark(tmp_path, 113, [sll(p) for p in packets]) == raw
    assert check_with_tshark(tmp_path, 276, [sll2(p) for p in packets]) == raw


def test_vlan_and_qinq(tshark, tmp_path, ipv4_packets, ipv6_packets):
    packets = ipv4_packets + ipv6_packets
    raw = [as_tshark(decode_tcp(101, p)) for p in packets]
    variants = [ethernet(p, 0x8100) for p in packets] + [ethernet(p, 0x88A8, 0x8100) for p in packets]
    assert check_with_tshark(tmp_path, 1, variants) == raw + raw


def test_ethernet_padding_and_trailer_are_not_payload(tshark, tmp_path, ipv4_packets, ipv6_packets):
    packets = ipv4_packets + ipv6_packets
    raw = [as_tshark(decode_tcp(101, p)) for p in packets]
    padded = [ethernet(p) + b"\xaa" * 20 for p in packets]
    assert check_with_tshark(tmp_path, 1, padded) == raw
    assert any(seg[6] == "" for seg in raw) and any(seg[6] for seg in raw)


def test_ipv4_options(tshark, tmp_path, ipv4_packets):
    def with_options(ip: bytes) -> bytes:
        ihl = (ip[0] & 15) * 4
        out = bytearray(ip[:ihl] + b"\x01\x01\x01\x00" + ip[ihl:])  # NOP NOP NOP EOL
        out[0] += 1
        struct.pack_into("!H", out, 2, len(out))
        struct.pack_into("!H", out, 10, 0)
        return bytes(out)

    raw = [as_tshark(decode_tcp(101, p)) for p in ipv4_packets]
    assert check_with_tshark(tmp_path, 101, [with_options(p) for p in ipv4_packets]) == raw


def ipv6_with_headers(ip: bytes, headers: list[tuple[int, bytes]]) -> bytes:
    """Insert extension headers (next-header number, body without the first two bytes)."""
    chain = b""
    nxt = ip[6]
    for number, body in reversed(headers):
        chain = bytes([nxt, (len(body) + 2) // 8 - 1 if number != 44 else 0]) + body + chain
        nxt = number
    out = bytearray(ip[:40] + chain + ip[40:])
    out[6] = nxt
    struct.pack_into("!H", out, 4, len(out) - 40)
    return bytes(out)


HOP_BY_HOP = (0, b"\x01\x04" + bytes(4))  # PadN
DEST_OPTS = (60, b"\x01\x0c" + bytes(12))
ROUTING = (43, b"\x04\x00\x00\x00\x00\x00" + socket.inet_pton(socket.AF_INET6, "::1"))  # segment routing, one segment, none left
ATOMIC_FRAGMENT = (44, struct.pack("!HI", 0, 0x12345678))


def test_ipv6_extension_headers(tshark, tmp_path, ipv6_packets):
    raw = [as_tshark(decode_tcp(101, p)) for p in ipv6_packets]
    variants = [ipv6_with_headers(p, [HOP_BY_HOP, DEST_OPTS, ROUTING, ATOMIC_FRAGMENT]) for p in ipv6_packets]
    assert check_with_tshark(tmp_path, 229, variants) == raw


def test_fragments_are_ignored(ipv4_packets, ipv6_packets):
    for flags_offset in (0x2000, 0x0001, 0x2010):  # more fragments, an offset, both
        ip = bytearray(ipv4_packets[1])
        struct.pack_into("!H", ip, 6, flags_offset)
        assert decode_tcp(101, bytes(ip)) is None
    ip = bytearray(ipv4_packets[1])
    struct.pack_into("!H", ip, 6, 0x4000)  # don't fragment is fine
    assert decode_tcp(101, bytes(ip)) == decode_tcp(101, ipv4_packets[1])
    for frag in (1, 8 << 3, (8 << 3) | 1):
        ip = ipv6_with_headers(ipv6_packets[3], [(44, struct.pack("!HI", frag, 1))])
        assert decode_tcp(229, ip) is None


def test_not_tcp():
    udp = bytes.fromhex("4500001c000000004011" + "0000" + "7f000001" + "7f000001") + bytes(8)
    assert link._ipv4(udp, 0) is None and decode_tcp(101, udp) is None
    arp = bytes(12) + b"\x08\x06" + bytes(28)
    assert decode_tcp(1, arp) is None
    assert decode_tcp(147, bytes(100)) is None  # a link type we don't know
    assert decode_tcp(101, b"\x75" + bytes(60)) is None  # IP version 7


def test_segmentation_offload_zero_lengths(ipv4_packets, ipv6_packets):
    v4 = bytearray(ipv4_packets[1])
    struct.pack_into("!H", v4, 2, 0)
    assert decode_tcp(228, bytes(v4)) == decode_tcp(228, ipv4_packets[1])
    v6 = bytearray(ipv6_packets[3])
    struct.pack_into("!H", v6, 4, 0)
    assert decode_tcp(229, bytes(v6)) == decode_tcp(229, ipv6_packets[3])


def test_bad_tcp_header_length(ipv4_packets):
    ip = bytearray(ipv4_packets[1])
    ihl = (ip[0] & 15) * 4
    ip[ihl + 12] = 0x40  # data offset 4 words
    assert decode_tcp(101, bytes(ip)) is None


def test_every_prefix_is_safe(realdata, live):
    samples = frames(realdata / "arkime/kafka.pcap")[3:4] + frames(live.files["sll2_ns"])[:4]
    linktypes = [1] + [276] * 4
    for frame, linktype in zip(samples, linktypes):
        full = decode_tcp(linktype, frame)
        for cut in range(len(frame)):
            got = decode_tcp(linktype, frame[:cut])
            if got is not None:  # a frame cut by the snaplen keeps its headers and part of its payload
                assert got[:6] == full[:6]
                assert full[6].startswith(got[6])
        for cut in range(len(frame)):
            decode_tcp(linktype, memoryview(frame)[:cut])


def test_decoder_for(realdata):
    for _ts, linktype, frame, _n in open_capture(realdata / "go-sniffer/kafka.pcap").packets():
        assert decoder_for(linktype)(frame) == decode_tcp(linktype, frame)
    assert decoder_for(147) is None


def test_fast_and_careful_paths_agree(realdata, live):
    # the one-unpack path for plain IPv4 must give what the general path gives
    for path, careful in [(realdata / "ndpi/kafka.pcapng", link._ethernet), (live.files["sll"], link._linux_sll),
                          (live.files["sll2_ns"], link._linux_sll2), (live.files["ethernet"], link._ethernet)]:
        for _ts, linktype, frame, _n in open_capture(path).packets():
            assert decode_tcp(linktype, frame) == careful(frame)


def test_memoryview_frames(realdata):
    frame = frames(realdata / "arkime/kafka.pcap")[3]
    got = decode_tcp(1, memoryview(frame))
    assert got == decode_tcp(1, frame)
    assert all(type(part) is bytes for part in (got[0], got[1], got[6]))


def test_format_addr():
    assert format_addr(bytes([10, 0, 0, 5]), 51234) == "10.0.0.5:51234"
    assert format_addr(socket.inet_pton(socket.AF_INET6, "::1"), 9092) == "[::1]:9092"
    assert format_addr(socket.inet_pton(socket.AF_INET6, "fe80::1:0:0:2"), 1) == "[fe80::1:0:0:2]:1"
    assert format_addr(memoryview(bytes([127, 0, 0, 1])), 0) == "127.0.0.1:0"


def test_ack_numbers_agree_with_tshark(realdata):
    path = realdata / "ndpi/kafka.pcapng"
    theirs = [(int(ack) if int(flags, 16) & 0x10 else None)
              for ack, flags in tshark_fields(path, "tcp.ack_raw", "tcp.flags")]
    with open_capture(path) as capture:
        ours = [decode_tcp(lt, data)[7] for _ts, lt, data, _n in capture.packets()]
    assert ours == theirs and any(ours)
