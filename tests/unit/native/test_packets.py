"""The C packet fast paths against their Python twins, on real captures and damaged packets."""

from __future__ import annotations

import random

import pytest

from kinspect import native
from kinspect.capture import link, pcap
from kinspect.capture.source import open_capture
from tests.conftest import PCAPS, REALDATA

PCAP_FILES = sorted(PCAPS.glob("*.pcap")) + sorted(REALDATA.rglob("*.pcap"))
CAPTURES = sorted(PCAPS.glob("*.pcap*")) + sorted(REALDATA.rglob("*.pcap*"))


def packets_of(path, fast: bool, monkeypatch) -> tuple[list, list, int]:
    monkeypatch.setattr(pcap, "_fast_records",
                        native.packets.pcap_records if fast else None)
    with open_capture(path) as capture:
        got = list(capture.packets())
        problems = [p.to_dict() for p in capture.problems]
    return got, problems, len(got)


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


def test_damaged_pcaps_match_the_python_loop(tmp_path, monkeypatch):
    for path in damaged_files(tmp_path):
        assert packets_of(path, True, monkeypatch) == packets_of(path, False, monkeypatch), path.name


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
