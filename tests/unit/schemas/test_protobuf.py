"""Protobuf values shown in the proto3 JSON mapping: ProtoReader.read's own converter (_Shown)
held to its twin, json_format.MessageToDict with map entries sorted, value for value and key
order for key order, over every field kind, the well-known types, the lab's schemas and the
values edge cases make (NaN, -0.0, unknown enum numbers, maps of messages holding maps)."""

from __future__ import annotations

import json

from kinspect.schemas.protobuf import compile_proto
from tests.lab.schema_clients import proto_sources

KINDS = """syntax = "proto3";
package kinds;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/any.proto";
import "google/protobuf/empty.proto";

enum Color { RED = 0; GREEN = 1; BLUE = 2; }
enum Old { NONE = 0; GONE = 1 [deprecated = true]; }

message Inner {
  map<string, int64> counts = 1;
  repeated Color colors = 2;
  string label = 3;
}

message All {
  double d = 1; float f = 2; int32 i32 = 3; int64 i64 = 4; uint32 u32 = 5; uint64 u64 = 6;
  sint32 s32 = 7; sint64 s64 = 8; fixed32 fx32 = 9; fixed64 fx64 = 10; sfixed32 sf32 = 11;
  sfixed64 sf64 = 12; bool b = 13; string s = 14; bytes by = 15; Color color = 16;
  optional int32 opt = 17; optional string opt_s = 18;
  repeated double ds = 19; repeated int64 i64s = 20; repeated bytes bys = 21; repeated string ss = 22;
  repeated Inner inners = 23;
  map<string, Inner> by_name = 24; map<int64, string> by_long = 25; map<bool, Color> by_flag = 26;
  map<int32, bytes> by_int = 27; map<uint64, double> by_u64 = 28;
  oneof pick { string picked_s = 29; Inner picked_inner = 30; }
  Inner inner = 31;
  google.protobuf.Timestamp at = 32; google.protobuf.Duration took = 33;
  google.protobuf.Struct meta = 34; google.protobuf.Value any_value = 35;
  google.protobuf.Int64Value wrapped = 36; google.protobuf.StringValue wrapped_s = 37;
  google.protobuf.Any packed = 38; google.protobuf.Empty nothing = 39;
  repeated google.protobuf.Timestamp times = 40; google.protobuf.NullValue null = 41;
  All child = 42;
  Old old = 43;
}
"""

CLOSED = """syntax = "proto2";
package closed;
enum Level { LOW = 1; HIGH = 2; }
message Reading {
  optional Level level = 1;
  optional int64 count = 2;
  extensions 100 to 199;
}
extend Reading { optional string note = 100; }
"""


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _reader(text: str, name: str = "kinds.proto"):
    return compile_proto(name, text, {})


def _twin_agrees(reader, payload: bytes, indexes=(0,), fast: bool = True):
    """reader.read's value, after checking it is json_format's (and in json_format's key order),
    and, when ``fast``, that _Shown gave it (not json_format, its fallback)."""
    name, shown = reader.read(payload, list(indexes))
    _, cls = reader._message(list(indexes))
    message = cls()
    message.ParseFromString(payload)
    expected = reader.shown_by_json_format(message)
    assert json.dumps(shown, allow_nan=True) == json.dumps(expected, allow_nan=True)
    if fast:
        assert json.dumps(reader._shown.message(message), allow_nan=True) == json.dumps(expected, allow_nan=True)
    return shown


def _all(reader):
    return reader._message([1])[1]


def _filled(reader):
    cls = _all(reader)
    m = cls(d=2.5, f=0.1, i32=-7, i64=-(1 << 60), u32=4_000_000_000, u64=(1 << 64) - 1, s32=-3,
            s64=-(1 << 62), fx32=7, fx64=1 << 63, sf32=-9, sf64=-(1 << 40), b=True, s="héllo ✓",
            by=b"\x00\xff\x80", color=1, opt=0, opt_s="", ds=[1.5, float("nan"), -0.0, float("inf")],
            i64s=[0, -1, 1 << 62], bys=[b"", b"\x01"], ss=["a", ""])
    m.inners.add(label="x", colors=[0, 2, 1]).counts.update({"z": 1, "a": -2, "m": 1 << 50})
    m.inners.add()
    for key in ("zeta", "alpha", "mid"):
        m.by_name[key].counts.update({"b": 2, "a": 1})
        m.by_name[key].label = key
    m.child.by_name["x"].counts.update({f"k{n:02d}": n for n in range(40, 0, -1)})
    m.by_long.update({10: "ten", -1: "minus", 2: "two"})
    m.by_flag.update({True: 2, False: 0})
    m.by_int.update({3: b"\x03", -5: b""})
    m.by_u64.update({(1 << 64) - 1: float("-inf"), 0: 0.5})
    m.picked_inner.label = "picked"
    m.inner.counts["k"] = 0
    m.at.seconds, m.at.nanos = 1_700_000_000, 5000
    m.took.seconds = 90
    m.meta.update({"z": 1, "a": [True, None, "s"], "n": {"y": 2, "b": 1}})
    m.any_value.string_value = "v"
    m.wrapped.value = 1 << 55
    m.wrapped_s.value = ""
    inner = reader._message([0])[1](label="in any")
    m.packed.Pack(inner)
    m.nothing.SetInParent()
    m.times.add(seconds=1)
    m.child.s = "nested"
    m.child.by_long[5] = "five"
    m.child.child.i64 = 3
    return m


def test_every_field_kind_as_json_format_shows_it():
    reader = _reader(KINDS)
    shown = _twin_agrees(reader, _filled(reader).SerializeToString(), (1,))
    assert shown["i64"] == str(-(1 << 60)) and shown["u64"] == str((1 << 64) - 1)
    assert list(shown["by_name"]) == ["alpha", "mid", "zeta"]
    assert list(shown["by_long"]) == ["-1", "10", "2"]  # string order, as _sort_maps gives
    assert list(shown["by_name"]["mid"]["counts"]) == ["a", "b"]
    assert shown["by_flag"] == {"false": "RED", "true": "BLUE"}
    assert list(shown["child"]["by_name"]["x"]["counts"]) == [f"k{n:02d}" for n in range(1, 41)]
    assert shown["ds"][1] == "NaN" and shown["ds"][3] == "Infinity"
    assert shown["f"] == 0.1 and shown["at"] == "2023-11-14T22:13:20.000005Z"
    assert shown["packed"]["@type"].endswith("kinds.Inner")


def test_defaults_presence_and_empty_messages():
    reader = _reader(KINDS)
    cls = _all(reader)
    assert _twin_agrees(reader, b"", (1,)) == {}
    for message in (cls(opt=0), cls(d=-0.0), cls(f=float("nan")), cls(picked_s=""), cls(color=0),
                    cls(d=float("-inf"), f=3.4e38), cls(f=1e-45)):
        _twin_agrees(reader, message.SerializeToString(), (1,))


def test_enum_values_with_options_are_json_formats():
    reader = _reader(KINDS)
    cls = _all(reader)
    assert _twin_agrees(reader, cls(old=1).SerializeToString(), (1,), fast=False) == {"old": "GONE"}
    assert _twin_agrees(reader, cls(old=0).SerializeToString(), (1,)) == {}


def test_unknown_numbers_and_fields():
    reader = _reader(KINDS)
    cls = _all(reader)
    # color = 7 (an open enum's unknown number stays a number), field 99 unknown (dropped)
    payload = cls(s="x").SerializeToString() + _tag(16, 0) + _varint(7) + _tag(99, 0) + _varint(1)
    shown = _twin_agrees(reader, payload, (1,))
    assert shown["color"] == 7 and "99" not in json.dumps(shown)


def test_closed_enums_and_extensions_are_json_formats():
    reader = _reader(CLOSED, "closed.proto")
    cls = reader._message([0])[1]
    assert _twin_agrees(reader, cls(level=2, count=5).SerializeToString()) == {"level": "HIGH", "count": "5"}
    # level = 9: a closed enum's unknown number, kept by the parser as an unknown field
    assert _twin_agrees(reader, _tag(1, 0) + _varint(9)) == {}
    extended = cls(count=1).SerializeToString() + _tag(100, 2) + _varint(4) + b"note"
    shown = _twin_agrees(reader, extended, fast=False)
    assert shown == {"count": "1", "[closed.note]": "note"}


def test_the_lab_clients_messages():
    """Every Protobuf value of the committed schema fixture (confluent-kafka's serializer)."""
    from google.protobuf import json_format
    from tests.unit.schemas.fixtures import manifest
    sources = proto_sources()
    reader = compile_proto("lab_orders.proto", sources["lab_orders.proto"],
                           {"lab_common.proto": sources["lab_common.proto"]})
    indexes = {reader.message_name(i): i for i in ([0], [1], [2], [1, 0])}
    entries = [r for r in manifest()["records"] if r["format"] == "protobuf"]
    for entry in entries:
        cls = reader._message(indexes[entry["message"]])[1]
        payload = json_format.ParseDict(entry["value"], cls()).SerializeToString()
        assert _twin_agrees(reader, payload, indexes[entry["message"]]) == entry["value"]
    assert len(entries) >= 20


def test_deep_nesting_falls_back_or_fails_as_json_format_does():
    reader = _reader(KINDS)
    cls = _all(reader)
    message = cls()
    node = message
    for _ in range(90):
        node = node.child
        node.i64 = 1
    shown = _twin_agrees(reader, message.SerializeToString(), (1,))
    depth = 0
    while "child" in shown:
        shown, depth = shown["child"], depth + 1
    assert depth == 90
