"""The byte layouts that turn one fuzz input into structured input for a parser, and back.

A harness reads its input with a Cursor; seeds.py writes real data in the same layout with the
encoders here, so that every seed is a real unit that the fuzzer then mutates. A Cursor never
fails: past the end of the input it reads zeros and empty bytes, so every input means something.
"""

from __future__ import annotations

import struct

NULL16 = 0xFFFF  # a u16 length meaning "null"
# The link types a link input picks from by its first byte (Ethernet, Linux SLL and SLL2, BSD
# loopback twice, raw IP in three numberings, raw IPv4, raw IPv6), and one kinspect does not read.
LINK_TYPES = (1, 113, 276, 0, 108, 101, 12, 14, 228, 229, 147)


class Cursor:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    @property
    def left(self) -> int:
        return len(self.data) - self.pos

    def u8(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def _int(self, size: int) -> int:
        raw = self.take(size)
        return int.from_bytes(raw.ljust(size, b"\0"), "big")

    def u16(self) -> int:
        return self._int(2)

    def u32(self) -> int:
        return self._int(4)

    def take(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += len(out)
        return out

    def rest(self) -> bytes:
        return self.take(self.left)

    def sized(self) -> bytes:
        """A u16 length, then that many bytes."""
        return self.take(self.u16())

    def nullable(self) -> bytes | None:
        """A u16 length (NULL16: None), then that many bytes."""
        n = self.u16()
        return None if n == NULL16 else self.take(n)


def sized(data: bytes) -> bytes:
    return struct.pack(">H", len(data)) + data


def nullable(data: bytes | None) -> bytes:
    return struct.pack(">H", NULL16) if data is None else sized(data[:NULL16 - 1])


# -- one direction or two directions of a byte stream, with losses (frames, session) ------------

DATA, GAP, END = 0, 1, 2
STREAM_CHUNK = 0xFFFE


def stream_op(kind: int, reverse: bool = False, data: bytes = b"", missing: int = 0) -> bytes:
    """One event: a kind byte (bit 7: the server→client direction), then DATA: u16-sized bytes,
    GAP: u16 missing bytes, END: nothing."""
    head = bytes([kind | (0x80 if reverse else 0)])
    if kind == DATA:
        return b"".join(head + sized(data[i:i + STREAM_CHUNK])
                        for i in range(0, max(len(data), 1), STREAM_CHUNK))
    if kind == GAP:
        return head + struct.pack(">H", min(missing, 0xFFFF))
    return head


def stream_ops(cursor: Cursor):
    """(kind, reverse, data, missing) until the input ends."""
    while cursor.left:
        op = cursor.u8()
        kind, reverse = op & 3, bool(op & 0x80)
        if kind == DATA:
            yield DATA, reverse, cursor.sized(), 0
        elif kind == GAP:
            yield GAP, reverse, b"", cursor.u16() or 1
        else:
            yield END, reverse, b"", 0


# -- TCP segments -------------------------------------------------------------------------------

ACK_FLAG = 0x10


def segment(flow: int, flags: int, seq: int, ack: int | None, payload: bytes) -> bytes:
    """flow: which of 8 directions (bit 0 the reverse one of a pair); ack only with ACK set."""
    out = struct.pack(">BBI", flow & 7, flags & 0xFF, seq & 0xFFFFFFFF)
    if flags & ACK_FLAG:
        out += struct.pack(">I", (ack or 0) & 0xFFFFFFFF)
    return out + sized(payload[:0xFFFF])


def segments(cursor: Cursor):
    """(flow index, flags, seq, ack or None, payload) until the input ends."""
    while cursor.left:
        flow, flags, seq = cursor.u8() & 7, cursor.u8(), cursor.u32()
        ack = cursor.u32() if flags & ACK_FLAG else None
        yield flow, flags, seq, ack, cursor.sized()


# -- records of a coordinator topic (replay) ----------------------------------------------------

TRANSACTIONAL, CONTROL_COMMIT, CONTROL_ABORT = 1, 2, 4


def replay_entry(flags: int, producer: int, offset_step: int, key: bytes | None,
                 value: bytes | None) -> bytes:
    return bytes([flags & 0xFF, producer & 0xFF, offset_step & 0xFF]) + nullable(key) + nullable(value)


def replay_entries(cursor: Cursor):
    """(flags, producer id, offset step, key, value) until the input ends."""
    while cursor.left:
        yield cursor.u8(), cursor.u8(), cursor.u8(), cursor.nullable(), cursor.nullable()


# -- two files: an index and its segment, a txnindex and its segment ----------------------------

def pair(first: bytes, second: bytes | None) -> bytes:
    """u32 length of the first (0xFFFFFFFF: no second file), the first, then the second."""
    if second is None:
        return struct.pack(">I", 0xFFFFFFFF) + first
    return struct.pack(">I", len(first)) + first + second


def unpair(cursor: Cursor) -> tuple[bytes, bytes | None]:
    n = cursor.u32()
    if n == 0xFFFFFFFF:
        return cursor.rest(), None
    return cursor.take(n), cursor.rest()


# -- TLS (fuzz_tls): what an input exercises, and the fixed keys its sealed records use ---------

TLS_FRAME, TLS_EXTENSIONS, TLS_KEYLOG, TLS_RECORDS, TLS_LAYER = range(5)
# a records input's mode byte picks one of these (native/_tls.c open_run's modes): suite code
TLS_SUITES = (0x1301, 0xC02B, 0xCCA9)  # TLS 1.3 AES-128-GCM; TLS 1.2 AES-128-GCM; TLS 1.2 ChaCha20


def tls_fixed_keys(suite) -> tuple[bytes, bytes]:
    """The key and IV every records input is opened with (seeds are sealed with them)."""
    return bytes(range(1, suite.key_size + 1)), bytes(range(100, 100 + suite.iv_size))


def tls_conversation(keylog: bytes, chunks: list[tuple[str, bytes]]) -> bytes:
    """A layer input: the key log, then each chunk: side (0 client, 1 server), u16 size, bytes."""
    out = bytearray(sized(keylog))
    for side, data in chunks:
        for at in range(0, len(data), 0xFFFF):
            piece = data[at:at + 0xFFFF]
            out += bytes([side == "server"]) + sized(piece)
    return bytes(out)


def tls_chunks(cursor: Cursor) -> list[tuple[int, bytes]]:
    chunks = []
    while cursor.left:
        side = cursor.u8() & 1
        chunks.append((side, cursor.sized()))
    return chunks
