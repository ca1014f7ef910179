"""TLS record framing, sans-I/O: one direction's bytes in, whole records out.

A record is ``type(1) version(2) length(2) fragment``; RFC 8446 5.2 and RFC 5246 6.2.3 bound
the fragment at 2^14 + 2048 (TLS 1.2 ciphertext; 1.3 allows 2^14 + 256). Records may be split
over TCP segments and many may share one: ``feed()`` keeps the unfinished tail (at most one
record) and returns the complete ones. A header that cannot be a record (unknown type, major
version not 3, length past the bound) stops the reader with ``error`` set: the stream is out of
step, or not TLS.
"""

from __future__ import annotations

import struct

from kinspect.native import tls as _native

CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA, HEARTBEAT = 20, 21, 22, 23, 24
CONTENT_TYPES = frozenset({CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA, HEARTBEAT})
MAX_FRAGMENT = (1 << 14) + 2048
MAX_PARTS = 256  # pieces of an unfinished record held apart before they are joined
HEADER = 5
_header = struct.Struct(">BHH").unpack_from


def plausible_header(data, pos: int = 0) -> bool:
    """The 5 bytes at ``pos`` can start a TLS record (SSL 3.0 to TLS 1.3 framing)."""
    if len(data) - pos < HEADER:
        return False
    ctype, version, length = _header(data, pos)
    return ctype in CONTENT_TYPES and version >> 8 == 3 and version & 0xFF <= 4 and 0 < length <= MAX_FRAGMENT


def record_length(data, pos: int = 0) -> int:
    """The fragment length in the record header at ``pos`` (5 bytes there)."""
    return _header(data, pos)[2]


def frame_py(data, base: int, max_fragment: int) -> tuple[list, int, int]:
    """The whole records at the head of ``data`` as (type, version, fragment, offset), offsets
    from ``base``; where the unfinished rest starts; where a header that cannot be a record
    starts (-1: none). The twin of native/_tls.c's frame, used where that is not built."""
    out = []
    end = len(data)
    pos = 0
    if end >= HEADER:
        view = memoryview(data)
        header = _header
        while end - pos >= HEADER:
            ctype, version, length = header(data, pos)
            if ctype not in CONTENT_TYPES or version >> 8 != 3 or length > max_fragment:
                return out, pos, pos
            stop = pos + HEADER + length
            if stop > end:
                break
            out.append((ctype, version, view[pos + HEADER:stop], base + pos))
            pos = stop
    return out, pos, -1


_frame = _native.frame if _native is not None else frame_py


class RecordReader:
    """Bytes in, ``(type, version, fragment, offset)`` out; ``offset`` is the record's position in
    the stream. The fragment is a memoryview valid until the next ``feed()``. An unfinished
    record is held as its pieces, joined once it is whole: linear however small the pieces."""

    __slots__ = ("parts", "held", "need", "offset", "error")

    def __init__(self, offset: int = 0) -> None:
        self.parts: list[bytes] = []  # the pieces of an unfinished record
        self.held = 0  # their bytes
        self.need = 0  # the bytes of the whole record, or of its header while that is cut (5)
        self.offset = offset  # stream position of the first held byte (with error: of the bad header)
        self.error: str | None = None

    def feed(self, data) -> list:
        if self.error is not None:
            return []
        if self.held:
            parts = self.parts
            parts.append(bytes(data))
            self.held += len(data)
            if self.held < self.need:
                if len(parts) > MAX_PARTS:  # tiny pieces cost more than their bytes: one now and then
                    self.parts = [b"".join(parts)]
                return []
            data = b"".join(parts)
        base = self.offset
        records, pos, bad = _frame(data, base, MAX_FRAGMENT)
        end = len(data)
        if bad >= 0:
            self.error = (f"not a TLS record header at stream byte {base + bad}: "
                          f"{bytes(data[bad:bad + HEADER]).hex(' ')}")
            self.parts, self.held = [], 0
            self.offset = base + bad
            return records
        if pos < end:
            rest = bytes(data[pos:])
            self.parts, self.held = [rest], len(rest)
            self.need = HEADER + record_length(rest) if len(rest) >= HEADER else HEADER
        elif self.held:
            self.parts, self.held = [], 0
        self.offset = base + pos
        return records

    @property
    def tail(self) -> bytes:
        """The held bytes of an unfinished record."""
        return b"".join(self.parts)

    @property
    def buffered(self) -> int:
        return self.held
