"""Hostile input of the Protobuf walker (native/_protobuf.c, issue 33): a capture whose Produce
requests carry the registry's `_schemas` records and then, in topic ``hostile``, Protobuf
payloads built to hurt a walker that writes JSON straight from the wire format. decode --json
reads them through C first (schema 1, a file of one message: the packed seam's capsule; schema
2, a file of two messages: the walker's read_json); what C does not take goes the Python way,
which reports it.

``protobuf_json_capture(root)`` writes ``root/protobuf-json-hostile.pcap``: schema 1 a message
holding itself, repeated and singular, beside strings, a double, a packed int32 list and a map;
schema 2 the same under a second top-level message. One batch each of a length declaring 2⁴⁰
bytes, 3,000 levels of nesting, 1,000,000 empty repeated messages, 1,000,000 packed zeros, a map
repeating one key 200,000 times, a string that is not UTF-8, an 11-byte varint, a group, a
oneof-less field on the wrong wire type, and the same under schema 2's index list [1]; then 50
batches of 1,000 valid values of each schema (the fast way). Run it as

    kinspect decode --json PATH/protobuf-json-hostile.pcap

Bound: within 20 s and 1 GiB, exit 0 (1.2 s CPU and 109 MB here); the lying length, the
nesting, the bad UTF-8 and the long varint stay bytes with a value_schema saying why (an
"error" with an "offset"), 8 values; the group and the wrong wire type are read by protobuf as
unknown fields ({}); the empty messages, the zeros and the repeated key are decoded (the key
once): with the 100,000 valid values, 100,010 decoded.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from tests.hostile.inputs import _one_connection
from tests.hostile.kafka import batch, produce, produce_response, record
from tests.unit.records.handmade import uvarint

NODE = """syntax = "proto3";
package hostile;
message Node {
  string name = 1; double reading = 2; repeated int32 counts = 3; map<string, int64> tags = 4;
  repeated Node children = 5; Node child = 6;
}
"""
TWO = NODE.replace("package hostile;", "package hostile.two;\nmessage First { string s = 1; }")
SCHEMAS = [("node-value", 1, NODE), ("two-value", 2, TWO)]


def _tag(number: int, wire_type: int) -> bytes:
    return uvarint(number << 3 | wire_type)


def _len(number: int, data: bytes) -> bytes:
    return _tag(number, 2) + uvarint(len(data)) + data


def _framed(schema_id: int, indexes: bytes, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + indexes + payload


def _registry_records() -> bytes:
    records = b""
    for i, (subject, ident, text) in enumerate(SCHEMAS):
        key = json.dumps({"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1}).encode()
        value = json.dumps({"subject": subject, "version": 1, "id": ident, "schemaType": "PROTOBUF",
                            "schema": text, "deleted": False}).encode()
        records += record(key, value, i)
    return batch(records, len(SCHEMAS))


def _nested(depth: int) -> bytes:
    inner = b""
    for _ in range(depth):
        inner = _len(6, inner)
    return inner


def _hostile_payloads() -> list[bytes]:
    return [
        _tag(1, 2) + uvarint(2 ** 40) + b"ab",
        _nested(3_000),
        _len(5, b"") * 1_000_000,
        _len(3, b"\x00" * 1_000_000),
        _len(4, _len(1, b"k") + _tag(2, 0) + uvarint(7)) * 200_000,
        _len(1, b"\xc3\x28\xff"),
        _tag(2, 0) + b"\xff" * 10 + b"\x01",
        _tag(7, 3) + _tag(7, 4),
        _tag(1, 0) + uvarint(5),
    ]


def _valid(i: int) -> bytes:
    return (_len(1, b"dev-%02d" % (i % 100)) + _tag(2, 1) + struct.pack("<d", i / 7)
            + _len(3, uvarint(i) + uvarint(1)) + _len(4, _len(1, b"site") + _tag(2, 0) + uvarint(i))
            + _len(6, _len(1, b"inner")))


def protobuf_json_capture(root: Path) -> Path:
    exchanges = [(produce(9, 1, {0: _registry_records()}, topic="_schemas"), produce_response(9, 1, topic="_schemas"))]
    correlation = 2
    for schema_id, indexes in ((1, b"\x00"), (2, b"\x02\x02")):
        for payload in _hostile_payloads():
            value = _framed(schema_id, indexes, payload)
            exchanges.append((produce(9, correlation, {0: batch(record(b"k", value), 1)}, topic="hostile"),
                              produce_response(9, correlation, topic="hostile")))
            correlation += 1
    for schema_id, indexes in ((1, b"\x00"), (2, b"\x02\x02")):
        valid = batch(b"".join(record(b"k", _framed(schema_id, indexes, _valid(i)), i) for i in range(1000)), 1000)
        for _ in range(50):
            exchanges.append((produce(9, correlation, {0: valid}, topic="hostile"),
                              produce_response(9, correlation, topic="hostile")))
            correlation += 1
    return _one_connection(Path(root) / "protobuf-json-hostile.pcap", exchanges)
