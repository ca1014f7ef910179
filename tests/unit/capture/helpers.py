"""Test helpers: tshark as the oracle, and writers for the capture variants the readers must take."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

from kinspect.capture.pcap import PcapParser
from kinspect.capture.pcapng import PcapngParser


def tshark_fields(path: Path, *fields: str, display_filter: str | None = None, options: tuple = ()) -> list[list[str]]:
    cmd = ["tshark", "-r", str(path), "-T", "fields", *options]
    if display_filter:
        cmd += ["-Y", display_filter]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def editcap(src: Path, dst: Path, *args: str) -> Path:
    subprocess.run(["editcap", *args, str(src), str(dst)], capture_output=True, check=True)
    return dst


def parse_all(data: bytes, parser_class=None, chunk: int | None = None):
    """Packets and problems from feeding ``data`` to a fresh parser whole or in chunks."""
    if parser_class is None:
        parser_class = PcapngParser if data[:4] == b"\x0a\x0d\x0d\x0a" else PcapParser
    parser = parser_class()
    packets = []
    step = chunk or max(len(data), 1)
    for at in range(0, len(data), step):
        parser.feed(data[at : at + step])
        packets.extend(parser.packets())
    parser.close()
    return packets, parser.problems


# ---- classic pcap ----

def pcap_header(linktype: int, order: str = "<", nanos: bool = False, snaplen: int = 262144) -> bytes:
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    return struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)


def pcap_record(sec: int, frac: int, data: bytes, order: str = "<", origlen: int | None = None) -> bytes:
    return struct.pack(order + "IIII", sec, frac, len(data), len(data) if origlen is None else origlen) + data


def pcap_file(frames, linktype: int, order: str = "<", nanos: bool = False) -> bytes:
    """A pcap of ``frames`` (bytes each), one microsecond (or nanosecond) apart."""
    out = [pcap_header(linktype, order, nanos)]
    out += [pcap_record(1_700_000_000, i, f, order) for i, f in enumerate(frames)]
    return b"".join(out)


def swap_pcap(data: bytes) -> bytes:
    """The same little-endian pcap, written big-endian."""
    fields = struct.unpack_from("<IHHiIII", data)
    out = [struct.pack(">IHHiIII", *fields)]
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, caplen, origlen = struct.unpack_from("<IIII", data, pos)
        out.append(struct.pack(">IIII", sec, frac, caplen, origlen) + data[pos + 16 : pos + 16 + caplen])
        pos += 16 + caplen
    return b"".join(out)


# ---- pcapng ----

def pad4(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def block(btype: int, body: bytes, order: str = "<") -> bytes:
    body = pad4(body)
    length = len(body) + 12
    return struct.pack(order + "II", btype, length) + body + struct.pack(order + "I", length)


def option(code: int, value: bytes, order: str = "<") -> bytes:
    return struct.pack(order + "HH", code, len(value)) + pad4(value)


def end_of_options(order: str = "<") -> bytes:
    return struct.pack(order + "HH", 0, 0)


def shb(order: str = "<") -> bytes:
    return block(0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1), order)


def idb(linktype: int, snaplen: int = 0, tsresol: int | None = None, tsoffset: int | None = None, order: str = "<") -> bytes:
    opts = b""
    if tsresol is not None:
        opts += option(9, bytes([tsresol]), order)
    if tsoffset is not None:
        opts += option(14, struct.pack(order + "q", tsoffset), order)
    if opts:
        opts += end_of_options(order)
    return block(1, struct.pack(order + "HHI", linktype, 0, snaplen) + opts, order)


def epb(iface: int, units: int, data: bytes, order: str = "<", origlen: int | None = None) -> bytes:
    head = struct.pack(order + "IIIII", iface, units >> 32, units & 0xFFFFFFFF, len(data), origlen or len(data))
    return block(6, head + pad4(data), order)


def opb(iface: int, units: int, data: bytes, order: str = "<") -> bytes:
    head = struct.pack(order + "HHIIII", iface, 0, units >> 32, units & 0xFFFFFFFF, len(data), len(data))
    return block(2, head + pad4(data), order)


def spb(data: bytes, order: str = "<", origlen: int | None = None) -> bytes:
    return block(3, struct.pack(order + "I", origlen or len(data)) + pad4(data), order)
