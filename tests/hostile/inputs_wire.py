"""Generators of hostile captures for the capture and wire layers (issue 30, items 7 and 9).

Each function writes one input under ``root`` and returns its path: a gzip'ed pcap whose few
kilobytes or megabytes inflate to what would cost kinspect far more than its size.
- ``zeros_pcap_gz``: one connection on port 9092 whose two directions carry 9 MB of zero bytes,
  a frame of size 0 every 4 bytes (16 KB);
- ``empty_packets_gzip_bomb``: 4.2 MB of gzip, 1.2 GB inside: 17 million empty TCP packets;
- ``empty_records_gzip_bomb``: 4.2 MB of gzip, 2.1 GB inside: pcap records of no bytes;
- ``zeros_gzip_bomb``: 4.2 MB, 256 MB of zeros on port 9092 in sequence first;
- ``tiny_requests_gzip_bomb``: 4.2 MB, 256 MB of 16-byte requests first, one correlation id;
- ``tiny_requests_random_ids``: 4.2 MB of 16-byte requests whose correlation ids are random:
  gzip keeps them at about 2.7:1, so every one is information (730,000 exchanges);
- ``malformed_blocks_pcapng_gz``: 4.2 MB of gzip'ed pcapng blocks of 12 bytes, a problem each;
- ``orphan_responses_gz``: the broker's side only, 9 MB of 8-byte responses with no request.

The bombs repeat one deflate block ended by a full flush (which resets the window, so each copy
decodes alone): gigabytes of input take a second or a few to make.
"""

from __future__ import annotations

import gzip
import random
import struct
import zlib
from pathlib import Path

from tests.hostile.packets import ACK, PSH, Connection, PcapWriter, tcp_frame

MIB = 1 << 20
_PCAP_HEADER = struct.Struct("<IHHiIII")
_PCAP_RECORD = struct.Struct("<IIII")
ETHERNET = 1
START = 1_763_760_000


class _Collect:
    """A PcapWriter's face for Connection, keeping the frames' bytes (all at one time)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def frame(self, data: bytes) -> None:
        self.parts.append(_PCAP_RECORD.pack(START, 0, len(data), len(data)) + data)


def _bomb(path: Path, head: bytes, unit: bytes, compressed_size: int, tail: bytes = b"") -> Path:
    """A gzip file of ``head``, then ``unit`` repeated until the file is about
    ``compressed_size`` bytes, then ``tail``."""
    block = unit * max(1, MIB // len(unit))
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = packer.compress(head) + packer.flush(zlib.Z_FULL_FLUSH)
    piece = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    last = packer.compress(tail) + packer.flush(zlib.Z_FINISH)
    copies = max(1, (compressed_size - len(first) - len(last)) // len(piece))
    crc = zlib.crc32(head)
    for _ in range(copies):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(tail, crc)
    size = len(head) + copies * len(block) + len(tail)
    with open(path, "wb") as out:
        out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")  # gzip, deflate, no name, no time
        out.write(first)
        for _ in range(copies):
            out.write(piece)
        out.write(last)
        out.write(struct.pack("<II", crc, size & 0xFFFFFFFF))
    return path


def _pcap_header() -> bytes:
    return _PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, 262144, ETHERNET)


def _handshake() -> tuple[bytes, Connection]:
    out = _Collect()
    conn = Connection(out)
    conn.handshake()
    return b"".join(out.parts), conn


def zeros_pcap_gz(root: Path, size: int = 9 * MIB) -> Path:
    """One connection on port 9092 after a real handshake, then ``size`` zero bytes sent, half
    by the client and half by the broker, in 65,000-byte segments: frames of size 0 (8.9 KB)."""
    path = root / "zeros.pcap.gz"
    out = PcapWriter(path)  # a real timeline; the file is then gzip'ed whole
    out.file.close()
    out.file = gzip.open(path, "wb", compresslevel=9)
    out.file.write(_pcap_header())
    with out:
        conn = Connection(out)
        conn.handshake()
        zeros = bytes(65000)
        for _ in range(size // 2 // len(zeros)):
            conn.client_segment(0, zeros)
            conn.client_seq += len(zeros)
            conn.server_segment(zeros, ACK | PSH)
            conn.server_seq += len(zeros)
    return path


def empty_packets_gzip_bomb(root: Path, compressed: int = 4_200_000) -> Path:
    """A handshake on port 9092, then the client's empty ACK (54 bytes, no payload) again and
    again, all at one time, gzip'ed at about 1000:1: 4.2 MB for 4.3 GB, 80 million packets."""
    head, conn = _handshake()
    ack = tcp_frame(conn.client, conn.server, conn.sport, conn.dport, conn.client_seq, conn.server_seq, ACK)
    unit = _PCAP_RECORD.pack(START, 0, len(ack), len(ack)) + ack
    return _bomb(root / "empty-packets.pcap.gz", _pcap_header() + head, unit, compressed)


def empty_records_gzip_bomb(root: Path, compressed: int = 4_200_000) -> Path:
    """Pcap records of no bytes (16 bytes each), gzip'ed at about 1000:1: 4.2 MB for 4.3 GB."""
    return _bomb(root / "empty-records.pcap.gz", _pcap_header(), _PCAP_RECORD.pack(START, 0, 0, 0),
                 compressed)


def _stream_bomb(path: Path, head: bytes, conn: Connection, payload: bytes, inflated: int,
                 compressed: int) -> Path:
    """``head``, then client segments of ``payload`` in sequence until ``inflated`` bytes, gzip'ed;
    then the last segment again (a retransmission: cheap to decode) until the file is about
    ``compressed`` bytes, so that making it takes seconds, not minutes."""
    def segment() -> bytes:
        data = tcp_frame(conn.client, conn.server, conn.sport, conn.dport, conn.client_seq,
                         conn.server_seq, ACK | PSH, payload)
        return _PCAP_RECORD.pack(START, 0, len(data), len(data)) + data

    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    crc, size = zlib.crc32(head), len(head)
    with open(path, "wb") as out:
        out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
        out.write(packer.compress(head))
        while size < inflated:
            batch = []
            for _ in range(64):
                batch.append(segment())
                conn.client_seq += len(payload)
            block = b"".join(batch)
            crc, size = zlib.crc32(block, crc), size + len(block)
            out.write(packer.compress(block))
        conn.client_seq -= len(payload)
        unit = segment() * max(1, MIB // (len(payload) + 70))
        out.write(packer.flush(zlib.Z_FULL_FLUSH))
        piece = packer.compress(unit) + packer.flush(zlib.Z_FULL_FLUSH)
        while out.tell() < compressed:
            out.write(piece)
            crc, size = zlib.crc32(unit, crc), size + len(unit)
        out.write(packer.flush(zlib.Z_FINISH))
        out.write(struct.pack("<II", crc, size & 0xFFFFFFFF))
    return path


def zeros_gzip_bomb(root: Path, compressed: int = 4_200_000) -> Path:
    """A handshake on port 9092, then client segments of 65,000 zero bytes in sequence (256 MB of
    frames of size 0), and retransmissions of the last until the file is 4.2 MB."""
    head, conn = _handshake()
    return _stream_bomb(root / "zeros-bomb.pcap.gz", _pcap_header() + head, conn, bytes(65000), 256 * MIB,
                        compressed)


def tiny_requests_gzip_bomb(root: Path, compressed: int = 4_200_000) -> Path:
    """A handshake on port 9092, then client segments each of 4,062 ApiVersions v0 requests of
    16 bytes, all with one correlation id (each an exchange, reused before its response), 256 MB
    of them, and retransmissions until the file is 4.2 MB: the most exchanges per compressed byte."""
    head, conn = _handshake()
    request = struct.pack(">ihhih", 10, 18, 0, 7, 0)
    return _stream_bomb(root / "tiny-requests.pcap.gz", _pcap_header() + head, conn, request * 4062,
                        256 * MIB, compressed)


def tiny_requests_random_ids(root: Path, compressed: int = 4_200_000, seed: int = 30) -> Path:
    """ApiVersions v0 requests of 16 bytes on port 9092, each with a random correlation id (an
    exchange each, none answered), 4,062 a segment, until the gzip'ed file is 4.2 MB."""
    rng = random.Random(seed)
    path = root / "tiny-requests-random-ids.pcap.gz"
    head, conn = _handshake()
    request = struct.Struct(">ihhih")
    with open(path, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as out:
            out.write(_pcap_header() + head)
            while raw.tell() < compressed:
                payload = b"".join(request.pack(10, 18, 0, rng.getrandbits(31), 0) for _ in range(4062))
                data = tcp_frame(conn.client, conn.server, conn.sport, conn.dport, conn.client_seq,
                                 conn.server_seq, ACK | PSH, payload)
                out.write(_PCAP_RECORD.pack(START, 0, len(data), len(data)) + data)
                conn.client_seq += len(payload)
    return path


def malformed_blocks_pcapng_gz(root: Path, compressed: int = 4_200_000) -> Path:
    """A pcapng section and interface, then enhanced packet blocks of 12 bytes (too short to hold
    a packet: one problem each), gzip'ed at about 1000:1 until the file is 4.2 MB."""
    from tests.unit.capture.helpers import idb, shb

    head = shb() + idb(ETHERNET)
    return _bomb(root / "malformed-blocks.pcapng.gz", head, struct.pack("<III", 6, 12, 12), compressed)


def orphan_responses_gz(root: Path, size: int = 9 * MIB) -> Path:
    """The broker's side of a connection on port 9092 only, after a real handshake: 8-byte
    responses (size 4, correlation id 7), none with a request, ``size`` bytes of them gzip'ed."""
    path = root / "orphan-responses.pcap.gz"
    out = PcapWriter(path)
    out.file.close()
    out.file = gzip.open(path, "wb", compresslevel=9)
    out.file.write(_pcap_header())
    with out:
        conn = Connection(out)
        conn.handshake()
        chunk = struct.pack(">ii", 4, 7) * 8000
        for _ in range(size // len(chunk)):
            conn.server_segment(chunk, ACK | PSH)
            conn.server_seq += len(chunk)
    return path
