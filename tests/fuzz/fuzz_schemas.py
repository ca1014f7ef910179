"""Fuzz schema framing and the Avro, Protobuf and JSON Schema decoders (kinspect/schemas).

Input: a flags byte (bit 0: a key; bit 1: the next byte is the length of a __value_schema_id /
__key_schema_id header's bytes, which follow), then the key or value. The schemas are the
recorded registry's (samples/schemas/logs/_schemas-0, replayed) and a few hostile ones: a
recursive record (ids 100), an array of nulls (101), a map of maps (102). Seeds: every key and
value confluent-kafka's serializers wrote in the fixtures, with their headers.
Checks: no exception; a framed value has an id or a GUID; one that stayed bytes says why, at an
offset inside the value; a decoded one is what kinspect's JSON writer can write.
"""

import json

import harness

with harness.instrumented("kinspect.schemas"):
    from kinspect.render.jsonl import dumps
    from kinspect.schemas.registry import SchemaStore, StoredSchema
    from kinspect.schemas.resolver import RAW, Schemas
    from kinspect.schemas.sources import read_log_dir

from pathlib import Path

LOGS = Path(__file__).resolve().parents[2] / "samples" / "schemas" / "logs"
HOSTILE = {
    100: {"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]},
                                                     {"name": "v", "type": "int"}]},
    101: {"type": "array", "items": "null"},
    102: {"type": "map", "values": {"type": "map", "values": ["null", "string", "bytes"]}},
}


def _schemas() -> Schemas:
    store = SchemaStore()
    read_log_dir(LOGS, store)
    for schema_id, schema in HOSTILE.items():
        store.add(StoredSchema(schema_id, f"hostile-{schema_id}", 1, "AVRO", json.dumps(schema)))
    return Schemas(store)


SCHEMAS = _schemas()


def split(data: bytes):
    if not data:
        return False, None, b""
    flags, rest = data[0], data[1:]
    headers = None
    if flags & 2 and rest:
        size, rest = rest[0], rest[1:]
        name = "__key_schema_id" if flags & 1 else "__value_schema_id"
        headers = [{"key": name, "value": rest[:size]}]
        rest = rest[size:]
    return bool(flags & 1), headers, rest


def target(data: bytes) -> None:
    is_key, headers, value = split(data)
    found = SCHEMAS.decode(value, headers, is_key)
    if found is None:
        return
    decoded, about = found
    if about.get("id") is None and about.get("guid") is None:
        raise harness.Finding(f"a framed value with neither id nor GUID: {about}")
    if decoded is RAW:
        if "error" not in about and about.get("found") is not False:
            raise harness.Finding(f"bytes kept with no reason: {about}")
        offset = about.get("offset")
        if offset is not None and not 0 <= offset <= len(value):
            raise harness.Finding(f"offset {offset} outside a value of {len(value)} bytes")
        return
    dumps({"value": decoded, "value_schema": about})


if __name__ == "__main__":
    harness.main(target, "schemas")
