"""LZ4 frame header checksums in a capture's raw TCP streams: which way each one was computed.

An oracle that needs neither kinspect nor a Kafka decoder. tshark gives each TCP segment's
payload; the segments of each (stream, direction) are joined in sequence order; every LZ4
frame magic found in a legacy wrapper message (null key, codec bits 3) is read with the magic
byte of the message around it. KIP-57: Kafka before 0.10 hashed the frame from its magic number
through the descriptor for the header checksum byte; the LZ4 spec hashes the descriptor only.
Kafka keeps the old way for magic 0 and the right one for magic 1.
"""

from __future__ import annotations

import struct
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import xxhash

FRAME_MAGIC = b"\x04\x22\x4d\x18"
NULL_KEY = b"\xff\xff\xff\xff"
LZ4 = 3


@dataclass(frozen=True)
class Frame:
    message_magic: int     # of the wrapper message holding the frame
    checksum: int          # the header checksum byte as written
    spec: int              # xxh32(descriptor) >> 8 & 0xff
    kip57: int             # xxh32(frame magic + descriptor) >> 8 & 0xff

    @property
    def kind(self) -> str:
        if self.checksum == self.spec == self.kip57:
            return "either"
        if self.checksum == self.spec:
            return "spec"
        return "kip57" if self.checksum == self.kip57 else "neither"


def tcp_streams(capture: Path) -> list[bytes]:
    """The payload bytes of each (TCP stream, direction), segments in sequence order."""
    out = subprocess.run(["tshark", "-n", "-r", str(capture),
                          "-o", "tcp.relative_sequence_numbers:FALSE", "-Y", "tcp.len > 0",
                          "-T", "fields", "-e", "tcp.stream", "-e", "tcp.srcport",
                          "-e", "tcp.seq", "-e", "tcp.payload"],
                         capture_output=True, text=True, check=True).stdout
    segments: dict[tuple[str, str], dict[int, bytes]] = defaultdict(dict)
    for line in out.splitlines():
        stream, port, seq, payload = line.split("\t")
        segments[(stream, port)][int(seq)] = bytes.fromhex(payload.replace(":", ""))
    return [b"".join(parts[s] for s in sorted(parts)) for parts in segments.values()]


def wrapper_frames(data: bytes) -> list[Frame]:
    frames = []
    at = data.find(FRAME_MAGIC)
    while at >= 0:
        magic = _message_magic(data, at)
        if magic is not None and at + 7 <= len(data):
            flags = data[at + 4]
            end = at + 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
            if end < len(data):
                frames.append(Frame(magic, data[end], _checksum(data[at + 4:end]),
                                    _checksum(data[at:end])))
        at = data.find(FRAME_MAGIC, at + 1)
    return frames


def _checksum(header: bytes) -> int:
    """The LZ4 frame header checksum byte of these bytes: the second byte of their xxh32."""
    return (xxhash.xxh32(header).intdigest() >> 8) & 0xFF


def _message_magic(data: bytes, at: int) -> int | None:
    """The magic of the wrapper whose value starts at `at`, if the bytes before it are one:
    ... magic, attributes (lz4), [timestamp if magic 1], key length -1, value length."""
    if at < 18 or data[at - 8:at - 4] != NULL_KEY:
        return None
    (value_length,) = struct.unpack_from(">i", data, at - 4)
    if value_length <= 0:
        return None
    if data[at - 10] == 0 and data[at - 9] & 0x07 == LZ4:
        return 0
    if data[at - 18] == 1 and data[at - 17] & 0x07 == LZ4:
        return 1
    return None


def capture_frames(capture: Path) -> list[Frame]:
    return [frame for data in tcp_streams(capture) for frame in wrapper_frames(data)]
