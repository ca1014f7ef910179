"""The C packet fast paths against their Python twins, on real captures and damaged packets."""

from __future__ import annotations

import random

import pytest

from kinspect import native
from kinspect.capture import link, pcap
from kinspect.capture.source import open_capture
from tests.conftest import PCAPS, REALDATA
from tests.unit.native import needs_c

PCAP_FILES = sorted(PCAPS.glob("*.pcap")) + sorted(REALDATA.rglob("*.pcap"))
CAPTURES = sorted(PCAPS.glob("*.pcap*")) + sorted(REALDATA.rglob("*.pcap*"))


def packets_of(path, fast: bool, monkeypatch) -> tuple[list, list, int]:
    monkeypatch.setattr(pcap, "_fast_records",
                        native.packets.pcap_records if fast else None)
    with open_capture(path) as capture:
        got = list(capture.packets())
        problems = [p.to_dict() for p in capture.problems]
    return got, problems, len(got)


@needs_c
@pytest.mark.parametrize("path", PCAP_FILES, ids=lambda p: p.name)
def test_pcap_records_match_the_python_loop(path, monkeypatch):
    fast = packets_of(path, True, monkeypatch)
    assert fast == packets_of(path, False, monkeypatch)
    assert fast[2] > 0


def damaged_files(tmp_path) -> list:
    """Real pcap bytes cut, with a record length blown up, a snaplen-cut record, both byte orders."""
    data = (PCAPS / "librdkafka-mtu1500.pcap").read_bytes()[:200_000]
    rng = random.Random(5)
    cases = {"cut": data[:150_001], "header-only": data[:24], "half-header": data[:30]}
    little = data[:4] == b"\xd4\xc3\xb2\xa1"
    order = "little" if little else "big"
    first = 24
    caplen = int.from_bytes(data[first + 8:first + 12], order)
    second = first + 16 + caplen
    huge = bytearray(data)
    huge[second + 8:second + 12] = (300_000).to_bytes(4, order)
    cases["caplen-too-big"] = bytes(huge)
    snap = bytearray(data)
    snap[first + 12:first + 16] = (caplen + 100).to_bytes(4, order)
    cases["snaplen-cut"] = bytes(snap)
    for i in range(5):
        flipped = bytearray(data)
        at = rng.randrange(24, len(data))
        flipped[at] ^= 1 << rng.randrange(8)
        cases[f"flip-{i}"] = bytes(flipped)
    paths = []
    for name, content in cases.items():
        path = tmp_path / f"{name}.pcap"
        path.write_bytes(content)
        paths.append(path)
    return paths


@needs_c
def test_damaged_pcaps_match_the_python_loop(tmp_path, monkeypatch):
    for path in damaged_files(tmp_path):
        assert packets_of(path, True, monkeypatch) == packets_of(path, False, monkeypatch), path.name


@needs_c
def test_pcap_records_window_checks():
    with pytest.raises(ValueError):
        native.packets.pcap_records(b"x" * 10, 0, 11, True, 1e6, 1, 100, 0, 5)
    assert native.packets.pcap_records(b"", 0, 0, True, 1e6, 1, 100, 0, 5) == ([], 0, 0, 0)


def real_frames() -> list[tuple[int, bytes]]:
    frames = []
    for path in CAPTURES:
        with open_capture(path) as capture:
            frames += [(linktype, bytes(data)) for _, linktype, data, _ in capture.packets()]
    return frames


@pytest.fixture(scope="module")
def frames():
    found = real_frames()
    assert len({linktype for linktype, _ in found}) >= 3  # Ethernet, SLL2, loopback at least
    return found


@needs_c
def test_link_decode_matches_the_python_twin(frames):
    in_c, in_python = link.decoders(True), link.decoders(False)
    assert in_c[link.ETHERNET] is not in_python[link.ETHERNET]
    tcp = 0
    for linktype, data in frames:
        decode = in_c.get(linktype)
        if decode is None:
            continue
        got = decode(data)
        assert got == in_python[linktype](data)
        tcp += got is not None
    assert tcp > 1000


@needs_c
def test_link_decode_on_damaged_frames(frames):
    in_c, in_python = link.decoders(True), link.decoders(False)
    rng = random.Random(11)
    sample = [f for f in frames if f[0] in in_c][::7][:400]
    checked = 0
    for linktype, data in sample:
        for at in range(min(len(data), 60)):  # every link, IP and TCP header byte
            for value in (0, 0xFF, data[at] ^ 0x40, rng.randrange(256)):
                changed = data[:at] + bytes((value,)) + data[at + 1:]
                assert in_c[linktype](changed) == in_python[linktype](changed)
                checked += 1
        for cut in (0, 10, 33, 53, 54, 60):
            assert in_c[linktype](data[:cut]) == in_python[linktype](data[:cut])
    for linktype in in_c:  # every link kind, on raw-IP-looking bytes and on junk
        for data in (b"", b"\x45" * 80, bytes(range(256))):
            assert in_c[linktype](data) == in_python[linktype](data)
    assert checked > 50_000


@pytest.mark.parametrize("path", PCAP_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("shards", [2, 3])
def test_pcap_records_of_leaves_out_only_other_shards_connections(path, shards):
    """The C reader's shard filter against capture/flows.py's flow_shard over link-decoded packets:
    every packet it leaves out is TCP of another shard's connection, and it leaves out all of
    those on plain IPv4 links (the captures here)."""
    from kinspect.capture.flows import flow_shard
    with open_capture(path) as capture:
        every = list(capture.packets())
    others = {}
    for ts, linktype, data, number in every:
        segment = link.decode_tcp(linktype, data)
        if segment is not None:
            src, dst, sport, dport = segment[:4]
            others[number] = flow_shard(src, sport, dst, dport, shards)
    for shard in range(shards):
        with open_capture(path) as capture:
            capture.only_flows(shard, shards)
            kept = list(capture.packets())
            skipped, last = capture.skipped, capture.last_skipped
        left_out = [p for p in every if p[3] not in {k[3] for k in kept}]
        assert kept == [p for p in every if p not in left_out]
        assert all(others.get(p[3], shard) != shard for p in left_out)
        plain_ipv4 = [p for p in every if others.get(p[3], shard) != shard and link.NATIVE_KINDS.get(p[1]) is not None
                      and link.decode_tcp(p[1], p[2]) is not None]
        assert skipped == len(left_out) <= len(plain_ipv4)
        assert last == ((left_out[-1][3], left_out[-1][0]) if left_out else (0, 0.0))


@needs_c
def test_pcap_records_of_passes_what_it_cannot_tell():
    """IPv4 with options, fragments and IPv6 go to the Python loop whatever their shard."""
    import struct
    tcp = struct.pack("!HHIIBBHHH", 40000, 9092, 1, 0, 0x50, 0x18, 65535, 0, 0) + b"data"
    options = struct.pack("!BBHHHBBH4s4s", 0x46, 0, 44 + 4, 0, 0, 64, 6, 0, b"\x0a\x00\x00\x01",
                          b"\x0a\x00\x00\x02") + b"\x01\x01\x01\x00" + tcp
    fragment = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 44, 0, 0x2000, 64, 6, 0, b"\x0a\x00\x00\x01",
                           b"\x0a\x00\x00\x02") + tcp
    simple = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 44, 0, 0, 64, 6, 0, b"\x0a\x00\x00\x01",
                         b"\x0a\x00\x00\x02") + tcp
    buf = b"".join(struct.pack("<IIII", 1, i, len(f), len(f)) + f for i, f in enumerate([options, fragment, simple]))
    skips = []
    for shard in range(2):
        packets, pos, number, cut, skipped, *last = native.packets.pcap_records_of(
            buf, 0, len(buf), True, 1e6, 101, 65535, 0, 100, 4, shard, 2)
        assert pos == len(buf) and number == 3 and [p[3] for p in packets[:2]] == [1, 2]
        assert len(packets) + skipped == 3
        skips.append(skipped)
    assert sorted(skips) == [0, 1]  # the plain packet: left out by the one shard it is not
    with pytest.raises(ValueError):
        native.packets.pcap_records_of(buf, 0, len(buf), True, 1e6, 101, 65535, 0, 100, 4, 2, 2)
    one = native.packets.pcap_records_of(buf, 0, len(buf), True, 1e6, 101, 65535, 0, 100, 4, 0, 1)
    assert len(one[0]) == 3 and one[4:] == (0, 0, 0.0)  # one shard: everything, and the same shape
