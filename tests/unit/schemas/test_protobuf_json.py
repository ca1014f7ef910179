"""ProtoReader.read_json: the walker's JSON text equals what decode --json writes of read()'s
value (orjson.dumps of it), for the committed capture's values, hand-built messages of every
kind, and random payloads made field by field (duplicates, packed and unpacked, unknown fields,
odd varints) and damaged; where read() fails, read_json gives None. The C walker and its
Python twin (protobuf_json.PyWalker) give the same bytes. Hostile payloads end bounded."""

from __future__ import annotations

import math
import random
import struct

import orjson
import pytest

from kinspect.render.jsonl import dumpb
from kinspect.schemas import protobuf_json
from kinspect.schemas.protobuf import ProtoError, compile_proto
from kinspect.schemas.protobuf_json import JsonTables, PyWalker
from tests.lab.schema_clients import proto_sources
from tests.unit.native import needs_c  # the C walker's own tests: CI's pure-Python run deselects them

C = protobuf_json._NATIVE

COMMON = """syntax = "proto3";
package kinds.common;
enum Color { RED = 0; GREEN = 1; BLUE = 2; }
message Money { int64 units = 1; string currency = 2; }
"""

KINDS = """syntax = "proto3";
package kinds;
import "common.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/timestamp.proto";

enum Old { NONE = 0; GONE = 1 [deprecated = true]; KEPT = 2; }

message First { string s = 1; }

message All {
  double d = 1; float f = 2; int32 i32 = 3; int64 i64 = 4; uint32 u32 = 5; uint64 u64 = 6;
  sint32 s32 = 7; sint64 s64 = 8; fixed32 fx32 = 9; fixed64 fx64 = 10; sfixed32 sf32 = 11;
  sfixed64 sf64 = 12; bool b = 13; string s = 14; bytes by = 15; kinds.common.Color color = 16;
  optional int32 opt = 17; optional string opt_s = 18; optional double opt_d = 19;
  repeated double ds = 20; repeated float fs = 21; repeated int32 i32s = 22; repeated int64 i64s = 23;
  repeated uint32 u32s = 24; repeated sint64 s64s = 25; repeated fixed32 fx32s = 26;
  repeated sfixed64 sf64s = 27; repeated bool bs = 28; repeated string ss = 29; repeated bytes bys = 30;
  repeated kinds.common.Color colors = 31; repeated int32 unpacked = 32 [packed = false];
  repeated All children = 33; All child = 34; kinds.common.Money money = 35;
  map<string, int64> by_name = 36; map<int32, string> by_int = 37; map<int64, All> by_long = 38;
  map<uint32, double> by_u32 = 39; map<uint64, bytes> by_u64 = 40; map<sint32, float> by_s32 = 41;
  map<sint64, kinds.common.Color> by_s64 = 42; map<fixed32, bool> by_fx32 = 43;
  map<fixed64, uint64> by_fx64 = 44; map<sfixed32, sint32> by_sf32 = 45; map<sfixed64, int32> by_sf64 = 46;
  map<bool, string> by_flag = 47;
  oneof pick { string picked_s = 48; All picked_all = 49; int64 picked_i = 50; kinds.common.Money picked_m = 51; }
  Old old = 52;
  google.protobuf.NullValue null = 53;
  google.protobuf.Timestamp at = 54;
  google.protobuf.Struct meta = 55;
  message Deep { message Deeper { repeated string names = 1; } Deeper deeper = 1; int32 n = 2; }
  Deep deep = 56;
  int32 far = 536870911;
}
"""

CLOSED = """syntax = "proto2";
package closed;
enum Level { LOW = 1; HIGH = 2; }
message Reading {
  optional Level level = 1;
  optional int64 count = 2 [default = 7];
  optional string s = 3;
  repeated int32 xs = 4;
  optional Reading next = 5;
}
message Strict { required int32 id = 1; }
"""

NUMERIC = {"double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
           "fixed64", "sfixed32", "sfixed64", "bool"}


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _len(number: int, data: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(data)) + data


def _kinds():
    return compile_proto("kinds.proto", KINDS, {"common.proto": COMMON})


def _closed():
    return compile_proto("closed.proto", CLOSED, {})


def _python_path(reader, payload: bytes, indexes) -> bytes | None:
    """What decode --json writes of read()'s value (through its own encoder), or None where
    read() fails."""
    try:
        return dumpb(reader.read(payload, list(indexes))[1])
    except ProtoError:
        return None


def _agrees(reader, payload: bytes, indexes=(0,)) -> bytes | None:
    """read_json against the Python path; the text, or None when read_json took no fast way."""
    expected = _python_path(reader, payload, indexes)
    got = reader.read_json(payload, list(indexes))
    if got is not None:
        assert expected is not None, payload.hex()
        assert got == (reader.message_name(list(indexes)), expected), payload.hex()
        return got[1]
    return None


# -- random payloads, field by field, from the walker's own tables ----------------------------

_FLOATS = [0.0, -0.0, 1.0, -1.5, 0.1, 1e-5, 1.5e-5, 9.99e-6, 1e-7, 1e16, 1.5e16, 9999999999999998.0,
           1e22, 5e-324, 1.7976931348623157e308, 3.4028234663852886e38, 1.17549435e-38, 1e-45,
           float("nan"), float("inf"), float("-inf"), 123456.789, 0.30000000000000004, 2.5e-5]
_INTS = [0, 1, -1, 127, 128, 300, (1 << 31) - 1, -(1 << 31), 1 << 31, (1 << 32) - 1, 1 << 32, (1 << 32) + 5,
         (1 << 63) - 1, -(1 << 63), 1 << 63, (1 << 64) - 1]
_TEXTS = ["", "a", "héllo ✓", 'quote " back \\ slash /', "\x00\x01\x1f\x7f\n\t\r\b\f", "\u2028\U0001f600",
          "k", "K", "10", "9", "-1", "zz" * 30]


def _scalar(rnd: random.Random, kind: int) -> bytes:
    """A value of the kind on its wire type (the tag not included)."""
    wt = protobuf_json.wire_type(kind)
    if wt == 0:
        return _varint(rnd.choice(_INTS) if rnd.random() < 0.7 else rnd.getrandbits(rnd.choice((3, 7, 20, 40, 64))))
    if wt == 1:
        return struct.pack("<d", rnd.choice(_FLOATS)) if rnd.random() < 0.6 else rnd.randbytes(8)
    if wt == 5:
        value = rnd.choice(_FLOATS)
        if abs(value) > 3.4e38 and not math.isinf(value):
            value = 1e38
        return struct.pack("<f", value) if rnd.random() < 0.6 else rnd.randbytes(4)
    if kind == 9:  # string
        if rnd.random() < 0.01:
            return rnd.choice([b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"ok\xe2\x82"])
        return rnd.choice(_TEXTS).encode()
    return rnd.randbytes(rnd.randrange(6))


def _field_value(rnd, walker, field, depth: int) -> bytes:
    number, _, kind, flags, sub, enum = field
    wt = protobuf_json.wire_type(kind)
    if kind == 14 and rnd.random() < 0.8:  # enums: mostly numbers the enum names
        names = list(walker.enums[enum][2]) or [0]
        return _tag(number, 0) + _varint(rnd.choice(names + [99, -3]))
    if kind == 11:
        inner = _message(rnd, walker, sub, depth + 1)
        return _len(number, inner)
    if flags & protobuf_json.REPEATED and wt != 2 and rnd.random() < 0.5:  # packed
        return _len(number, b"".join(_scalar(rnd, kind) for _ in range(rnd.randrange(4))))
    if wt == 2:
        return _len(number, _scalar(rnd, kind))
    return _tag(number, wt) + _scalar(rnd, kind)


def _message(rnd: random.Random, walker: PyWalker, mid: int, depth: int = 0) -> bytes:
    _, supported, fields = walker.messages[mid]
    if not fields or depth > 4:
        return b""
    out = []
    for _ in range(rnd.randrange(1, 9 if depth == 0 else 4)):
        field = rnd.choice(fields)
        if field[0] in (54, 55) and rnd.random() < 0.9:  # well-known types: the Python path's
            continue
        roll = rnd.random()
        if roll < 0.03:  # an unknown field
            wt, value = rnd.choice(((0, _varint(5)), (1, b"\x00" * 8), (2, _varint(2) + b"ab"), (5, b"\x00" * 4)))
            out.append(_tag(rnd.choice((1000, 2047, 70000)), wt) + value)
            continue
        if roll < 0.035:  # a known field on a wire type not its own
            out.append(_tag(field[0], 2) + _varint(1) + b"x")
            continue
        out.append(_field_value(rnd, walker, field, depth))
    return b"".join(out)


def _damaged(rnd: random.Random, payload: bytes) -> bytes:
    if not payload:
        return b"\x08"
    data = bytearray(payload)
    what = rnd.randrange(4)
    if what == 0:
        return bytes(data[:rnd.randrange(len(data))])
    if what == 1:
        data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
    elif what == 2:
        data.insert(rnd.randrange(len(data) + 1), rnd.randrange(256))
    else:
        del data[rnd.randrange(len(data))]
    return bytes(data)


def _random_payloads(reader, indexes, count: int, seed: int):
    walker = PyWalker(JsonTables(reader.pool, reader.file_name).spec)
    tables = JsonTables(reader.pool, reader.file_name)
    mid = tables.ids[reader.message_name(list(indexes))]
    rnd = random.Random(seed)
    for _ in range(count):
        payload = _message(rnd, walker, mid)
        yield payload
        yield _damaged(rnd, payload)


def test_random_payloads_equal_the_python_path():
    reader = _kinds()
    fast = slow = 0
    for payload in _random_payloads(reader, [1], 3000, seed=33):
        if _agrees(reader, payload, [1]) is None:
            slow += 1
        else:
            fast += 1
    assert fast > slow  # most of them took the fast way


def test_random_proto2_payloads_equal_the_python_path():
    reader = _closed()
    fast = 0
    for payload in _random_payloads(reader, [0], 1500, seed=2):
        fast += _agrees(reader, payload, [0]) is not None
    assert fast > 500


def _walkers(reader):
    tables = JsonTables(reader.pool, reader.file_name)
    return tables, C.Walker(tables.spec), PyWalker(tables.spec)


@needs_c
@pytest.mark.parametrize("which", ["kinds", "closed"])
def test_the_c_walker_and_its_twin_write_the_same_bytes(which):
    reader = _kinds() if which == "kinds" else _closed()
    indexes = [1] if which == "kinds" else [0]
    tables, c_walker, twin = _walkers(reader)
    mid = tables.ids[reader.message_name(indexes)]
    rnd = random.Random(7)
    payloads = list(_random_payloads(reader, indexes, 2000, seed=11))
    payloads += [rnd.randbytes(rnd.randrange(40)) for _ in range(2000)]
    fast = 0
    for payload in payloads:
        got = c_walker.walk(payload, mid)
        assert got == twin.walk(payload, mid), payload.hex()
        fast += got is not None
    assert fast > 500


def _one_number(kind: str, number: int, wt: int, raw: bytes, indexes=(1,)):
    """read_json's text of a message holding only this field, checked against the Python path."""
    reader = _kinds()
    text = _agrees(reader, _tag(number, wt) + raw, indexes)
    assert text is not None
    return orjson.loads(text)


def test_doubles_and_floats_as_orjson_writes_them():
    reader = _kinds()
    rnd = random.Random(4)
    patterns = [struct.pack("<d", v) for v in _FLOATS]
    patterns += [struct.pack("<d", rnd.choice((1, -1)) * 10.0 ** rnd.uniform(-30, 30)) for _ in range(1500)]
    patterns += [rnd.randbytes(8) for _ in range(1500)]
    patterns += [struct.pack("<d", rnd.randrange(1 << 52) / 2 ** rnd.randrange(1, 12)) for _ in range(1500)]  # ties
    for raw in patterns:
        assert _agrees(reader, _tag(1, 1) + raw, [1]) is not None or raw == b"\0" * 8
        assert _agrees(reader, _tag(20, 2) + _varint(8) + raw, [1]) is not None  # packed
        f32 = raw[:4]
        assert _agrees(reader, _tag(2, 5) + f32, [1]) is not None or f32 == b"\0" * 4
    assert _one_number("d", 1, 1, struct.pack("<d", 1.5e-5))["d"] == 1.5e-5
    assert _agrees(reader, _tag(1, 1) + struct.pack("<d", 1.5e-5), [1]) == b'{"d":0.000015}'
    assert _agrees(reader, _tag(2, 5) + struct.pack("<f", 0.1), [1]) == b'{"f":0.1}'
    assert _agrees(reader, _tag(1, 1) + struct.pack("<d", float("nan")), [1]) == b'{"d":"NaN"}'
    assert _agrees(reader, _tag(1, 1) + struct.pack("<d", -0.0), [1]) == b'{"d":-0.0}'


def test_every_scalar_kind_and_its_json_convention():
    reader = _kinds()
    cls = reader._message([1])[1]
    message = cls(d=2.5, f=0.1, i32=-7, i64=-(1 << 60), u32=4_000_000_000, u64=(1 << 64) - 1, s32=-3,
                  s64=-(1 << 62), fx32=7, fx64=1 << 63, sf32=-9, sf64=-(1 << 40), b=True,
                  s='héllo ✓ "q" \\ \n\x01', by=b"\x00\xff\x80", color=2, opt=0, opt_s="", opt_d=0.0,
                  ds=[1.5, float("inf")], fs=[0.25], i32s=[-1, 2], i64s=[0, -1], u32s=[1 << 31],
                  s64s=[-5], fx32s=[9], sf64s=[-(1 << 63)], bs=[True, False], ss=["a", ""],
                  bys=[b"", b"\x01\x02"], colors=[0, 2, 7], unpacked=[3, 4], far=5)
    message.money.units = 12
    message.money.currency = "EUR"
    text = _agrees(reader, message.SerializeToString(), [1])
    assert text is not None
    shown = orjson.loads(text)
    assert shown["i64"] == str(-(1 << 60)) and shown["u64"] == str((1 << 64) - 1) and shown["i32"] == -7
    assert shown["by"] == "AP+A" and shown["color"] == "BLUE" and shown["colors"] == ["RED", "BLUE", 7]
    assert shown["opt"] == 0 and shown["opt_s"] == "" and shown["opt_d"] == 0.0  # presence: shown
    assert shown["money"] == {"units": "12", "currency": "EUR"} and shown["far"] == 5
    assert list(shown) == sorted(shown, key=lambda name: cls.DESCRIPTOR.fields_by_name[name].number)


def test_defaults_are_omitted_without_presence():
    reader = _kinds()
    payload = (_tag(3, 0) + _varint(0) + _tag(14, 2) + _varint(0) + _tag(13, 0) + _varint(0)
               + _tag(3, 0) + _varint(1 << 32) + _tag(1, 1) + b"\0" * 8 + _tag(17, 0) + _varint(0))
    assert _agrees(reader, payload, [1]) == b'{"opt":0}'


def test_last_one_wins_merges_and_repeated_fields_apart_on_the_wire():
    reader = _kinds()
    money = _len(35, _tag(1, 0) + _varint(5)) + _tag(3, 0) + _varint(1) + _len(35, _len(2, b"USD"))
    repeated = _tag(22, 0) + _varint(1) + _tag(14, 2) + _varint(1) + b"x" + _len(22, _varint(2) + _varint(3))
    again = _tag(3, 0) + _varint(9) + _tag(14, 2) + _varint(1) + b"y" + _tag(22, 0) + _varint(4)
    text = _agrees(reader, money + repeated + again, [1])
    assert orjson.loads(text) == {"i32": 9, "s": "y", "i32s": [1, 2, 3, 4],
                                  "money": {"units": "5", "currency": "USD"}}


def test_oneofs_keep_the_member_set_last():
    reader = _kinds()
    picked_m = _len(51, _tag(1, 0) + _varint(3))
    payload = picked_m + _tag(50, 0) + _varint(4) + _len(51, _len(2, b"EUR"))
    assert _agrees(reader, payload, [1]) == b'{"picked_m":{"currency":"EUR"}}'
    assert _agrees(reader, _len(51, b"") + _tag(50, 0) + _varint(0), [1]) == b'{"picked_i":"0"}'
    # a replaced member was read all the same: damaged, the whole value is the Python path's
    damaged = _len(51, b"\x0a\x05ab") + _tag(50, 0) + _varint(4)
    assert _python_path(reader, damaged, [1]) is None
    assert reader.read_json(damaged, [1]) is None
    bad_text = _len(48, b"\xff") + _tag(50, 0) + _varint(4)
    assert _python_path(reader, bad_text, [1]) is None and reader.read_json(bad_text, [1]) is None


def _entry(key: bytes, value: bytes) -> bytes:
    return key + value


def test_maps_in_key_order_the_last_entry_of_a_key_winning():
    reader = _kinds()
    by_int = b"".join(_len(37, _tag(1, 0) + _varint(k) + _len(2, v.encode()))
                      for k, v in ((10, "ten"), (9, "nine"), (-1, "minus"), (10, "TEN")))
    by_name = (_len(36, _len(1, b"b") + _tag(2, 0) + _varint(2)) + _len(36, _len(1, b"\n"))
               + _len(36, _tag(2, 0) + _varint(7)) + _len(36, _len(1, "é".encode()) + _tag(2, 0) + _varint(1)))
    by_flag = _len(47, _tag(1, 0) + _varint(1) + _len(2, b"yes")) + _len(47, b"")
    by_long = _len(38, _tag(1, 0) + _varint(5) + _len(2, _tag(3, 0) + _varint(1))) \
        + _len(38, _tag(1, 0) + _varint(4))
    text = _agrees(reader, by_int + by_name + by_flag + by_long, [1])
    assert text is not None
    shown = orjson.loads(text)
    assert list(shown["by_int"].items()) == [("-1", "minus"), ("10", "TEN"), ("9", "nine")]
    assert list(shown["by_name"]) == ["", "\n", "b", "é"]
    assert shown["by_flag"] == {"false": "", "true": "yes"}
    assert shown["by_long"] == {"4": {}, "5": {"i32": 1}}
    # an entry holding an unknown field: upb sets it aside; the Python path's
    odd = _len(37, _tag(1, 0) + _varint(1) + _tag(9, 0) + _varint(1))
    assert reader.read_json(odd, [1]) is None


def test_enums_known_unknown_with_options_and_closed():
    reader = _kinds()
    assert _agrees(reader, _tag(16, 0) + _varint(1), [1]) == b'{"color":"GREEN"}'
    assert _agrees(reader, _tag(16, 0) + _varint(42), [1]) == b'{"color":42}'
    assert _agrees(reader, _tag(16, 0) + _varint(-2), [1]) == b'{"color":-2}'
    assert _agrees(reader, _tag(52, 0) + _varint(2), [1]) == b'{"old":"KEPT"}'
    assert reader.read_json(_tag(52, 0) + _varint(1), [1]) is None  # GONE has options
    assert _agrees(reader, _tag(53, 0) + _varint(0), [1]) == b"{}"
    closed = _closed()
    assert _agrees(closed, _tag(1, 0) + _varint(2), [0]) == b'{"level":"HIGH"}'
    assert closed.read_json(_tag(1, 0) + _varint(3), [0]) is None  # a closed enum's unknown number
    assert _agrees(closed, _tag(2, 0) + _varint(0), [0]) == b'{"count":"0"}'  # proto2: presence
    assert closed.read_json(_tag(1, 0) + _varint(1), [1]) is None  # required fields: the Python path's


def test_several_messages_nested_names_and_imports():
    reader = _kinds()
    assert _agrees(reader, _len(1, b"first"), [0]) == b'{"s":"first"}'
    assert reader.read_json(_len(1, b"first"), [0])[0] == "kinds.First"
    deep = _len(1, _len(1, b"n1") + _len(1, b"n2")) + _tag(2, 0) + _varint(3)
    at = next(i for i in range(20) if reader.message_name([1, i]) == "kinds.All.Deep")
    assert reader.read_json(deep, [1, at]) == ("kinds.All.Deep", b'{"deeper":{"names":["n1","n2"]},"n":3}')
    assert _agrees(reader, deep, [1, at]) is not None
    assert reader.read_json(b"", [5]) is None  # no such message: the Python path says so


def test_well_known_types_and_groups_go_the_python_path():
    reader = _kinds()
    at = _len(54, _tag(1, 0) + _varint(1_700_000_000))
    assert _python_path(reader, at, [1]) is not None and reader.read_json(at, [1]) is None
    assert reader.read_json(_tag(3, 3) + _tag(3, 4), [1]) is None
    assert _agrees(reader, b"", [1]) == b"{}"


def test_the_committed_capture_values():
    """Every Protobuf value of the committed sample log dir (confluent-kafka's serializer)."""
    import base64
    import json

    from kinspect.schemas.framing import message_indexes
    from tests.unit.schemas.fixtures import LOGS, kinspect
    sources = proto_sources()
    reader = compile_proto("lab_orders.proto", sources["lab_orders.proto"],
                           {"lab_common.proto": sources["lab_common.proto"]})
    done = kinspect("dump", "--records", "--data", "--json", "--raw-values", LOGS / "lab-proto-0")
    assert done.returncode == 0, done.stderr
    values = []
    for line in map(json.loads, done.stdout.splitlines()):
        for record in line.get("records") or () if line.get("type") == "batch" else ():
            value = record["value"]
            values.append(base64.b64decode(value["b64"]) if isinstance(value, dict) else value.encode())
    fast = set()
    for value in values:
        indexes, start = message_indexes(value, 5)
        if _agrees(reader, value[start:], indexes) is not None:
            fast.add(reader.message_name(indexes))
    assert len(values) >= 10
    assert {"lab.orders.Shipment", "lab.orders.Refund"} <= fast  # OrderPlaced holds a Timestamp


@pytest.mark.parametrize("walker,scale", [pytest.param("c", 10, marks=needs_c), ("twin", 1)])
def test_hostile_payloads_end_bounded(walker, scale):
    reader = _kinds()
    tables = JsonTables(reader.pool, reader.file_name)
    walk = (C.Walker(tables.spec) if walker == "c" else PyWalker(tables.spec)).walk
    mid = tables.ids["kinds.All"]
    lying = _tag(14, 2) + _varint(1 << 40) + b"x"
    assert walk(lying, mid) is None
    assert walk(_tag(14, 2) + _varint(5) + b"abc", mid) is None
    assert walk(_tag(3, 0) + b"\xff" * 11, mid) is None
    nested = b""
    for _ in range(200):
        nested = _len(34, nested)
    assert walk(nested, mid) is None  # deeper than MAX_DEPTH
    many = _len(33, b"") * 30_000 * scale  # empty repeated messages
    text = walk(many, mid)
    assert text == b'{"children":[' + b",".join([b"{}"] * 30_000 * scale) + b"]}"
    packed = _len(22, b"\x00" * 100_000 * scale)
    assert walk(packed, mid) == b'{"i32s":[' + b",".join([b"0"] * 100_000 * scale) + b"]}"
    same_key = _len(37, _tag(1, 0) + _varint(1)) * 20_000 * scale
    assert walk(same_key, mid) == b'{"by_int":{"1":""}}'


def test_strings_escaped_as_orjson_escapes_them_wherever_the_character_falls():
    reader = _kinds()
    for special in ('"', "\\", "\x1f", "\x7f", "é"):
        for length in range(0, 18):
            for at in range(length + 1):
                text = ("abcdefghijklmnopqrstu"[:at] + special + "xyz0123456789ABCDEFG"[:length - at])
                got = _agrees(reader, _len(14, text.encode()), [1])
                assert got == b'{"s":' + orjson.dumps(text) + b"}"


ONE = """syntax = "proto3";
package one;
message Reading {
  message Place { double lat = 1; }
  string device = 1; double value = 2; map<string, int64> tags = 3; Place place = 4;
}
"""


def _one_message_stage(packed: bool):
    from kinspect.schemas.registry import SchemaStore, StoredSchema
    from kinspect.schemas.resolver import Schemas
    from kinspect.schemas.stage import ValueStage
    store = SchemaStore()
    store.add(StoredSchema(4, "readings-value", 1, "PROTOBUF", ONE))
    return ValueStage(Schemas(store, looked_in=["the test"]), packed_json=packed)


def _packed_batch(values):
    from kinspect.records.packed import scan
    from tests.unit.records.handmade import record, record_body
    data = b"".join(record(record_body(offset_delta=i, timestamp_delta=i, key=None, value=value))
                    for i, value in enumerate(values))
    packed = scan(data, 0, len(data), 100, 1_700_000_000_000, None, 1000)
    assert packed is not None
    return {"records": packed}


@needs_c
@pytest.mark.parametrize("indexes,fast", [(b"\x00", True), (b"\x02\x00", True), (b"\x04\x00\x00", False)])
def test_a_one_message_file_is_written_by_the_capsule_in_the_packed_batch(indexes, fast):
    """decode --json's packed batches (records/packed.py) with the walker's JsonReader capsule:
    the batch's text is what the Python way writes; a value of a nested message (index list
    [0, 0]) sends the batch the Python way."""
    value = _len(1, b"dev-1") + _tag(2, 1) + struct.pack("<d", 21.5) + _len(3, _len(1, b"a") + _tag(2, 0) + _varint(7))
    framed = [b"\x00\x00\x00\x00\x04" + indexes + (value if fast else _tag(1, 1) + struct.pack("<d", 45.25)),
              b"\x00\x00\x00\x00\x04\x00" + _len(4, _tag(1, 1) + struct.pack("<d", -3.5)), b"plain"]
    python_way = _packed_batch(framed)
    _one_message_stage(packed=False)._batch(python_way)
    batch = _packed_batch(framed)
    stage = _one_message_stage(packed=True)
    stage._batch(batch)
    assert dumpb(batch) == dumpb(python_way)
    assert (batch["records"].to_json() is not None) == fast
    assert stage.schemas.json_entry(4)[0].__class__.__name__ == "PyCapsule"
    if fast:
        assert b'"value":{"device":"dev-1","value":21.5,"tags":{"a":"7"}},' in dumpb(batch)


TWO_MESSAGES = ONE.replace("package one;", "package two;\nmessage First { string s = 1; }")


@needs_c
@pytest.mark.parametrize("indexes,fast", [
    (b"\x02\x02", True), (b"\x00", True), (b"\x04\x02\x00", True),  # [1], [0], [1, 0]
    (b"\x02\x04", False), (b"\x01\x02", False), (b"\x02\x01", False), (b"\x82\x01" + b"\x00" * 65, False),
    (b"\x02", False), (b"\x02\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", False),
])
def test_a_file_of_several_messages_is_written_by_the_framed_reader(indexes, fast):
    """The seam's reader for a file of several messages reads the message-index list in C:
    [1], [0] and [1, 0] are written as the Python way writes them; an index past the file's
    messages, a negative count or index, a count past 64, a cut or overlong varint send the
    batch the Python way."""
    from kinspect.schemas.registry import SchemaStore, StoredSchema
    from kinspect.schemas.resolver import Schemas
    from kinspect.schemas.stage import ValueStage

    def stage(packed):
        store = SchemaStore()
        store.add(StoredSchema(5, "two-value", 1, "PROTOBUF", TWO_MESSAGES))
        return ValueStage(Schemas(store, looked_in=["the test"]), packed_json=packed)

    place = _tag(1, 1) + struct.pack("<d", 45.25)
    value = {b"\x02\x02": _len(1, b"dev-2") + _len(4, place), b"\x00": _len(1, b"first"),
             b"\x04\x02\x00": place}.get(indexes, _len(1, b"x"))
    framed = [b"\x00\x00\x00\x00\x05" + indexes + value, b"\x00\x00\x00\x00\x05\x00" + _len(1, b"f")]
    python_way = _packed_batch(framed)
    stage(False)._batch(python_way)
    batch = _packed_batch(framed)
    fast_stage = stage(True)
    fast_stage._batch(batch)
    assert dumpb(batch) == dumpb(python_way)
    assert (batch["records"].to_json() is not None) == fast
    assert type(fast_stage.schemas.json_entry(5)[0]).__name__ == "Framed"
