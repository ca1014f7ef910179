"""Hostile inputs of the schema path (issue 33, item 5): a broker log dir whose `_schemas` holds
schemas built to hurt and whose topic holds payloads that lie.

``schema_log_dir(root)`` writes ``root/schemas-hostile/`` with ``_schemas-0`` (ids 1-9: a
recursive record, an array of nulls, a string record, references that loop (4 ↔ 5), an Avro
schema nested 5,000 deep, a .proto that does not compile, a .proto 2 MB long, a JSON Schema,
a Protobuf message nesting itself) and ``hostile-0``: a linked list 300,000 levels deep (about
the size fastavro's C reader segfaults at), an array declaring 10⁹ nulls, a string declaring
2⁴⁰ bytes, ids 4 and 5, JSON nested 100,000 deep, Protobuf nested 2,000 deep, and 20,000
values of an unknown id. Run it as

    kinspect dump --data --json PATH/schemas-hostile

Bound: within 20 s and 1 GiB, exit 0; every hostile value stays bytes with its value_schema
saying why (an "error" with an "offset", or "found": false); the schemas that cannot be
compiled are one notice each; one notice for the unknown id.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from tests.unit.records.handmade import record, record_body, uvarint, v2_batch, varint


def _key(subject: str, version: int = 1) -> bytes:
    return json.dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}).encode()


def _value(subject: str, schema_id: int, schema: str, kind: str | None = None, refs=None) -> bytes:
    value = {"subject": subject, "version": 1, "id": schema_id}
    if kind:
        value["schemaType"] = kind
    if refs:
        value["references"] = refs
    value.update(schema=schema, deleted=False)
    return json.dumps(value).encode()


def _segment(path: Path, pairs) -> None:
    """One batch per 500 records (key, value)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        pairs = list(pairs)
        for start in range(0, len(pairs), 500):
            chunk = pairs[start:start + 500]
            records = b"".join(record(record_body(i, 0, k, v)) for i, (k, v) in enumerate(chunk))
            out.write(v2_batch(records, len(chunk), base_offset=start))


def _framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


def schema_log_dir(root: Path) -> Path:
    base = Path(root) / "schemas-hostile"
    nested = '{"type": "array", "items": ' * 5000 + '"int"' + "}" * 5000
    proto_self = 'syntax = "proto3";\nmessage N { N next = 1; int32 v = 2; }\n'
    big_proto = 'syntax = "proto3";\n' + "".join(f"message M{i} {{ int32 f = 1; }}\n" for i in range(70_000))
    schemas = [
        ("list", 1, json.dumps({"type": "record", "name": "L", "fields": [
            {"name": "next", "type": ["null", "L"]}]}), None, None),
        ("nulls", 2, json.dumps({"type": "array", "items": "null"}), None, None),
        ("string", 3, json.dumps({"type": "record", "name": "S", "fields": [{"name": "s", "type": "string"}]}), None, None),
        ("loop-a", 4, '"string"', None, [{"name": "b", "subject": "loop-b", "version": 1}]),
        ("loop-b", 5, '"string"', None, [{"name": "a", "subject": "loop-a", "version": 1}]),
        ("nested", 6, nested, None, None),
        ("broken-proto", 7, 'syntax = "proto3"; message { int32 = ; }', "PROTOBUF", None),
        ("big-proto", 8, big_proto, "PROTOBUF", None),
        ("json", 9, '{"type": "object"}', "JSON", None),
        ("proto-self", 10, proto_self, "PROTOBUF", None),
    ]
    _segment(base / "_schemas-0" / "00000000000000000000.log",
             [(_key(s), _value(s, i, text, kind, refs)) for s, i, text, kind, refs in schemas])
    deep_proto = b""
    for _ in range(2000):
        deep_proto = b"\x0a" + uvarint(len(deep_proto)) + deep_proto
    values = [
        _framed(1, varint(1) * 300_000 + varint(0)),
        _framed(2, varint(10**9) + varint(0)),
        _framed(3, varint(2**40) + b"ab"),
        _framed(4, varint(1) + b"x"),
        _framed(5, varint(1) + b"x"),
        _framed(6, b"\x02" * 10 + b"\x00" * 10),
        _framed(7, b"\x00\x08\x01"),
        _framed(8, b"\x00\x08\x01"),
        _framed(9, b"[" * 100_000 + b"]" * 100_000),
        _framed(10, b"\x00" + deep_proto),
    ] + [_framed(999, b"\x02x")] * 20_000
    _segment(base / "hostile-0" / "00000000000000000000.log", [(b"k", v) for v in values])
    return base
