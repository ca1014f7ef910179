"""Avro values written as JSON text (schemas/avro_json.py, native/_avro.c): byte for byte what
decode --json writes for fastavro's value (render/jsonl.py over AvroReader.read), for every Avro
type; C the same as its twin read_json_py on valid, damaged and random payloads; and hostile
payloads end with None (the Python path then reports them) within their bounds."""

from __future__ import annotations

import io
import json
import random
import struct

import pytest
from fastavro import parse_schema, schemaless_writer

from kinspect.render.jsonl import dumpb
from kinspect.schemas import avro_json
from kinspect.schemas.avro import AvroError, compile_avro
from kinspect.schemas.avro_json import read_json_py
from tests.unit.native import needs_c

_avro = avro_json._avro

EVERY_TYPE = json.dumps({
    "type": "record", "name": "Kinds", "namespace": "t", "fields": [
        {"name": "n", "type": "null"}, {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"},
        {"name": "l", "type": "long"}, {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
        {"name": "by", "type": "bytes"}, {"name": "s", "type": "string"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B_2", "c9"]}},
        {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 3}},
        {"name": "a", "type": {"type": "array", "items": ["null", "string", "E"]}},
        {"name": "m", "type": {"type": "map", "values": {"type": "record", "name": "R", "fields": [
            {"name": "x", "type": "long"}]}}},
        {"name": "r", "type": ["null", "R"]},
        {"name": "empty", "type": {"type": "record", "name": "Empty", "fields": []}},
        {"name": "fx0", "type": {"type": "fixed", "name": "F0", "size": 0}},
        {"name": "nested", "type": {"type": "array", "items": {"type": "map", "values": ["null", "F"]}}},
        {"name": "odd name \u2028\"", "type": "string"},
        {"name": "unknown_logical", "type": {"type": "string", "logicalType": "not-a-kind"}},
    ]})
LINKED = json.dumps({"type": "record", "name": "Node", "fields": [
    {"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]}]})
LOGICAL = [{"type": "long", "logicalType": "timestamp-millis"}, {"type": "int", "logicalType": "date"},
           {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
           {"type": "string", "logicalType": "uuid"}, {"type": "long", "logicalType": "time-micros"}]


def _encoded(text: str, value, named=None) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(json.loads(text), named_schemas=dict(named or {})), value)
    return out.getvalue()


def _python_path(reader, payload: bytes) -> bytes:
    """What decode --json writes for the value: fastavro's value through render/jsonl.py."""
    return dumpb(reader.read(payload))


def _every_type_value(rng: random.Random) -> dict:
    text = rng.choice(["", "plain", "héllo", "\x00\x1f\"\\/\u2028\U0001f600", "x" * 40, "\x7f\ud7ff"])
    return {"n": None, "b": rng.random() < 0.5, "i": rng.randrange(-2 ** 31, 2 ** 31),
            "l": rng.randrange(-2 ** 63, 2 ** 63), "f": rng.choice([0.5, -1e-7, 3.4e38, 1.1, float("inf")]),
            "d": rng.choice([float("nan"), -0.0, 1e16, 1e-5, 1e-6, 123456.789, rng.random() * 1e300]),
            "by": bytes(rng.randrange(256) for _ in range(rng.randrange(6))), "s": text,
            "e": rng.choice(["A", "B_2", "c9"]), "fx": rng.choice([b"abc", b"\xff\x00\x80", b"\xc3\xa9a"]),
            "a": [rng.choice([None, "x", "A", "ü"]) for _ in range(rng.randrange(4))],
            "m": {f"k{i}é": {"x": i} for i in range(rng.randrange(4))}, "r": rng.choice([None, {"x": -7}]),
            "empty": {}, "fx0": b"",
            "nested": [{"a": None, "b": b"\x00\x01\x02"}, {}][:rng.randrange(3)],
            "odd name \u2028\"": text, "unknown_logical": "u"}


def _readers(program, payload):
    got = [read_json_py(program, payload)]
    if _avro is not None:
        got.append(avro_json.read_json(program, payload))
    return got


def test_every_type_is_written_as_decode_json_writes_it():
    reader, _ = compile_avro(EVERY_TYPE)
    assert reader.json_program is not None
    rng = random.Random(33)
    for _ in range(500):
        payload = _encoded(EVERY_TYPE, _every_type_value(rng))
        want = _python_path(reader, payload)
        assert _readers(reader.json_program, payload) == [want] * (1 + (_avro is not None)), payload
        assert reader.read_json(payload) == want


def test_recursive_schemas_and_references():
    reader, _ = compile_avro(LINKED)
    value = {"v": 1, "next": {"v": -2, "next": {"v": 3, "next": None}}}
    payload = _encoded(LINKED, value)
    assert reader.read_json(payload) == read_json_py(reader.json_program, payload) == dumpb(value)
    # a schema that references another subject's named type (the registry's references)
    _, named = compile_avro(json.dumps({"type": "record", "name": "Address", "namespace": "lab",
                                        "fields": [{"name": "city", "type": "string"}]}))
    outer = json.dumps({"type": "record", "name": "Customer", "namespace": "lab", "fields": [
        {"name": "home", "type": "lab.Address"}, {"name": "work", "type": ["null", "lab.Address"]}]})
    reader, _ = compile_avro(outer, named)
    value = {"home": {"city": "Köln"}, "work": {"city": "Bonn"}}
    payload = _encoded(outer, value, named)
    assert reader.read_json(payload) == read_json_py(reader.json_program, payload) == dumpb(value)


def test_top_level_types_other_than_records():
    for schema, value in (('"string"', "x\ny"), ('["null", "long"]', 5), ('"double"', 1e-6),
                          ('{"type": "array", "items": "int"}', [1, 2, 3]),
                          ('{"type": "map", "values": "boolean"}', {"a": True, "b": False}),
                          ('{"type": "enum", "name": "S", "symbols": ["X", "Y"]}', "Y")):
        reader, _ = compile_avro(schema)
        payload = _encoded(schema, value)
        assert reader.read_json(payload) == read_json_py(reader.json_program, payload) == dumpb(value)


@pytest.mark.parametrize("logical", LOGICAL, ids=lambda t: t["logicalType"])
def test_logical_types_fastavro_converts_have_no_program(logical):
    """fastavro gives these as Python objects (datetime, Decimal, UUID): the Python path writes them."""
    schema = json.dumps({"type": "record", "name": "L", "fields": [{"name": "x", "type": logical}]})
    reader, _ = compile_avro(schema)
    assert reader.json_program is None
    assert reader.read_json(b"\x02") is None


def test_doubles_and_floats_as_orjson_writes_them():
    """Random bit patterns (every exponent, subnormals, NaNs, infinities) and edge values."""
    rng = random.Random(7)
    for kind, size, fmt in (("double", 8, "<d"), ("float", 4, "<f")):
        reader, _ = compile_avro(f'"{kind}"')
        edges = [struct.pack(fmt, v) for v in (0.0, -0.0, 1.0, 1e15, 1e16, 9999999999999998.0, 1e-5,
                                               1e-6, 0.1, 5e-324 if size == 8 else 1e-45, 123.0)]
        decimals = [round(rng.uniform(-10 ** rng.randrange(-4, 16), 10 ** rng.randrange(-4, 16)), rng.randrange(18))
                    for _ in range(20000)]  # few digits, in and around C's dtoa-free range
        decimals += [rng.uniform(1e-5, 1e15) for _ in range(5000)] + [float(rng.randrange(1 << 53)) for _ in range(500)]
        decimals += [10.0 ** e * s for e in range(-7, 18) for s in (1, -1, 9.999999999999999, 1.0000000000000002)]
        randoms = [rng.getrandbits(8 * size).to_bytes(size, "little") for _ in range(20000)]
        for payload in edges + randoms + [struct.pack(fmt, d) for d in decimals if abs(d) < 3e38 or size == 8]:
            want = _python_path(reader, payload)
            assert _readers(reader.json_program, payload) == [want] * (1 + (_avro is not None)), payload


def test_what_goes_the_python_way():
    """None for whatever the Python path must say or would write otherwise."""
    reader, _ = compile_avro(EVERY_TYPE)
    good = _encoded(EVERY_TYPE, _every_type_value(random.Random(1)))
    string_map = '{"type": "map", "values": "long"}'
    map_reader, _ = compile_avro(string_map)
    cases = {
        "cut off": (reader, good[:-1]),
        "bytes after the value": (reader, good + b"\x00"),
        "a boolean of 2": (compile_avro('"boolean"')[0], b"\x02"),
        "a string not UTF-8": (compile_avro('"string"')[0], b"\x04\xc3\x28"),
        "a map key twice": (map_reader, b"\x04\x02a\x02\x02a\x04\x00"),
        "a map of more than 64 keys": (map_reader, b"\x82\x01" + b"".join(
            b"\x04" + b"%02d" % i + b"\x02" for i in range(65)) + b"\x00"),
        "a varint past 64 bits": (compile_avro('"long"')[0], b"\xff" * 9 + b"\x02"),
        "an enum index out of range": (compile_avro('{"type": "enum", "name": "S", "symbols": ["X"]}')[0], b"\x02"),
        "a union branch out of range": (compile_avro('["null", "long"]')[0], b"\x04"),
        "a negative length": (compile_avro('"bytes"')[0], b"\x01"),
    }
    for what, (r, payload) in cases.items():
        assert _readers(r.json_program, payload) == [None] * (1 + (_avro is not None)), what
    assert dumpb(map_reader.read(b"\x04\x02a\x02\x02a\x04\x00")) == b'{"a":2}'  # why: Python keeps the last


def test_hostile_payloads_end_bounded():
    """An array of 10⁹ items of no bytes, data nesting 10⁵ deep, a length of 2⁶², a block count
    of 2⁶³-1: None at once, from C and its twin."""
    nulls, _ = compile_avro('{"type": "array", "items": "null"}')
    linked, _ = compile_avro(LINKED)
    strings, _ = compile_avro('{"type": "array", "items": "string"}')
    deep = b"\x02\x02" * 100_000 + b"\x02\x00"
    cases = [(nulls, b"\x80\xa8\xd6\xb9\x07\x00"),  # 10⁹ nulls
             (nulls, b"\x80\x9a\x0c" * 40 + b"\x00"),  # 40 blocks of 100,000
             (linked, deep), (strings, b"\x02\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01\x00"),
             (strings, b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01")]
    for reader, payload in cases:
        assert _readers(reader.json_program, payload) == [None] * (1 + (_avro is not None)), payload[:12]
        with pytest.raises(AvroError):
            reader.read(payload)  # the Python path: a problem with an offset


@needs_c
def test_damaged_and_random_payloads_c_and_twin_agree():
    """Every byte of real payloads changed, cut short, and random bytes: C and the twin give the
    same bytes or both None; when not None, what the Python path writes."""
    reader, _ = compile_avro(EVERY_TYPE)
    linked, _ = compile_avro(LINKED)
    rng = random.Random(5)
    agreed = decoded = 0
    for n in range(300):
        payload = bytearray(_encoded(EVERY_TYPE, _every_type_value(rng)))
        for _ in range(rng.randrange(1, 4)):
            payload[rng.randrange(len(payload))] = rng.randrange(256)
        for r, data in ((reader, bytes(payload)), (reader, bytes(payload[:rng.randrange(len(payload))])),
                        (linked, rng.randbytes(rng.randrange(40)))):
            c, py = avro_json.read_json(r.json_program, data), read_json_py(r.json_program, data)
            assert c == py, data
            agreed += 1
            if c is not None:
                decoded += 1
                assert c == _python_path(r, data), data
    assert decoded > 50  # the damage left many readable


@needs_c
def test_the_c_program_is_checked_before_it_is_used():
    """A program whose node or text points outside it is refused (no reads out of bounds)."""
    for code, texts in (([avro_json.ARRAY, 5], b""), ([avro_json.RECORD, 1, 0, 9, 0], b"{\"a\":"),
                        ([avro_json.ENUM, 1, 3, 2], b"\"A\""), ([99], b""), ([], b""),
                        ([avro_json.UNION, 1000], b"")):
        with pytest.raises(ValueError):
            avro_json.Program(code, texts)
    assert avro_json.Program([avro_json.RECORD, 1, 0, 5, 5, avro_json.LONG], b'{"a":').capsule is not None
