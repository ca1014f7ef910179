"""Schemas: framed keys and values decoded against the schemas found, compiled once per run.

    schemas = Schemas(store)                       # a SchemaStore, filled by sources.load
    found = schemas.decode(value, headers, is_key=False)
    if found is not None:
        decoded, about = found                     # about: {"id", "format", "subject", "message"}

decode returns None for a value no schema framing marks (it stays as it is). For a framed value:
- decoded and ``about`` when the schema is known and the payload reads as it;
- the value's bytes unchanged (RAW) and ``about`` with ``"error"`` and ``"offset"`` (the byte in
  the key or value) when the schema is known and the payload does not read as it, or the schema
  does not compile (``"error"`` says so, once per schema in the notices);
- the value's bytes (RAW) and ``about`` with ``"found": False`` when no source knows the id: one
  notice per unknown id says where schemas were looked for.
A payload starting 0x00 + id (or 0x01 + GUID) is taken as framed when its schema is known, or,
unknown, when some source gave schemas at all: a binary key that merely starts with 0x00 is
left alone when nothing says schemas are in use. Headers that carry an id always frame.
"""

from __future__ import annotations

import json

from kinspect.problems import ERROR, WARNING, Problem
from kinspect.schemas.framing import Frame, FramingError, detect, message_indexes
from kinspect.schemas.registry import SchemaStore, StoredSchema
from kinspect.schemas.secret_fields import secret_field

RAW = object()  # decode's first element when the value stays bytes
MAX_REFERENCE_DEPTH = 32
MAX_NOTICES = 50


class Schemas:
    def __init__(self, store: SchemaStore | None = None, *, looked_in: list[str] | None = None,
                 fallback=None):
        """looked_in: the sources, for the unknown-id notice; fallback(id) -> StoredSchema or
        None, asked for ids the store does not hold (an HTTP registry)."""
        self.store = store if store is not None else SchemaStore()
        self.looked_in = looked_in or []
        self.fallback = fallback
        self._compiled: dict[tuple, object] = {}
        self._failed: dict[tuple, str] = {}
        self._unknown: set = set()
        self.notices: list[Problem] = []
        self.decoded = self.failed = 0
        self._fast: dict[tuple, tuple] = {}   # (id, guid, where) -> _resolve's answer
        self._secretive: dict[tuple, bool] = {}
        self._generation = -1

    # -- the API ---------------------------------------------------------------------------

    def decode(self, value, headers=None, is_key: bool = False):
        if value is None:
            return None
        frame = detect(value, headers, is_key)
        if frame is None:
            return None
        store = self.store
        if self._generation != store.changes:
            self._fast.clear()
            self._generation = store.changes
        key = (frame.id, frame.guid, frame.where)
        known = self._fast.get(key)
        if known is None:
            known = self._resolve(frame, value)
            if known is None:
                return None
            if len(self._fast) < 4096:
                self._fast[key] = known
        schema, reader, template = known
        about = dict(template)
        if schema is None:
            return RAW, about
        if isinstance(reader, str):
            about["error"] = reader
            self.failed += 1
            return RAW, about
        try:
            decoded = self._read(schema, reader, frame, value, about)
        except _Failed as e:
            about["error"], about["offset"] = str(e), e.offset
            self.failed += 1
            return RAW, about
        self.decoded += 1
        return decoded, about

    def _resolve(self, frame: Frame, value):
        """(schema, its reader or why it has none, the "about" every value of it shares), or
        (None, None, about) for an unknown id, or None when the value is not taken as framed."""
        schema = self._schema(frame)
        if schema is None:
            if frame.where == "payload" and not self._plausible(value):
                return None
            return None, None, self._unknown_id(frame)
        about = {"id": schema.id, "format": schema.format, "subject": schema.subject}
        if frame.guid is not None:
            about["guid"] = _guid_text(frame.guid)
        if frame.where != "payload":
            about["from"] = frame.where
        return schema, self._reader(schema), about

    def json_entry(self, ident: int, show_secrets: bool = False):
        """How a value framed as V0 in its payload with this id can be written as JSON text
        without Python objects (schemas/packed_values.py): (reader, the schema object's JSON
        text), reader a capsule of a C reader (Avro; a Protobuf file of one message) or a
        callable reader(payload after the id) -> (value's JSON, schema object's JSON) | None
        (Protobuf files of several messages); or None when its values go
        the Python way (an unknown id, a schema that does not compile or has no JSON reader,
        fields to redact). Counts nothing and gives no notice: the Python way does."""
        schema = self._schema(Frame(ident, None, 5, "payload", None, 5))
        if schema is None:
            return None
        reader = self._reader(schema)
        about = {"id": schema.id, "format": schema.format, "subject": schema.subject}
        if isinstance(reader, str) or (not show_secrets and self.may_hold_secrets(about)):
            return None
        import orjson
        if schema.format == "avro":
            program = getattr(reader, "json_program", None)
            capsule = getattr(program, "capsule", None)
            return None if capsule is None else (capsule, orjson.dumps(about))
        if schema.format == "protobuf" and hasattr(reader, "read_json"):
            found = reader.json_capsule() if len(reader.top) == 1 else None
            if found is not None:  # one message: the walker's C reader, for the index list [0]
                return found[0], orjson.dumps({**about, "message": found[1]})
            framed = reader.json_framed(about)  # several messages: the index list read in C too
            return (framed if framed is not None else _protobuf_json(reader, about)), None
        return None

    def may_hold_secrets(self, about: dict) -> bool:
        """Could a value of this schema hold a field whose name says it is secret? (Avro and
        Protobuf: a field of that name is in the schema; JSON Schema: always, a payload may
        hold any property.)"""
        key = (about.get("id"), about.get("guid"), about.get("subject"))
        known = self._secretive.get(key)
        if known is None:
            schema = self._schema_of(about)
            reader = None if schema is None else self._compiled.get((schema.context, schema.id, schema.text))
            names = getattr(reader, "field_names", None)
            known = True if names is None else any(map(secret_field, names))
            if len(self._secretive) < 4096:
                self._secretive[key] = known
        return known

    def _schema_of(self, about: dict):
        if about.get("guid") is not None:
            return self.store.by_guid(bytes.fromhex(about["guid"].replace("-", "")))
        return self.store.by_id(about["id"]) if about.get("id") is not None else None

    def problems(self) -> list[Problem]:
        """The notices so far (unknown ids, schemas that do not compile), each once."""
        return list(self.notices) + list(getattr(self.fallback, "notices", None) or ())

    # -- the parts -------------------------------------------------------------------------

    def _plausible(self, value) -> bool:
        return len(self.store) > 0 or self.fallback is not None

    def _schema(self, frame: Frame) -> StoredSchema | None:
        if frame.guid is not None:
            found = self.store.by_guid(frame.guid)
            by_guid = getattr(self.fallback, "by_guid", None)
            if found is None and by_guid is not None and frame.guid not in self._unknown:
                found = by_guid(frame.guid, self.store)
                if found is not None:
                    self.store.add(found)
            return found
        found = self.store.by_id(frame.id)
        if found is None and self.fallback is not None and frame.id not in self._unknown:
            found = self.fallback(frame.id, self.store)
            if found is not None:
                self.store.add(found)
        return found

    def _unknown_id(self, frame: Frame) -> dict:
        about = {"id": frame.id, "found": False} if frame.guid is None else {
            "guid": _guid_text(frame.guid), "found": False}
        if frame.where != "payload":
            about["from"] = frame.where
        key = frame.id if frame.guid is None else frame.guid
        if key not in self._unknown:
            self._unknown.add(key)
            where = ", ".join(self.looked_in) or "no source (--schemas SOURCE names one)"
            name = f"schema id {frame.id}" if frame.guid is None else f"schema GUID {about['guid']}"
            self._notice(Problem(f"{name} is in no schema source: looked in {where}; its values "
                                 f"stay bytes", "", None, WARNING, "schema_unknown"))
        return about

    def _notice(self, problem: Problem) -> None:
        if len(self.notices) < MAX_NOTICES:
            self.notices.append(problem)

    def _reader(self, schema: StoredSchema):
        key = (schema.context, schema.id, schema.text)
        reader = self._compiled.get(key)
        if reader is not None:
            return reader
        failed = self._failed.get(key)
        if failed is not None:
            return failed
        try:
            reader = _compile(self.store, schema)
        except ImportError as e:
            reader = None
            why = f"{e.name or e} is not installed (pip install 'kinspect[schemas]')"
        except _Failed as e:
            reader = None
            why = str(e)
        if reader is None:
            self._failed[key] = why
            self._notice(Problem(f"schema id {schema.id} ({schema.subject} v{schema.version}, "
                                 f"{schema.format}) does not compile: {why}; its values stay bytes",
                                 "", None, ERROR, "schema_invalid"))
            return why
        self._compiled[key] = reader
        return reader

    def _read(self, schema: StoredSchema, reader, frame: Frame, value, about: dict):
        data = value if type(value) is bytes else bytes(value)
        start = frame.start
        kind = schema.schema_type
        if kind == "PROTOBUF":
            source = frame.header if frame.header is not None else data
            try:
                indexes, after = message_indexes(source, frame.index_at)
            except FramingError as e:
                raise _Failed(str(e), e.offset if frame.header is None else None) from None
            if frame.header is None:
                start = after
            try:
                name, decoded = reader.read(data[start:], indexes)
            except ValueError as e:
                raise _Failed(str(e), start + (getattr(e, "offset", None) or 0)) from None
            about["message"] = name
            return decoded
        if kind != "JSON":
            try:
                return reader.read(data[start:])
            except ValueError as e:
                offset = getattr(e, "offset", None)
                raise _Failed(str(e), start + (offset or 0)) from None
        try:
            return json.loads(data[start:])
        except (ValueError, RecursionError) as e:
            raise _Failed(f"payload is not JSON: {e}"[:200], start + getattr(e, "pos", 0)) from None


def _protobuf_json(reader, about: dict):
    """json_entry's reader for a Protobuf schema: the message-index list, then the message."""
    import orjson
    shown: dict[str, bytes] = {}

    def read(payload: bytes):
        try:
            indexes, after = message_indexes(payload, 0)
        except FramingError:
            return None
        got = reader.read_json(payload[after:], indexes)
        if got is None:
            return None
        name, text = got
        about_text = shown.get(name)
        if about_text is None:
            about_text = orjson.dumps({**about, "message": name})
            if len(shown) < 1024:
                shown[name] = about_text
        return text, about_text

    return read


class _Failed(ValueError):
    def __init__(self, what: str, offset: int | None = None):
        super().__init__(what)
        self.offset = offset


def _guid_text(guid: bytes) -> str:
    h = guid.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _references(store: SchemaStore, schema: StoredSchema) -> list[tuple[dict, StoredSchema]]:
    """Every schema the references reach, dependencies first (each once); loops and missing
    references raise _Failed."""
    order: list[tuple[dict, StoredSchema]] = []
    done: set = set()
    path: list = []

    def visit(node: StoredSchema, depth: int) -> None:
        if depth > MAX_REFERENCE_DEPTH:
            raise _Failed(f"references nest deeper than {MAX_REFERENCE_DEPTH}")
        for ref in node.references:
            subject, version = ref.get("subject"), ref.get("version")
            if not isinstance(subject, str) or not isinstance(version, int):
                raise _Failed(f"reference {ref!r} names no subject and version")
            target = store.version(subject, version)
            if target is None:
                raise _Failed(f"reference {ref.get('name')!r} → {subject} v{version} is in no source")
            key = (target.subject, target.version)
            if key in path:
                raise _Failed(f"references loop through {subject} v{target.version}")
            if key in done:
                continue
            path.append(key)
            visit(target, depth + 1)
            path.pop()
            done.add(key)
            order.append((ref, target))

    path.append((schema.subject, schema.version))
    visit(schema, 0)
    return order


def _compile(store: SchemaStore, schema: StoredSchema):
    refs = _references(store, schema)
    if schema.format == "avro":
        from kinspect.schemas.avro import compile_avro
        named: dict = {}
        try:
            for _, target in refs:
                if target.format != "avro":
                    raise _Failed(f"an Avro schema references a {target.format} schema")
                _, named = compile_avro(target.text, named)
            reader, _ = compile_avro(schema.text, named)
        except ValueError as e:
            raise _Failed(str(e)) from None
        return reader
    if schema.format == "protobuf":
        from kinspect.schemas.protobuf import compile_proto
        imports = {ref.get("name") or f"{t.subject}.proto": t.text for ref, t in refs}
        try:
            return compile_proto(_proto_name(schema), schema.text, imports)
        except ValueError as e:
            raise _Failed(str(e)) from None
    if schema.format == "json":
        try:
            json.loads(schema.text)
        except (ValueError, RecursionError) as e:
            raise _Failed(f"JSON Schema is not JSON: {e}"[:200]) from None
        return True
    raise _Failed(f"schema type {schema.schema_type!r} is not one kinspect decodes")


def _proto_name(schema: StoredSchema) -> str:
    safe = "".join(c if c.isalnum() or c in "_-." else "_" for c in schema.subject) or "schema"
    return f"kinspect_schema_{schema.id}_{safe}.proto"
