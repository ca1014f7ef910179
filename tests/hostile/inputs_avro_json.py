"""Hostile input of the packed seam's C Avro reader (native/_avro.c, issue 33): a capture whose
Produce requests carry the registry's `_schemas` records and then, in topic ``hostile``, Avro
payloads built to hurt a reader that writes JSON straight from the bytes. decode --json reads
them through C first; every one must end there with "go the Python way", which then reports it.

``avro_json_capture(root)`` writes ``root/avro-json-hostile.pcap``: schema 1 a recursive list,
2 an array of nulls, 3 a map of longs, 4 a record of strings and a double; one batch each of a
list 300,000 levels deep, an array declaring 10⁹ nulls, 40 blocks of 100,000 nulls, a string
declaring 2⁴⁰ bytes, a map whose block declares 2⁶³-1 entries, a map repeating one key 60,000
times, strings that are not UTF-8, a varint of 20 bytes; and 50 batches of 1,000 valid values
(the fast way). Run it as

    kinspect decode --json PATH/avro-json-hostile.pcap

Bound: within 20 s and 1 GiB, exit 0 (1.5 s and 43 MB here); each hostile value but one stays
bytes with a value_schema saying why (an "error" with an "offset"); the map repeating one key is
left to fastavro, which reads it as {"k": 7}; the 50,000 valid values decoded.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from tests.hostile.inputs import _one_connection
from tests.hostile.kafka import batch, produce, produce_response, record
from tests.unit.records.handmade import varint

SCHEMAS = [
    ("list-value", 1, {"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]}),
    ("nulls-value", 2, {"type": "array", "items": "null"}),
    ("map-value", 3, {"type": "map", "values": "long"}),
    ("reading-value", 4, {"type": "record", "name": "R", "fields": [
        {"name": "device", "type": "string"}, {"name": "reading", "type": "double"}]}),
]


def _framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


def _registry_records() -> bytes:
    records = b""
    for i, (subject, ident, schema) in enumerate(SCHEMAS):
        key = json.dumps({"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1}).encode()
        value = json.dumps({"subject": subject, "version": 1, "id": ident, "schema": json.dumps(schema),
                            "deleted": False}).encode()
        records += record(key, value, i)
    return batch(records, len(SCHEMAS))


def _hostile_values() -> list[bytes]:
    string = varint(6) + b"dev-01"
    return [
        _framed(1, varint(1) * 300_000 + varint(0)),
        _framed(2, varint(10 ** 9) + varint(0)),
        _framed(2, varint(100_000) * 40 + varint(0)),
        _framed(4, varint(2 ** 40) + b"ab"),
        _framed(3, b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01" + varint(2) + b"ab" + varint(1)),
        _framed(3, varint(60_000) + (varint(1) + b"k" + varint(7)) * 60_000 + varint(0)),
        _framed(4, varint(3) + b"\xc3\x28\xff" + struct.pack("<d", 1.5)),
        _framed(3, b"\xff" * 20 + b"\x00"),
    ]


def _valid_values(count: int) -> bytes:
    records = b""
    for i in range(count):
        payload = varint(6) + b"dev-%02d" % (i % 100) + struct.pack("<d", i / 7)
        records += record(b"k", _framed(4, payload), i)
    return records


def avro_json_capture(root: Path) -> Path:
    exchanges = [(produce(9, 1, {0: _registry_records()}, topic="_schemas"), produce_response(9, 1, topic="_schemas"))]
    correlation = 2
    for value in _hostile_values():
        exchanges.append((produce(9, correlation, {0: batch(record(b"k", value), 1)}, topic="hostile"),
                          produce_response(9, correlation, topic="hostile")))
        correlation += 1
    valid = batch(_valid_values(1000), 1000)
    for _ in range(50):
        exchanges.append((produce(9, correlation, {0: valid}, topic="hostile"),
                          produce_response(9, correlation, topic="hostile")))
        correlation += 1
    return _one_connection(Path(root) / "avro-json-hostile.pcap", exchanges)
