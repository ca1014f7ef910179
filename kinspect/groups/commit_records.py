"""The replay's hot path: offset commit records (most of __consumer_offsets) decoded directly.

    decode_commit(key, value) -> (group, topic, partition, value dict or None) | None

Key type 0/1 (group, topic, partition) and OffsetCommitValue v0-v4 with precompiled structs;
None for anything else (another record type, a tagged field, a length that does not fit, bytes
that are not UTF-8), and the caller takes the general decoder, which says what is wrong.
The value dict has the general decoder's keys, so both paths give the same result.
"""

from __future__ import annotations

import struct

_TYPE_AND_LENGTH = struct.Struct(">hh")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_EPOCH = struct.Struct(">qi")
_TWO_I64 = struct.Struct(">qq")


def decode_commit(key: bytes | None, value: bytes | None):
    try:
        parsed = _key(key)
        if parsed is None:
            return None
        if value is None:
            return (*parsed, None)
        decoded = _value(value)
        return None if decoded is None else (*parsed, decoded)
    except (struct.error, UnicodeDecodeError, IndexError):
        return None


def _key(key: bytes | None):
    if key is None or len(key) < 4:
        return None
    record_type, size = _TYPE_AND_LENGTH.unpack_from(key, 0)
    if record_type not in (0, 1) or size < 0 or 6 + size > len(key):
        return None
    group = key[4:4 + size].decode()
    pos = 4 + size
    size = _I16.unpack_from(key, pos)[0]
    pos += 2
    if size < 0 or pos + size + 4 != len(key):
        return None
    topic = key[pos:pos + size].decode()
    return group, topic, _I32.unpack_from(key, pos + size)[0]


def _value(value: bytes) -> dict | None:
    end = len(value)
    if end < 2:
        return None
    version = _I16.unpack_from(value, 0)[0]
    if version >= 3:
        if version > 4:
            return None
        offset, epoch = _OFFSET_EPOCH.unpack_from(value, 2)
        pos = 14
        out = {"offset": offset, "leader_epoch": epoch}
    elif version >= 0:
        out = {"offset": _I64.unpack_from(value, 2)[0]}
        pos = 10
    else:
        return None
    if version == 4:  # flexible: compact string, then tagged fields
        size = value[pos] - 1  # a one-byte uvarint covers metadata up to 126 bytes
        if value[pos] & 0x80 or size < 0 or pos + 1 + size > end:
            return None
        out["metadata"] = value[pos + 1:pos + 1 + size].decode()
        pos += 1 + size
    else:
        size = _I16.unpack_from(value, pos)[0]
        if size < 0 or pos + 2 + size > end:
            return None
        out["metadata"] = value[pos + 2:pos + 2 + size].decode()
        pos += 2 + size
    if version == 1:
        out["commit_timestamp"], out["expire_timestamp"] = _TWO_I64.unpack_from(value, pos)
        pos += 16
    else:
        out["commit_timestamp"] = _I64.unpack_from(value, pos)[0]
        pos += 8
    if version == 4:
        if pos >= end or value[pos] != 0:  # tagged fields present: the general decoder
            return None
        pos += 1
    return out if pos == end else None
