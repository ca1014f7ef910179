"""Broker addresses in responses, rewritten to the proxy's own listeners.

Every address a client learns from a broker is in one of these places (field names are Kafka's):

    API (key)              versions  where                         node id field
    Metadata (3)           0+        brokers[]                     node_id
    FindCoordinator (10)   0-3       the body itself               node_id  (-1: no coordinator)
    FindCoordinator (10)   4+        coordinators[]                node_id
    DescribeCluster (60)   0+        brokers[]                     broker_id
    Produce (0)            10+       node_endpoints[] (tag 0)      node_id  (KIP-951 new leaders)
    Fetch (1)              16+       node_endpoints[] (tag 0)      node_id  (KIP-951 new leaders)

Each entry carries ``host`` and ``port``. KIP-951 fills ``node_endpoints`` only for partitions whose
error is NOT_LEADER_OR_FOLLOWER (6) or FENCED_LEADER_EPOCH (74): a Produce or Fetch response whose
bytes hold neither int16 goes on without being decoded (the relay's common case). A response
holding entries is decoded (record sets kept as
bytes), its addresses replaced, and encoded again at its own version (wire/encode.py); the frame
gets its new length. When the body does not decode cleanly, or encoding the decoded body does not
give back the broker's bytes, the frame goes unchanged and the caller counts it.

Metadata, whose topics can make a response of megabytes (and whose brokers, from a hostile
broker, 100,000 of them), is not decoded whole: its brokers come first in the body, and each
entry's host and port are spliced in place, every other byte passing as it came
(``_metadata_brokers``), so the cost is the brokers' bytes, not the body's. Decoding and encoding a
2 MB response naming 100,000 brokers took 4 s of the relay's only thread.
"""

from __future__ import annotations

import struct
from typing import Callable

from kinspect.wire.apis import response_header_version
from kinspect.wire.encode import EncodeError, encode_body
from kinspect.wire.headers import parse_response_header, read_uvarint, skip_tagged_fields
from kinspect.wire.messages import decode_body

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
METADATA_FLEXIBLE = 9  # Metadata v9+: compact strings and arrays, tagged fields

PRODUCE, FETCH, METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 0, 1, 3, 10, 60
_NOT_LEADER, _FENCED_LEADER_EPOCH = b"\x00\x06", b"\x00\x4a"  # the error codes KIP-951 answers with endpoints


def carries_addresses(api_key: int, api_version: int) -> bool:
    """Whether responses of this API and version may hold broker addresses."""
    if api_key in (METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER):
        return True
    if api_key == PRODUCE:
        return api_version >= 10
    if api_key == FETCH:
        return api_version >= 16
    return False


def _entries(api_key: int, api_version: int, body: dict) -> list[tuple[dict, str]]:
    """The (dict, node id key) pairs that hold a host and a port."""
    if api_key == FIND_COORDINATOR and api_version < 4:
        return [(body, "node_id")]
    if api_key == DESCRIBE_CLUSTER:
        return [(entry, "broker_id") for entry in body.get("brokers") or ()]
    key = {METADATA: "brokers", FIND_COORDINATOR: "coordinators"}.get(api_key, "node_endpoints")
    return [(entry, "node_id") for entry in body.get(key) or ()]


# (node id, the broker's host, its port) -> (host, port) the client is to use instead
AddressMap = Callable[[int, str, int], "tuple[str, int]"]


class Unchanged(Exception):
    """The response cannot be rewritten faithfully: relay it as it came (``why`` says why)."""


# (node ids of the brokers read, how many the response lists): a Metadata response's brokers, told
# before any address is asked for
Listing = Callable[[set, int], None]


def rewrite_response(api_key: int, api_version: int, frame: bytes, address_of: AddressMap,
                     max_brokers: int | None = None, listing: Listing | None = None) -> bytes:
    """``frame`` (int32 size included) with its broker addresses replaced; the same object when
    none is there. Raises Unchanged when the body cannot be decoded and encoded again exactly,
    or (but for Metadata) names more than ``max_brokers`` brokers. A Metadata response naming
    more has only the first that many read and rewritten (the rest pass as they came); its brokers
    go to ``listing`` first."""
    if api_key in (PRODUCE, FETCH) and _NOT_LEADER not in frame and _FENCED_LEADER_EPOCH not in frame:
        return frame
    header = parse_response_header(frame, response_header_version(api_key, api_version), 4)
    if header is None:
        raise Unchanged("response header does not parse")
    body_at = 4 + header[1]
    if api_key == METADATA:
        return _metadata_brokers(api_version, frame, body_at, address_of, max_brokers, listing)
    body, problems = decode_body(api_key, api_version, "response", frame, start=body_at, raw_records=True)
    if problems:
        raise Unchanged(f"body does not decode: {problems[0].what}")
    entries = _entries(api_key, api_version, body)
    if max_brokers is not None and len(entries) > max_brokers:
        raise Unchanged(f"it names {len(entries):,} brokers, more than --max-brokers ({max_brokers:,})")
    changes = []
    for entry, node_key in entries:
        node_id, host, port = entry.get(node_key), entry.get("host"), entry.get("port")
        if not isinstance(node_id, int) or node_id < 0 or not isinstance(host, str) or not isinstance(port, int):
            continue
        new_host, new_port = address_of(node_id, host, port)
        if (new_host, new_port) != (host, port):
            changes.append((entry, new_host, new_port))
    if not changes:
        return frame
    try:
        if encode_body(api_key, api_version, "response", body) != frame[body_at:]:
            raise Unchanged("encoding the decoded body does not give back the broker's bytes")
        for entry, new_host, new_port in changes:
            entry["host"], entry["port"] = new_host, new_port
        encoded = encode_body(api_key, api_version, "response", body)
    except EncodeError as e:
        raise Unchanged(f"body does not encode: {e}") from None
    payload_size = body_at - 4 + len(encoded)
    return b"".join((_I32.pack(payload_size), frame[4:body_at], encoded))


def _metadata_brokers(api_version: int, frame: bytes, body_at: int, address_of: AddressMap,
                      max_brokers: int | None, listing: Listing | None) -> bytes:
    """A Metadata response with the host and port of each entry of its brokers array replaced
    in place (node id, rack and tagged fields kept as they are, and everything after the array)."""
    flexible = api_version >= METADATA_FLEXIBLE
    end = len(frame)
    pos = body_at + (4 if api_version >= 3 else 0)  # throttle_time_ms
    count, pos = _length(frame, pos, end, flexible, "brokers", wide=True)
    if count < 0:
        raise Unchanged("body does not decode: brokers is null")
    entries = []  # (node id, host's bytes, port, where the host starts, where the port ends)
    for _ in range(count if max_brokers is None else min(count, max_brokers)):
        if pos + 4 > end:
            raise Unchanged("body does not decode: truncated in brokers")
        (node_id,) = _I32.unpack_from(frame, pos)
        host_at = pos + 4
        n, pos = _length(frame, host_at, end, flexible, "a broker's host")
        if n < 0 or pos + n + 4 > end:
            raise Unchanged("body does not decode: truncated in a broker's host")
        (port,) = _I32.unpack_from(frame, pos + n)
        entries.append((node_id, frame[pos:pos + n], port, host_at, pos + n + 4))
        pos += n + 4
        if api_version >= 1:  # rack, a nullable string
            n, pos = _length(frame, pos, end, flexible, "a broker's rack")
            if pos + max(n, 0) > end:
                raise Unchanged("body does not decode: truncated in a broker's rack")
            pos += max(n, 0)
        if flexible:
            got = skip_tagged_fields(frame, pos, end)
            if got is None:
                raise Unchanged("body does not decode: truncated in a broker's tagged fields")
            pos = got[1]
    if listing is not None:
        listing({entry[0] for entry in entries}, count)
    pieces, kept = [], 4  # kept: where the bytes not yet copied start (after the frame's size)
    for node_id, raw, port, host_at, port_end in entries:
        if node_id < 0:
            continue
        try:
            host = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue  # no client could reach it: left as it came
        new_host, new_port = address_of(node_id, host, port)
        if (new_host, new_port) != (host, port):
            encoded = new_host.encode("utf-8")
            pieces += (frame[kept:host_at], _string_length(len(encoded), flexible), encoded, _I32.pack(new_port))
            kept = port_end
    if not pieces:
        return frame
    pieces.append(frame[kept:])
    payload = b"".join(pieces)
    return _I32.pack(len(payload)) + payload


def _length(frame: bytes, pos: int, end: int, flexible: bool, what: str, wide: bool = False) -> tuple[int, int]:
    """A string's length (an array's: ``wide``), -1 for null, and where its contents start."""
    if flexible:
        got = read_uvarint(frame, pos, end)
        if got is None:
            raise Unchanged(f"body does not decode: truncated in {what}")
        return got[0] - 1, got[1]
    size = 4 if wide else 2
    if pos + size > end:
        raise Unchanged(f"body does not decode: truncated in {what}")
    return (_I32 if wide else _I16).unpack_from(frame, pos)[0], pos + size


def _string_length(n: int, flexible: bool) -> bytes:
    if not flexible:
        return _I16.pack(n)
    n, out = n + 1, bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
