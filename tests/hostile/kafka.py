"""Kafka frames and record batches for hostile inputs.

Bodies go through kinspect's own encoder (kinspect/wire/encode.py) where they are honest; the
hostile parts (10 million array entries, lying lengths) are spliced in by hand, since an encoder
that walks 10 million dicts is too slow for a test session and cannot write a lie.
"""

from __future__ import annotations

import struct
import zlib

import lz4.frame
import snappy
import zstandard

from kinspect.records.codecs import GZIP, LZ4, NONE, SNAPPY, XERIAL_MAGIC, ZSTD
from kinspect.wire.apis import response_header_version
from kinspect.wire.encode import encode_body, encode_request
from tests.unit.records.handmade import v2_batch, varint

PRODUCE, FETCH, OFFSET_COMMIT = 0, 1, 8
CLIENT_ID = "hostile-client"

# The smallest record: length 6, attributes, timestamp delta 0, offset delta 0, null key,
# null value, no headers. Millions of them are the record-count amplification of issue 10.
MINIMAL_RECORD = b"\x0c\x00\x00\x00\x01\x01\x00"
# A record whose length (7) is one byte more than its fields take: each is one problem, and
# the walk goes on to the next.
MALFORMED_RECORD = b"\x0e\x00\x00\x00\x01\x01\x00\x00"
# A record with one header whose key is the single byte 0xff: not UTF-8, one warning each.
NON_UTF8_HEADER_RECORD = b"\x12\x00\x00\x00\x01\x01\x02\x02\xff\x01"

_I32 = struct.Struct(">i")


def frame(payload: bytes) -> bytes:
    return _I32.pack(len(payload)) + payload


def request(api_key: int, version: int, correlation_id: int, body: dict,
            client_id: str | None = CLIENT_ID) -> bytes:
    return encode_request(api_key, version, correlation_id, client_id, body)


def request_header(api_key: int, version: int, correlation_id: int,
                   client_id: str | None = CLIENT_ID) -> bytes:
    """The header alone (no size prefix), for bodies built by hand."""
    whole = encode_request(api_key, version, correlation_id, client_id, {})
    return whole[4:len(whole) - len(encode_body(api_key, version, "request", {}))]


def response_header(api_key: int, version: int, correlation_id: int) -> bytes:
    tags = b"\x00" if response_header_version(api_key, version) == 1 else b""
    return _I32.pack(correlation_id) + tags


def response(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    return frame(response_header(api_key, version, correlation_id)
                 + encode_body(api_key, version, "response", body))


def produce(version: int, correlation_id: int, partitions: dict[int, bytes], topic: str = "t",
            client_id: str | None = CLIENT_ID) -> bytes:
    """A Produce request of one topic; ``partitions`` maps index → record set bytes."""
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": index, "records": records} for index, records in partitions.items()]}]}
    return request(PRODUCE, version, correlation_id, body, client_id)


def produce_response(version: int, correlation_id: int, partitions: int = 1,
                     topic: str = "t") -> bytes:
    body = {"responses": [{"name": topic, "partition_responses": [
        {"index": i, "error_code": 0, "base_offset": 0} for i in range(partitions)]}]}
    return response(PRODUCE, version, correlation_id, body)


def fetch(version: int, correlation_id: int, topic: str = "t") -> bytes:
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1048576}]}]}
    return request(FETCH, version, correlation_id, body)


def fetch_response(version: int, correlation_id: int, records: bytes, topic: str = "t") -> bytes:
    body = {"responses": [{"topic": topic, "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 1, "last_stable_offset": 1,
         "log_start_offset": 0, "preferred_read_replica": -1, "records": records}]}]}
    return response(FETCH, version, correlation_id, body)


def offset_commit(version: int, correlation_id: int, group: str | bytes, topic: str | bytes,
                  client_id: str | None = CLIENT_ID) -> bytes:
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]}
    return request(OFFSET_COMMIT, version, correlation_id, body, client_id)


# ---- record batches ----

def batch(records: bytes, count: int, codec: int = NONE, base_offset: int = 0) -> bytes:
    """A v2 batch of ``count`` records (their bytes before compression), CRC right."""
    payload = records if codec == NONE else compress(codec, records)
    return v2_batch(payload, count, base_offset=base_offset, attributes=codec)


def compressed_batch(codec: int, payload: bytes, count: int, base_offset: int = 0) -> bytes:
    """A v2 batch around an already compressed ``payload`` (a bomb, say)."""
    return v2_batch(payload, count, base_offset=base_offset, attributes=codec)


def compress(codec: int, data: bytes) -> bytes:
    """As Kafka's Java producer writes each codec: gzip stream, xerial snappy, lz4 frame,
    zstd frame without a content size (zstd-jni streams)."""
    if codec == GZIP:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        return packer.compress(data) + packer.flush()
    if codec == SNAPPY:
        return xerial(snappy.compress(data[at:at + 32768]) for at in range(0, len(data), 32768))
    if codec == LZ4:
        return lz4.frame.compress(data)
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=3, write_content_size=False).compress(data)
    raise ValueError(f"codec {codec}")


def xerial(blocks) -> bytes:
    """Xerial snappy framing (magic, version 1, compatible 1) around raw snappy blocks."""
    return XERIAL_MAGIC + struct.pack(">ii", 1, 1) + b"".join(frame(b) for b in blocks)


def bomb(codec: int, size: int) -> bytes:
    """A payload that decompresses to ``size`` zero bytes, built without holding them all."""
    if codec == SNAPPY:  # snappy's ratio is ~21: repeat one compressed 32 KiB block
        block = snappy.compress(b"\0" * 32768)
        return xerial([block] * (size // 32768))
    if codec == ZSTD:
        packer = zstandard.ZstdCompressor(level=3, write_content_size=False).compressobj()
        chunk = b"\0" * (16 << 20)
        return b"".join(packer.compress(chunk) for _ in range(size // len(chunk))) + packer.flush()
    if codec == GZIP:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = b"\0" * (16 << 20)
        return b"".join(packer.compress(chunk) for _ in range(size // len(chunk))) + packer.flush()
    if codec == LZ4:
        return lz4.frame.compress(b"\0" * size)
    raise ValueError(f"codec {codec}")


def record(key: bytes | None, value: bytes | None, offset_delta: int = 0,
           headers: list[tuple[bytes, bytes | None]] = ()) -> bytes:
    """One v2 record with byte keys/values/header keys (which need not be UTF-8)."""
    def sized(data):
        return varint(-1) if data is None else varint(len(data)) + data
    body = b"\x00" + varint(0) + varint(offset_delta) + sized(key) + sized(value)
    body += varint(len(headers)) + b"".join(sized(k) + sized(v) for k, v in headers)
    return varint(len(body)) + body
