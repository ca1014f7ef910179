"""Hostile schemas and payloads: a problem at a byte offset or a notice, bounded in time and
memory, never a crash. The decodes that could crash the interpreter (fastavro's C reader on deep
recursion) run in a child process under a memory limit."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap

import pytest

from kinspect.schemas.registry import SchemaStore, StoredSchema
from kinspect.schemas.resolver import RAW, Schemas



def zz(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


def schemas_with(*held: StoredSchema) -> Schemas:
    store = SchemaStore()
    for schema in held:
        store.add(schema)
    return Schemas(store)


def avro(schema_id, schema, subject="s", refs=()) -> StoredSchema:
    return StoredSchema(schema_id, subject, 1, "AVRO", json.dumps(schema), list(refs))


def _child(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs code in a child under a 1 GiB address-space limit."""
    prelude = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout)


CHILD = """
import json, struct
from kinspect.schemas.registry import SchemaStore, StoredSchema
from kinspect.schemas.resolver import Schemas
def zz(n):
    n = (n << 1) ^ (n >> 63); out = bytearray()
    while n > 0x7F: out.append((n & 0x7F) | 0x80); n >>= 7
    out.append(n); return bytes(out)
store = SchemaStore()
store.add(StoredSchema(1, "s", 1, "AVRO", json.dumps(SCHEMA)))
decoded, about = Schemas(store).decode(b"\\x00" + struct.pack(">I", 1) + PAYLOAD)
print(json.dumps(about))
"""


def test_deep_recursion_ends_with_a_problem_not_a_segfault():
    """fastavro's C reader overflows the stack on a linked list 10⁵ deep (it did: SIGSEGV)."""
    code = CHILD.replace("SCHEMA", repr({"type": "record", "name": "L", "fields": [
        {"name": "next", "type": ["null", "L"]}]})).replace("PAYLOAD", "zz(1) * 200_000 + zz(0)")
    done = _child(code)
    assert done.returncode == 0, done.stderr[-2000:]
    about = json.loads(done.stdout)
    assert "nests deeper than 64" in about["error"] and about["offset"] > 5


def test_an_array_of_a_billion_nulls_ends_with_a_problem():
    """Items of no bytes: fastavro would build 10⁹ Nones (memory error under the limit)."""
    code = CHILD.replace("SCHEMA", repr({"type": "array", "items": "null"})).replace(
        "PAYLOAD", "zz(10**9) + zz(0)")
    done = _child(code, timeout=30)
    assert done.returncode == 0, done.stderr[-2000:]
    about = json.loads(done.stdout)
    assert "items of no bytes" in about["error"] and about["offset"] == 5


def test_an_array_of_a_billion_ints_with_two_bytes_is_cut_off():
    schemas = schemas_with(avro(1, {"type": "array", "items": "int"}))
    decoded, about = schemas.decode(framed(1, zz(10**9) + b"\x02"))
    assert decoded is RAW and "cut off" in about["error"] and about["offset"] >= 5


@pytest.mark.parametrize("payload, what", [
    (zz(2**40) + b"ab", "cut off"),        # a string longer than the bytes left
    (zz(3) + b"abc" + b"extra", "5 bytes after the value"),
    (zz(-4), "cut off"),                   # a negative length
    (b"\xff" * 11, "does not read"),       # a varint with no end
])
def test_lengths_that_lie(payload, what):
    schemas = schemas_with(avro(1, {"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"}]}))
    decoded, about = schemas.decode(framed(1, payload))
    assert decoded is RAW and what in about["error"], about
    assert about["offset"] is not None and 5 <= about["offset"] <= 5 + len(payload)


def test_a_schema_that_does_not_parse_is_one_notice_and_its_values_stay_bytes():
    schemas = schemas_with(StoredSchema(1, "bad", 1, "AVRO", '{"type": "record", "name": "R"'),
                           avro(2, {"type": "record", "name": "R", "fields": [{"name": "x", "type": "nope"}]}))
    for schema_id in (1, 1, 2):
        decoded, about = schemas.decode(framed(schema_id, b"\x02"))
        assert decoded is RAW and "error" in about
    notices = schemas.problems()
    assert [n.check for n in notices] == ["schema_invalid", "schema_invalid"]
    assert "not JSON" in notices[0].what and "does not parse" in notices[1].what


def test_references_that_loop_are_a_notice():
    a = StoredSchema(1, "a", 1, "AVRO", '"string"', [{"name": "b", "subject": "b", "version": 1}])
    b = StoredSchema(2, "b", 1, "AVRO", '"string"', [{"name": "a", "subject": "a", "version": 1}])
    schemas = schemas_with(a, b)
    decoded, about = schemas.decode(framed(1, zz(1) + b"x"))
    assert decoded is RAW and "loop" in about["error"]
    assert schemas.problems()[0].check == "schema_invalid"


def test_a_schema_nested_past_the_bound_is_refused_before_fastavro_sees_it():
    schema: object = "int"
    for _ in range(300):
        schema = {"type": "array", "items": schema}
    schemas = schemas_with(StoredSchema(1, "deep", 1, "AVRO", json.dumps(schema)))
    decoded, about = schemas.decode(framed(1, b"\x00"))
    assert decoded is RAW and "deeper than 200" in about["error"]


def test_json_schema_payload_that_is_not_json_says_where():
    schemas = schemas_with(StoredSchema(1, "j", 1, "JSON", '{"type": "object"}'))
    assert schemas.decode(framed(1, b'{"a": [1, 2]}'))[0] == {"a": [1, 2]}
    decoded, about = schemas.decode(framed(1, b'{"a": [1, 2'))
    assert decoded is RAW and about["offset"] == 5 + len(b'{"a": [1, 2')


PROTO = 'syntax = "proto3";\npackage t;\nmessage A { string s = 1; repeated A next = 2; }\n'


def test_protobuf_that_does_not_compile_is_a_notice_with_protocs_words():
    schemas = schemas_with(StoredSchema(1, "p", 1, "PROTOBUF", "syntax = \"proto3\";\nmessage { }"))
    decoded, about = schemas.decode(framed(1, b"\x00"))
    assert decoded is RAW and about["error"].startswith("protoc:")
    assert "Expected" in about["error"] or "expected" in about["error"]


def test_protobuf_payloads_that_lie_or_nest_too_deep():
    schemas = schemas_with(StoredSchema(1, "p", 1, "PROTOBUF", PROTO))
    assert schemas.decode(framed(1, b"\x00" + b"\x0a\x02hi"))[0] == {"s": "hi"}
    decoded, about = schemas.decode(framed(1, b"\x00" + b"\x0a\x7fhi"))   # length 127, 2 left
    assert decoded is RAW and about["offset"] == 6
    deep = b""
    for _ in range(150):                   # A.next nested 150 deep: past protobuf's 100
        deep = b"\x12" + _uvarint(len(deep)) + deep
    decoded, about = schemas.decode(framed(1, b"\x00" + deep))
    assert decoded is RAW and "does not read" in about["error"]
    decoded, about = schemas.decode(framed(1, b"\x02\x06"))   # message index [3]: no such message
    assert decoded is RAW and "names no message" in about["error"]


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@pytest.mark.parametrize("command", ["decode", "validate"])
def test_a_fifo_named_by_schemas_is_refused_not_waited_on(tmp_path, command):
    """--schemas naming a FIFO no one writes: one line, exit 3, the input still read (opening
    it blocked the run for good)."""
    import os

    from tests.conftest import PCAPS
    fifo = tmp_path / "schemas.fifo"
    os.mkfifo(fifo)
    run = subprocess.run([sys.executable, "-m", "kinspect", command, str(PCAPS / "librdkafka-mtu1500.pcap"),
                          "--schemas", str(fifo)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 3, run.stderr
    assert f"--schemas {fifo}: not a regular file" in run.stderr
    assert "Traceback" not in run.stderr
