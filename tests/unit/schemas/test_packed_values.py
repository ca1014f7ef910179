"""Packed batches' framed values written decoded straight into their JSON text
(schemas/packed_values.py, native/_v2records.c's to_json with a schema table): decode --json
byte for byte the same with the fast way on and off, on the committed capture of the real
confluent-kafka serializers; on hand-built batches, every case the fast way leaves to the
Python way gives the Python way's text, notices and counts."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from fastavro import parse_schema, schemaless_writer

from kinspect import native
from kinspect.records.packed import scan
from kinspect.render.jsonl import dumpb
from kinspect.schemas.registry import SchemaStore, StoredSchema
from kinspect.schemas.resolver import Schemas
from kinspect.schemas.stage import ValueStage
from tests.unit.native import needs_c
from tests.unit.records.handmade import record, record_body, varint
from tests.unit.schemas.fixtures import CAPTURE, ROOT

SCHEMA = {"type": "record", "name": "Reading", "fields": [
    {"name": "device", "type": "string"}, {"name": "value", "type": ["null", "double"]},
    {"name": "tags", "type": {"type": "map", "values": "long"}}]}
SECRET = {"type": "record", "name": "Login", "fields": [{"name": "password", "type": "string"}]}

# decode --json in a process whose schema stage leaves packed batches packed (on) or unpacks
# them as before the fast way (off); it prints how many batches the fast way wrote to stderr
RUN = """
import sys
from kinspect.schemas import packed_values, stage
written = []
to_json = packed_values.PackedValues.to_json
def counted(self, *args):
    got = to_json(self, *args)
    written.append(got is not None)
    return got
packed_values.PackedValues.to_json = counted
if sys.argv[1] == "off":
    batch = stage.ValueStage._batch
    def unpacked(self, b):
        self.packed_json = False
        return batch(self, b)
    stage.ValueStage._batch = unpacked
import os
from kinspect import cli
quick_exit = os._exit
def said(code):
    print("fast", sum(written), "of", len(written), file=sys.stderr, flush=True)
    quick_exit(code)
os._exit = said
sys.argv = ["kinspect", *sys.argv[2:]]
cli.main()
said(0)
"""


def _decode(way: str, *args) -> tuple[bytes, str]:
    done = subprocess.run([sys.executable, "-c", RUN, way, "decode", "--json", *args], cwd=ROOT,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr.decode()


@needs_c
@pytest.mark.parametrize("jobs", ["-j1", "-j2"])
def test_decode_json_is_the_same_with_the_fast_way_on_and_off(jobs):
    on, said_on = _decode("on", jobs, CAPTURE)
    off, said_off = _decode("off", jobs, CAPTURE)
    assert on == off
    assert b'"format":"avro"' in on
    if jobs == "-j1":  # workers' counts stay in the workers
        fast, _, total = said_on.split("fast ")[1].split()[:3]
        assert int(fast) > 0 and int(total) > int(fast)  # Protobuf, JSON and secrets: the Python way
        assert said_off.split("fast ")[1].startswith("0 of 0")


def _payload(schema: dict, value: dict, ident: int) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(schema), value)
    return b"\x00" + ident.to_bytes(4, "big") + out.getvalue()


def _stage(show_secrets: bool = False) -> ValueStage:
    store = SchemaStore()
    store.add(StoredSchema(1, "readings-value", 1, "AVRO", json.dumps(SCHEMA)))
    store.add(StoredSchema(2, "logins-value", 1, "AVRO", json.dumps(SECRET)))
    store.add(StoredSchema(3, "broken-value", 1, "AVRO", '{"type": "record"'))
    return ValueStage(Schemas(store, looked_in=["the test"]), show_secrets=show_secrets, packed_json=True)


def _headers(*pairs) -> bytes:
    return varint(len(pairs)) + b"".join(varint(len(k)) + k + varint(len(v)) + v for k, v in pairs)


def _batch(*records) -> dict:
    data = b"".join(record(record_body(offset_delta=i, timestamp_delta=i, key=key, value=value, headers=headers))
                    for i, (key, value, headers) in enumerate(records))
    packed = scan(data, 0, len(data), 100, 1_700_000_000_000, None, 1000)
    assert packed is not None
    return {"records": packed}


def _python_way(batch: dict, show_secrets: bool = False) -> tuple[bytes, Schemas]:
    """The batch's line as the stage wrote it before the fast way: its records unpacked, decoded."""
    stage = _stage(show_secrets)
    stage.packed_json = False
    twin = {"records": batch["records"]}
    stage._batch(twin)
    return dumpb(twin), stage.schemas


READING = _payload(SCHEMA, {"device": "d\u00e9v\n1", "value": 2.5e-7, "tags": {"a": 1, "b": -2}}, 1)
OTHER = _payload(SCHEMA, {"device": "x", "value": None, "tags": {}}, 1)
PLAIN = (None, b"not framed", b"\x00")


@needs_c
@pytest.mark.parametrize("case", [
    "framed keys and values",
    "a schema-id header", "an apicurio header", "a GUID", "an unknown id", "a schema that does not compile",
    "a payload that does not read", "secret fields", "secret fields shown",
])
def test_every_case_writes_what_the_python_way_writes(case):
    plain = [(None, b"plain", b"\x00"), (b"k", None, _headers((b"h", b"\xff")))]
    records = {
        "framed keys and values": [(OTHER, READING, _headers((b"trace", b"1"))), (b"\x01abc", READING, b"\x00")],
        "a schema-id header": [(None, READING, _headers((b"__value_schema_id", b"\x00\x00\x00\x00\x01")))],
        "an apicurio header": [(None, READING[5:], _headers((b"apicurio.value.globalId", bytes(8))))],
        "a GUID": [(None, b"\x01" + bytes(16) + READING[5:], b"\x00")],
        "an unknown id": [(None, b"\x00\x00\x00\x00\x09" + READING[5:], b"\x00")],
        "a schema that does not compile": [(None, b"\x00\x00\x00\x00\x03" + READING[5:], b"\x00")],
        "a payload that does not read": [(None, READING[:-1], b"\x00")],
        "secret fields": [(None, _payload(SECRET, {"password": "hunter2"}, 2), b"\x00")],
        "secret fields shown": [(None, _payload(SECRET, {"password": "hunter2"}, 2), b"\x00")],
    }[case]
    show = case == "secret fields shown"
    batch = _batch(*plain, *records, *plain)
    want, python = _python_way(_batch(*plain, *records, *plain), show)
    stage = _stage(show)
    stage._batch(batch)
    assert batch["records"].values is not None  # kept packed
    assert dumpb(batch) == want
    assert (stage.schemas.decoded, stage.schemas.failed) == (python.decoded, python.failed)
    assert [p.what for p in stage.schemas.problems()] == [p.what for p in python.problems()]
    fast = case in ("framed keys and values", "secret fields shown")
    assert (batch["records"].to_json() is not None) == fast
    if case == "secret fields":
        assert b"hunter2" not in want


@needs_c
def test_records_read_as_dicts_are_decoded():
    """A consumer that reads the dicts (records()) gets them decoded, as the stage left them before."""
    batch = _batch((None, READING, b"\x00"), (None, b"plain", b"\x00"))
    stage = _stage()
    stage._batch(batch)
    got = batch["records"].records()
    assert got[0]["value"] == {"device": "d\u00e9v\n1", "value": 2.5e-7, "tags": {"a": 1, "b": -2}}
    assert got[0]["value_schema"] == {"id": 1, "format": "avro", "subject": "readings-value"}
    assert got[1]["value"] == b"plain" and "value_schema" not in got[1]


@needs_c
def test_schemas_learned_later_are_used():
    """An id unknown when first met resolves once the store learns it (the table is renewed)."""
    stage = _stage()
    late = _payload(SCHEMA, {"device": "late", "value": 1.0, "tags": {}}, 7)
    batch = _batch((None, late, b"\x00"))
    stage._batch(batch)
    assert batch["records"].to_json() is None
    stage.schemas.store.add(StoredSchema(7, "late-value", 1, "AVRO", json.dumps(SCHEMA)))
    text = batch["records"].to_json()
    assert text is not None and b'"device":"late"' in text and b'"subject":"late-value"' in text


def test_off_by_default_and_without_c():
    """Only decode --json asks for it; the pure-Python run has no packed batches at all."""
    assert ValueStage(Schemas(SchemaStore())).packed_json is False
    if native.v2records is None:
        assert scan(b"", 0, 0, 0, 0, None, 10) is None
