"""Hand-built bytes for edge cases only (real batches come from Kafka, kafka-python, aiokafka)."""

from __future__ import annotations

import struct
import zlib

from crc32c import crc32c

V2_HEADER = struct.Struct(">qiibIhiqqqhii")


def varint(value: int) -> bytes:
    """Zigzag varint, as Kafka writes record fields."""
    raw = (value << 1) ^ (value >> 63)
    return uvarint(raw & 0xFFFFFFFFFFFFFFFF)


def uvarint(raw: int) -> bytes:
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def record(body: bytes) -> bytes:
    """Prefix a record body (attributes onwards) with its varint length."""
    return varint(len(body)) + body


def record_body(offset_delta: int = 0, timestamp_delta: int = 0, key: bytes | None = b"k",
                value: bytes | None = b"v", headers: bytes = b"\x00") -> bytes:
    def sized(data):
        return varint(-1) if data is None else varint(len(data)) + data
    return (b"\x00" + varint(timestamp_delta) + varint(offset_delta) + sized(key) + sized(value)
            + headers)


def v2_batch(records: bytes, count: int, *, base_offset: int = 0, attributes: int = 0,
             last_offset_delta: int | None = None, base_timestamp: int = 1_700_000_000_000,
             max_timestamp: int | None = None, producer_id: int = -1, producer_epoch: int = -1,
             base_sequence: int = -1, leader_epoch: int = 0) -> bytes:
    body = V2_HEADER.pack(
        base_offset, 49 + len(records), leader_epoch, 2, 0, attributes,
        count - 1 if last_offset_delta is None else last_offset_delta, base_timestamp,
        base_timestamp if max_timestamp is None else max_timestamp, producer_id, producer_epoch,
        base_sequence, count) + records
    return reseal(body)


def reseal(batch: bytes | bytearray) -> bytes:
    """Fix the length and CRC of a (possibly edited) v2 batch or legacy message."""
    batch = bytearray(batch)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    if batch[16] == 2:
        struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    else:
        struct.pack_into(">I", batch, 12, zlib.crc32(bytes(batch[16:])))
    return bytes(batch)


def legacy_message(offset: int, magic: int, attributes: int, key: bytes | None,
                   value: bytes | None, timestamp: int = 1_700_000_000_000) -> bytes:
    def sized(data):
        return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += sized(key) + sized(value)
    return reseal(struct.pack(">qiI", offset, 0, 0) + body)
