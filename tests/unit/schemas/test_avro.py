"""Avro payloads read by AvroReader: fastavro's reader called directly (its set-up done once per
schema) held to its twin, fastavro.schemaless_reader, value for value and error for error."""

from __future__ import annotations

import io
import json

import pytest
from fastavro import parse_schema, schemaless_writer

from kinspect.schemas.avro import AvroError, AvroReader, compile_avro
from tests.lab.schema_clients import SCHEMAS, orders

KINDS = json.dumps({
    "type": "record", "name": "Kinds", "namespace": "t", "fields": [
        {"name": "n", "type": "null"}, {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"},
        {"name": "l", "type": "long"}, {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
        {"name": "by", "type": "bytes"}, {"name": "s", "type": "string"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 3}},
        {"name": "a", "type": {"type": "array", "items": ["null", "string", "E"]}},
        {"name": "m", "type": {"type": "map", "values": {"type": "record", "name": "R", "fields": [
            {"name": "x", "type": "long"}]}}},
        {"name": "r", "type": ["null", "R"]},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    ]})
VALUE = {"n": None, "b": True, "i": -5, "l": 1 << 60, "f": 0.5, "d": float("nan"), "by": b"\x00\xff",
         "s": "héllo", "e": "B", "fx": b"abc", "a": [None, "x", "A"], "m": {"k": {"x": 1}, "j": {"x": -2}},
         "r": {"x": 7}, "ts": 1_700_000_000_123, "day": 19_000, "dec": b"\x01\x00",
         "id": "12345678-1234-5678-1234-567812345678"}


def _encoded(text: str, value, named=None) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(json.loads(text), named_schemas=dict(named or {})), value)
    return out.getvalue()


def _twins(text: str, named=None) -> tuple[AvroReader, AvroReader]:
    reader, _ = compile_avro(text, named)
    assert reader.direct, "fastavro's _read_data is gone: AvroReader reads through schemaless_reader"
    twin = AvroReader(reader.parsed, reader.guarded, reader.name, reader.field_names, direct=False)
    return reader, twin


def _outcome(reader: AvroReader, payload: bytes):
    try:
        return "value", repr(reader.read(payload))
    except AvroError as e:
        return "error", str(e), e.offset


def test_every_type_and_logical_type_as_schemaless_reader_reads_it():
    reader, twin = _twins(KINDS)
    payload = _encoded(KINDS, VALUE)
    assert _outcome(reader, payload) == _outcome(twin, payload)
    value = reader.read(payload)
    assert value["m"] == {"k": {"x": 1}, "j": {"x": -2}} and value["ts"].year == 2023
    assert str(value["dec"]) == "2.56" and str(value["id"]) == VALUE["id"]


def test_bad_payloads_fail_as_they_do_through_schemaless_reader():
    reader, twin = _twins(KINDS)
    payload = _encoded(KINDS, VALUE)
    cases = [payload[:n] for n in (0, 1, 5, 20, len(payload) - 1)]
    cases += [payload + b"\x00", b"\x02" + payload[1:]]  # a byte after the value; a boolean of 2
    flipped = bytearray(payload)
    flipped[payload.index(b"h\xc3\xa9") + 1] = 0xFF      # the string no longer UTF-8
    cases.append(bytes(flipped))
    union = payload.index(b"\x02x") - 2                   # the array's first union branch: 5 of 3
    cases.append(payload[:union] + b"\x0a" + payload[union + 1:])
    outcomes = [_outcome(reader, case) for case in cases]
    assert outcomes == [_outcome(twin, case) for case in cases]
    assert sum(1 for o in outcomes if o[0] == "error") >= 6


def test_the_lab_orders_with_a_referenced_schema():
    address = (SCHEMAS / "lab_address.avsc").read_text()
    _, named = compile_avro(address)
    text = (SCHEMAS / "lab_order.avsc").read_text()
    reader, twin = _twins(text, named)
    for order in orders(12):
        payload = _encoded(text, order, named)
        assert _outcome(reader, payload) == _outcome(twin, payload)
        assert reader.read(payload)["order_id"] == order["order_id"]


def test_guarded_schemas_walk_first():
    text = json.dumps({"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}, {"name": "v", "type": "int"}]})
    reader, twin = _twins(text)
    assert reader.guarded
    deep = b"\x02" * 70 + b"\x00\x02" + b"\x02" * 70
    for payload in (_encoded(text, {"next": {"next": None, "v": 2}, "v": 1}), deep):
        assert _outcome(reader, payload) == _outcome(twin, payload)
    with pytest.raises(AvroError, match="deeper"):
        reader.read(deep)
