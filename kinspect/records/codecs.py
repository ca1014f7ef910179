"""Decompression for Kafka's record codecs, bounded and exception-free.

``decompress(codec, payload, max_output, magic)`` returns ``(data, notes)``: ``data`` is the
decompressed bytes or None when the payload could not be decompressed, ``notes`` a list of
``(severity, text)`` the caller turns into Problems (it knows the path and byte position).
Output never exceeds ``max_output`` bytes: the bound is checked before or while inflating.

Each codec's library is imported when a payload first needs it (``_load``): the four of them
(lz4, python-snappy with cramjam, zstandard, isal) were 25-37M instructions of every run's
start-up, a tenth of it, and most captures use one or two codecs or none.
"""

from __future__ import annotations

import struct
import zlib

from kinspect.problems import ERROR, WARNING

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
DEFAULT_MAX_OUTPUT = 64 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic, int32 version, int32 minimum compatible version
_INT32 = struct.Struct(">i")
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_GZIP_DEFLATE_START = b"\x1f\x8b\x08"  # gzip magic, compression method 8 (deflate)
_GZIP_RESERVED_FLAGS = 0xE0
# lz4 and zstd (without a content size) allocate their whole output bound up front: with the
# 64 MiB default that is a fresh memory mapping per batch. A first try within a bound in
# proportion to the payload spares it; anything else goes the full-bound way as before.
_FIRST_TRY_RATIO = 32
_FIRST_TRY_MIN = 64 * 1024

Notes = list[tuple[str, str]]

# The libraries and what is made from them, bound by _load when a codec is first met
isal_zlib = snappy = lz4 = zstandard = None
_lz4_context = _lz4_chunk = _ZSTD = None


def codec_name(codec: int) -> str:
    return CODEC_NAMES.get(codec, f"unknown({codec})")


def decompress(codec: int, payload: bytes | memoryview, max_output: int = DEFAULT_MAX_OUTPUT,
               magic: int = 2, raise_bound: str = "the max_output bound") -> tuple[bytes | None, Notes]:
    """``raise_bound`` ends the note when the output would pass ``max_output``: how to raise it."""
    notes: Notes = []
    decoder = _DECODERS.get(codec)
    if decoder is None:
        if codec not in _LIBRARIES:
            notes.append((ERROR, f"unknown compression codec {codec}"))
            return None, notes
        decoder = _load(codec)
    try:
        data = decoder(payload, max_output, magic, notes)
    except _TooBig as e:
        notes.append((ERROR, f"{codec_name(codec)} payload decompresses to more than {max_output} "
                             f"bytes{e.detail} ({raise_bound})"))
        return None, notes
    except _Corrupt as e:
        notes.append((ERROR, f"{codec_name(codec)} payload does not decompress: {e}"))
        return None, notes
    except _ERRORS as e:
        notes.append((ERROR, f"{codec_name(codec)} payload does not decompress: {e}"))
        return None, notes
    return data, notes


class _TooBig(Exception):
    def __init__(self, detail: str = ""):
        super().__init__(detail)
        self.detail = detail


class _Corrupt(Exception):
    pass


def _gzip(payload, max_output, magic, notes) -> bytes:
    data = bytes(payload)
    whole = _one_gzip_member(data, max_output)
    if whole is not None:
        return whole
    return _gzip_members(data, max_output, notes)


def _one_gzip_member(data: bytes, max_output: int) -> bytes | None:
    """A payload that is exactly one sound gzip member, inflated by ISA-L (about 3x zlib's
    speed); None for anything else, which zlib then decides and words as it always has.
    ISA-L lets reserved header flags pass where zlib refuses them, so those never come here."""
    if data[:3] != _GZIP_DEFLATE_START or len(data) < 4 or data[3] & _GZIP_RESERVED_FLAGS:
        return None
    inflater = isal_zlib.decompressobj(31)
    try:
        out = inflater.decompress(data, max_output + 1)
    except isal_zlib.error:
        return None
    if inflater.eof and not inflater.unused_data and len(out) <= max_output:
        return out
    return None


def _gzip_members(data: bytes, max_output: int, notes: Notes) -> bytes:
    # Java's GZIPInputStream reads concatenated members; so do we.
    out = []
    produced = 0
    rest = data
    while True:
        inflater = zlib.decompressobj(31)
        chunk = inflater.decompress(rest, max_output - produced + 1)
        produced += len(chunk)
        if produced > max_output:
            raise _TooBig()
        out.append(chunk)
        if not inflater.eof:
            if inflater.unconsumed_tail:
                raise _TooBig()
            raise _Corrupt("gzip stream is truncated")
        rest = inflater.unused_data
        if not rest:
            break
        if rest[:2] != b"\x1f\x8b":
            notes.append((WARNING, f"{len(rest)} bytes after the end of the gzip stream"))
            break
    return b"".join(out)


def _snappy(payload, max_output, magic, notes) -> bytes:
    data = bytes(payload)
    if data.startswith(XERIAL_MAGIC):
        return _snappy_xerial(data, max_output)
    return _snappy_raw(data, max_output)


def _snappy_raw(block: bytes, max_output: int) -> bytes:
    length = _snappy_uncompressed_length(block)
    if length > max_output:
        raise _TooBig(f" (its preamble says {length})")
    return snappy.uncompress(block)


def _snappy_uncompressed_length(block: bytes) -> int:
    value = shift = 0
    for i, byte in enumerate(block[:5]):
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
    raise _Corrupt("bad snappy length preamble")


def _snappy_xerial(data: bytes, max_output: int) -> bytes:
    if len(data) < _XERIAL_HEADER_SIZE:
        raise _Corrupt("xerial snappy header is truncated")
    out = []
    produced = 0
    pos, end = _XERIAL_HEADER_SIZE, len(data)
    while pos < end:
        if end - pos < 4:
            raise _Corrupt(f"xerial snappy chunk length truncated at payload byte {pos}")
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or size > end - pos:
            raise _Corrupt(f"xerial snappy chunk of {size} bytes at payload byte {pos - 4} "
                           f"overruns the {end - pos} bytes left")
        chunk = _snappy_raw(data[pos:pos + size], max_output - produced)
        produced += len(chunk)
        out.append(chunk)
        pos += size
    return b"".join(out)


def _lz4(payload, max_output, magic, notes) -> bytes:
    frame = payload  # lz4 and zstd read any buffer: no copy of the compressed bytes
    frame, broken_checksum = _repair_kip57_header_checksum(frame)
    if broken_checksum and magic != 0:
        notes.append((WARNING, "lz4 frame header checksum computed the pre-KIP-57 (broken) way, "
                               "which Kafka accepts only for magic 0"))
    data = _first_try(_lz4_within, frame, max_output)
    if data is not None:
        return data
    inflater = lz4.frame.LZ4FrameDecompressor()
    data = inflater.decompress(frame, max_length=max_output + 1)
    if len(data) > max_output:
        raise _TooBig()
    if not inflater.eof:
        raise _Corrupt("lz4 frame is truncated (no end mark)")
    if inflater.unused_data:
        notes.append((WARNING, f"{len(inflater.unused_data)} bytes after the end of the lz4 frame"))
    return data


def _lz4_within(frame: bytes | memoryview, bound: int) -> bytes | None:
    """The frame's output within bound, when the frame ends exactly at its end mark: what
    LZ4FrameDecompressor's decompress gives, without that class's Python (one C call)."""
    data, used, end_mark = _lz4_chunk(_lz4_context(), frame, max_length=bound)
    return data if end_mark and used == len(frame) else None


def _first_try(within, payload: bytes, max_output: int) -> bytes | None:
    """within(payload, bound)'s output, if a bound below max_output held all of it."""
    bound = max(_FIRST_TRY_MIN, _FIRST_TRY_RATIO * len(payload))
    if bound >= max_output:
        return None
    try:
        return within(payload, bound)
    except Exception:  # too big for the bound, or damaged: the full way decides and reports
        return None


def _repair_kip57_header_checksum(frame: bytes | memoryview) -> tuple[bytes | memoryview, bool]:
    """Kafka < 0.10 hashed magic..BD instead of FLG..BD for the header checksum byte (KIP-57)."""
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        return frame, False
    flags = frame[4]
    descriptor_end = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if len(frame) <= descriptor_end:
        return frame, False
    found = frame[descriptor_end]
    correct = _header_checksum(frame[4:descriptor_end])
    if found == correct:
        return frame, False
    if found != (xxh32(frame[:descriptor_end]) >> 8) & 0xFF:
        return frame, False  # just wrong: let lz4 report it
    return bytes(frame[:descriptor_end]) + bytes((correct,)) + bytes(frame[descriptor_end + 1:]), True


def _header_checksum(descriptor: bytes | memoryview) -> int:
    """The LZ4 frame header checksum byte of FLG..BD; those of the two-byte descriptors (no
    content size, no dictionary: Kafka's clients write them) are kept, at most 65,536."""
    if len(descriptor) != 2:
        return (xxh32(descriptor) >> 8) & 0xFF
    key = bytes(descriptor)
    checksum = _DESCRIPTOR_CHECKSUMS.get(key)
    if checksum is None:
        checksum = _DESCRIPTOR_CHECKSUMS[key] = (xxh32(key) >> 8) & 0xFF
    return checksum


_DESCRIPTOR_CHECKSUMS: dict[bytes, int] = {}


def _zstd(payload, max_output, magic, notes) -> bytes:
    data = payload
    declared = zstandard.frame_content_size(data)
    if declared > max_output:
        raise _TooBig(f" (its frame header says {declared})")
    if declared < 0:  # unknown: the bound is allocated
        first = _first_try(_zstd_within, data, max_output)
        if first is not None:
            return first
    try:
        return _ZSTD.decompress(data, max_output_size=max_output)
    except zstandard.ZstdError:
        if declared < 0 and _zstd_exceeds(data, max_output):
            raise _TooBig() from None
        raise


def _zstd_within(data: bytes, bound: int) -> bytes:
    return _ZSTD.decompress(data, max_output_size=bound)


def _zstd_exceeds(data: bytes, max_output: int) -> bool:
    reader = zstandard.ZstdDecompressor().stream_reader(data)
    produced = 0
    try:
        while produced <= max_output:
            chunk = reader.read(min(1 << 20, max_output + 1 - produced))
            if not chunk:
                return False
            produced += len(chunk)
    except zstandard.ZstdError:
        return False
    return True


def _load(codec: int):
    """Import the codec's library, bind the names its decoder uses, and return the decoder."""
    global isal_zlib, snappy, lz4, _lz4_context, _lz4_chunk, zstandard, _ZSTD, _ERRORS
    if codec == GZIP:
        from isal import isal_zlib
    elif codec == SNAPPY:
        import snappy
        _ERRORS += (snappy.UncompressError,)
    elif codec == LZ4:
        import lz4.frame
        _lz4_context, _lz4_chunk = lz4.frame.create_decompression_context, lz4.frame.decompress_chunk
    else:
        import zstandard
        # One context for every one-shot decompression (each call starts afresh): making one per
        # batch cost 8.5 of its 11.5 us on a 5 KB frame.
        _ZSTD = zstandard.ZstdDecompressor()
        _ERRORS += (zstandard.ZstdError,)
    decoder = _DECODERS[codec] = _LIBRARIES[codec]
    return decoder


_LIBRARIES = {GZIP: _gzip, SNAPPY: _snappy, LZ4: _lz4, ZSTD: _zstd}
_DECODERS: dict = {}  # those whose library _load imported
_ERRORS: tuple = (zlib.error, RuntimeError, ValueError)  # and each loaded library's own

_P1, _P2, _P3, _P4, _P5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1
_M32 = 0xFFFFFFFF
_U32LE = struct.Struct("<I")


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 (the LZ4 frame format's hash). Only ever used on a few header bytes."""
    n = len(data)
    pos = 0
    if n >= 16:
        acc = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for lane in range(4):
                word = _U32LE.unpack_from(data, pos + 4 * lane)[0]
                acc[lane] = (_rotl((acc[lane] + word * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        h = (_rotl(acc[0], 1) + _rotl(acc[1], 7) + _rotl(acc[2], 12) + _rotl(acc[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        h = (_rotl((h + _U32LE.unpack_from(data, pos)[0] * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h = ((h ^ (h >> 15)) * _P2) & _M32
    h = ((h ^ (h >> 13)) * _P3) & _M32
    return h ^ (h >> 16)
