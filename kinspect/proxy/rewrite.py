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
"""

from __future__ import annotations

import struct
from typing import Callable

from kinspect.wire.apis import response_header_version
from kinspect.wire.encode import EncodeError, encode_body
from kinspect.wire.headers import parse_response_header
from kinspect.wire.messages import decode_body

_I32 = struct.Struct(">i")

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


def rewrite_response(api_key: int, api_version: int, frame: bytes, address_of: AddressMap) -> bytes:
    """``frame`` (int32 size included) with its broker addresses replaced; the same object when
    none is there. Raises Unchanged when the body cannot be decoded and encoded again exactly."""
    if api_key in (PRODUCE, FETCH) and _NOT_LEADER not in frame and _FENCED_LEADER_EPOCH not in frame:
        return frame
    header = parse_response_header(frame, response_header_version(api_key, api_version), 4)
    if header is None:
        raise Unchanged("response header does not parse")
    body_at = 4 + header[1]
    body, problems = decode_body(api_key, api_version, "response", frame, start=body_at, raw_records=True)
    if problems:
        raise Unchanged(f"body does not decode: {problems[0].what}")
    changes = []
    for entry, node_key in _entries(api_key, api_version, body):
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
