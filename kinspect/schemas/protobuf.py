"""Protobuf payloads, decoded with no generated code.

    reader = compile_proto("orders.proto", text, {"common.proto": common_text})
    name, value = reader.read(payload, [1, 0])   # the message the indexes name; proto3 JSON

A schema's .proto text (and the texts it imports, by the names its references give) becomes a
FileDescriptorSet through grpcio-tools' protoc, run in process on a private temporary directory;
the well-known types (google/protobuf/*.proto) come from grpcio-tools' own include directory. A
schema given as a serialized FileDescriptorProto (base64, what a registry answers for
format=serialized) is used as it is. Messages are built by message_factory in a DescriptorPool of
the schema's own, and shown in the proto3 JSON mapping with the original field names
(json_format.MessageToDict). protobuf's parser bounds recursion itself (100 levels).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import shutil
import tempfile
import threading

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.internal.type_checkers import ToShortestFloat
from google.protobuf.message import DecodeError

MAX_PROTO_TEXT = 4 << 20
_LOCK = threading.Lock()  # protoc writes to fd 2, redirected while it runs
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")


class ProtoError(ValueError):
    def __init__(self, what: str, offset: int | None = None):
        super().__init__(what)
        self.offset = offset


class ProtoReader:
    def __init__(self, file: descriptor_pb2.FileDescriptorProto, pool: descriptor_pool.DescriptorPool):
        self.file_name = file.name
        self.package = file.package
        self.top = [m.name for m in file.message_type]
        self.pool = pool
        self._classes: dict[tuple[int, ...], tuple[str, type]] = {}
        self.field_names = _field_names(pool, file.name)  # of every message it reaches
        self._shown = _Shown(pool)
        self._json = self._json_ids = None  # the JSON walker and its message ids, made when first asked

    def message_name(self, indexes: list[int]) -> str:
        """The full name of the message the message-index list names (Confluent's rule: the
        first index picks a top-level message of the file, each next one a nested message)."""
        return self._message(indexes)[0]

    def _message(self, indexes: list[int]) -> tuple[str, type]:
        key = tuple(indexes)
        found = self._classes.get(key)
        if found is not None:
            return found
        desc = _described(self.pool, self.file_name, indexes)
        found = (desc.full_name, message_factory.GetMessageClass(desc))
        if len(self._classes) < 1024:
            self._classes[key] = found
        return found

    def read(self, payload: bytes, indexes: list[int]) -> tuple[str, dict]:
        name, cls = self._message(indexes)
        message = cls()
        try:
            message.ParseFromString(payload)
        except (DecodeError, RuntimeError, ValueError, RecursionError) as e:
            raise ProtoError(f"does not read as {name}: {e}"[:300], 0) from None
        try:
            return name, self._shown.message(message)
        except (_Unusual, ValueError, TypeError, RecursionError):
            pass  # json_format shows it, or says why it cannot
        try:
            return name, self.shown_by_json_format(message)
        except (ValueError, TypeError, RecursionError, json_format.Error) as e:
            raise ProtoError(f"{name} has no JSON form: {e}"[:300], 0) from None

    def read_json(self, payload: bytes, indexes: list[int]) -> tuple[str, bytes] | None:
        """The message's full name and its value as decode --json writes read()'s, in one walk
        over the wire format (schemas/protobuf_json.py); None where only read() can say. The
        first call replaces this method, on this reader, by the walker's own read_json."""
        return self._json_walker().read_json(payload, indexes)

    def json_capsule(self) -> tuple[object, str] | None:
        """A JsonReader capsule (records/packed.py's seam) writing values framed with the
        message-index list [0], and that message's full name; None without the C walker."""
        walker = self._json_walker()
        if not hasattr(walker, "capsule") or not self.top:
            return None
        name = self.message_name([0])
        return walker.capsule(self._json_ids[name]), name

    def json_framed(self, about: dict):
        """records/packed.py's seam's reader for this schema's values: reader(payload after the
        id) -> (the value's JSON, the schema object's JSON: about and the message's name) |
        None, the message-index list read in C; None without the C walker."""
        walker = self._json_walker()
        if not hasattr(walker, "framed"):
            return None
        import orjson
        return walker.framed(lambda name: orjson.dumps({**about, "message": name}))

    def _json_walker(self):
        if self._json is None:
            from kinspect.schemas.protobuf_json import JsonTables, json_walker
            tables = JsonTables(self.pool, self.file_name)
            walker = json_walker(tables.spec)
            walker.bind(_json_names(self.pool, self.file_name, tables.ids))
            self._json, self._json_ids = walker, tables.ids
            self.read_json = walker.read_json  # C, with no Python frame per value
        return self._json

    def shown_by_json_format(self, message) -> dict:
        """The message as json_format shows it, map entries sorted (the twin of _Shown)."""
        shown = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                          descriptor_pool=self.pool)
        if _has_maps(message.DESCRIPTOR):
            _sort_maps(message.DESCRIPTOR, shown)
        return shown


def _described(pool, file_name: str, indexes: list[int]):
    """The descriptor of the message the message-index list names (Confluent's rule: the
    first index picks a top-level message of the file, each next one a nested message)."""
    types = list(pool.FindFileByName(file_name).message_types_by_name.values())
    desc = None
    for index in indexes:
        if not 0 <= index < len(types):
            raise ProtoError(f"message index {list(indexes)} names no message of {file_name}")
        desc = types[index]
        types = list(desc.nested_types)
    if desc is None:
        raise ProtoError(f"{file_name} defines no message")
    return desc


def _json_names(pool, file_name: str, ids: dict[str, int]):
    """The walker's resolve: indexes -> (full name, message id), or None for no message."""
    def resolve(indexes):
        try:
            name = _described(pool, file_name, indexes).full_name
        except ProtoError:
            return None
        return name, ids.get(name, -1)
    return resolve


_MAPS: dict[str, bool] = {}


def _has_maps(descriptor, depth: int = 0) -> bool:
    """Whether a message holds a map field, itself or in a message it holds (judged once)."""
    known = _MAPS.get(descriptor.full_name)
    if known is not None:
        return known
    _MAPS[descriptor.full_name] = False  # a message that holds itself: judged by its other fields
    found = False
    for field in descriptor.fields:
        inner = field.message_type
        if inner is None or inner.full_name.startswith("google.protobuf."):
            continue
        if inner.GetOptions().map_entry or depth < 50 and _has_maps(inner, depth + 1):
            found = True
            break
    _MAPS[descriptor.full_name] = found
    return found


def _sort_maps(descriptor, shown: dict, depth: int = 0) -> None:
    """Map fields' entries in key order: the parser's own order follows a hash that changes from
    one process to the next, and decode's workers must write what one process writes."""
    if depth > 100 or not isinstance(shown, dict):
        return
    for field in descriptor.fields:
        inner = field.message_type
        value = shown.get(field.name)
        if inner is None or value is None or inner.full_name.startswith("google.protobuf."):
            continue
        if inner.GetOptions().map_entry:
            entry = inner.fields_by_name["value"].message_type
            if isinstance(value, dict):
                shown[field.name] = dict(sorted(value.items()))
                if entry is not None and not entry.full_name.startswith("google.protobuf."):
                    for item in value.values():
                        _sort_maps(entry, item, depth + 1)
        elif not _has_maps(inner):
            continue
        elif isinstance(value, list):
            for item in value:
                _sort_maps(inner, item, depth + 1)
        else:
            _sort_maps(inner, value, depth + 1)


class _Unusual(Exception):
    """A message _Shown leaves to json_format: an extension, an enum value with options, a
    closed enum's unknown number."""


def _same(value):
    return value


def _double(value):
    if value != value:
        return "NaN"
    if value == _INFINITY or value == -_INFINITY:
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _float(value):
    shown = _double(value)
    return shown if isinstance(shown, str) else ToShortestFloat(value)


def _bytes(value):
    return base64.b64encode(value).decode("ascii")


def _map_key(key) -> str:
    if key is True or key is False:
        return "true" if key else "false"
    return str(key)


_INFINITY = float("inf")
_SCALARS = {FieldDescriptor.CPPTYPE_INT64: str, FieldDescriptor.CPPTYPE_UINT64: str,
            FieldDescriptor.CPPTYPE_DOUBLE: _double, FieldDescriptor.CPPTYPE_FLOAT: _float}


class _Shown:
    """Messages in the proto3 JSON mapping with the original field names, map entries in key
    order: what json_format.MessageToDict and _sort_maps give (ProtoReader.shown_by_json_format,
    the twin the tests hold it to), at a fifth of their cost. MessageToDict works out each
    field's kind on every value; here each field gets its converter once. Messages of
    google.protobuf (well-known types with JSON forms of their own) are json_format's."""

    def __init__(self, pool):
        self.pool = pool
        self._fields: dict = {}  # FieldDescriptor -> (shown name, converter)
        self._well_known: dict[type, bool] = {}  # message class -> of google.protobuf?

    def message(self, message) -> dict:
        well_known = self._well_known.get(type(message))
        if well_known is None:
            well_known = self._well_known[type(message)] = \
                message.DESCRIPTOR.full_name.startswith("google.protobuf.")
        if well_known:
            return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                             descriptor_pool=self.pool)
        shown, fields = {}, self._fields
        for field, value in message.ListFields():
            found = fields.get(field)
            if found is None:
                found = fields[field] = self._field(field)
            name, convert = found
            shown[name] = convert(value)
        return shown

    def _field(self, field) -> tuple[str, object]:
        if field.is_extension:
            raise _Unusual(field.full_name)
        entry = field.message_type
        if field.type == FieldDescriptor.TYPE_MESSAGE and entry.has_options and entry.GetOptions().map_entry:
            convert = self._one(entry.fields_by_name["value"])

            def shown_map(value):
                return dict(sorted((_map_key(k), convert(v)) for k, v in value.items()))
            return field.name, shown_map
        convert = self._one(field)
        if field.is_repeated:
            return field.name, list if convert is _same else lambda value: [convert(v) for v in value]
        return field.name, convert

    def _one(self, field):
        """The converter of one value of the field."""
        kind = field.cpp_type
        if kind == FieldDescriptor.CPPTYPE_MESSAGE:
            return self.message
        if kind == FieldDescriptor.CPPTYPE_ENUM:
            return _enum(field.enum_type)
        if kind == FieldDescriptor.CPPTYPE_STRING and field.type == FieldDescriptor.TYPE_BYTES:
            return _bytes
        return _SCALARS.get(kind, _same)


def _enum(enum):
    if enum.full_name == "google.protobuf.NullValue":
        return lambda value: None
    names = {number: value.name for number, value in enum.values_by_number.items() if not value.has_options}
    closed = enum.is_closed

    def shown(value):
        name = names.get(value)
        if name is None:
            if closed or value in enum.values_by_number:
                raise _Unusual(enum.full_name)
            return value
        return name
    return shown


def _field_names(pool, file_name: str) -> frozenset:
    """Field names of the file's messages and of every message their fields reach; None when a
    well-known Struct or Value (which hold any name) is among them."""
    names, seen = set(), set()
    stack = list(pool.FindFileByName(file_name).message_types_by_name.values())
    while stack:
        desc = stack.pop()
        if desc.full_name in seen:
            continue
        seen.add(desc.full_name)
        if desc.full_name in ("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.Any"):
            return None
        stack.extend(desc.nested_types)
        for field in desc.fields:
            names.add(field.name)
            if field.message_type is not None:
                stack.append(field.message_type)
    return frozenset(names)


def _serialized(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """A base64 FileDescriptorProto (format=serialized), or None for .proto text."""
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or ";" in stripped:
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
        file = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return file if file.name or file.message_type else None


def _include_dir() -> str:
    import grpc_tools
    return os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")


def compile_files(main: str, texts: dict[str, str]) -> list[descriptor_pb2.FileDescriptorProto]:
    """protoc over texts (import name -> .proto text); the files in dependency order."""
    from grpc_tools import _protoc_compiler
    for name, text in texts.items():
        if not _SAFE_NAME.match(name) or ".." in name.split("/") or len(text) > MAX_PROTO_TEXT:
            raise ProtoError(f"cannot compile a .proto named {name!r}")
    work = tempfile.mkdtemp(prefix="kinspect-proto-")
    try:
        for name, text in texts.items():
            path = os.path.join(work, "src", name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write(text)
        out = os.path.join(work, "set.pb")
        errors = os.path.join(work, "errors.txt")
        argv = ["protoc", f"-I{os.path.join(work, 'src')}", f"-I{_include_dir()}",
                f"--descriptor_set_out={out}", "--include_imports", main]
        with _LOCK:
            code = _with_stderr(errors, lambda: _protoc_compiler.run_main([a.encode() for a in argv]))
        if code != 0 or not os.path.exists(out):
            with open(errors, encoding="utf-8", errors="replace") as f:
                said = " ".join(line.strip() for line in f.read().splitlines()[:3])
            said = said.replace(os.path.join(work, "src") + os.sep, "")
            raise ProtoError(f"protoc: {said or 'failed'}"[:300])
        with open(out, "rb") as f:
            return list(descriptor_pb2.FileDescriptorSet.FromString(f.read()).file)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _with_stderr(path: str, run):
    """run() with fd 2 sent to path (protoc's messages)."""
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.dup2(target, 2)
        return run()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def compile_proto(name: str, text: str, imports: dict[str, str]) -> ProtoReader:
    """A reader for a schema's text, its imports given by name (text or serialized)."""
    main = _serialized(text)
    files: list[descriptor_pb2.FileDescriptorProto]
    if main is None and all(_serialized(t) is None for t in imports.values()):
        texts = dict(imports)
        texts[name] = text
        files = compile_files(name, texts)
        main = next((f for f in files if f.name == name), files[-1] if files else None)
        if main is None:
            raise ProtoError("protoc produced no file")
    else:
        files = []
        for dep_name, dep_text in imports.items():
            dep = _serialized(dep_text)
            if dep is not None:
                dep.name = dep_name  # imports name files by their reference's name
            files += [dep] if dep is not None else [f for f in compile_files(dep_name, {**imports})
                                                   if f.name == dep_name]
        if main is None:
            files += [f for f in compile_files(name, {**imports, name: text}) if f.name == name]
            main = files[-1]
        else:
            files.append(main)
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    try:
        _add(pool, files, main, added)
    except (TypeError, KeyError, ValueError) as e:
        raise ProtoError(f"descriptor does not build: {e}"[:300]) from None
    return ProtoReader(main, pool)


def _add(pool, files, file, added: set) -> None:
    """file and what it imports, dependencies first; well-known types from the default pool."""
    stack = [(file, False)]
    by_name = {f.name: f for f in files}
    visiting: set[str] = set()
    while stack:
        item, ready = stack.pop()
        if item.name in added:
            continue
        if ready:
            pool.Add(item)
            added.add(item.name)
            visiting.discard(item.name)
            continue
        if item.name in visiting:
            raise ProtoError(f"imports loop through {item.name}")
        visiting.add(item.name)
        stack.append((item, True))
        for dep in item.dependency:
            if dep in added:
                continue
            if dep in visiting:
                raise ProtoError(f"imports loop through {dep}")
            found = by_name.get(dep) or _well_known(dep)
            if found is None:
                raise ProtoError(f"{item.name} imports {dep}, which no reference gives")
            stack.append((found, False))


def _well_known(name: str) -> descriptor_pb2.FileDescriptorProto | None:
    if not name.startswith("google/protobuf/"):
        return None
    try:
        found = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        module = "google.protobuf." + name.rsplit("/", 1)[1].removesuffix(".proto") + "_pb2"
        try:
            __import__(module)
            found = descriptor_pool.Default().FindFileByName(name)
        except (ImportError, KeyError):
            return None
    proto = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(proto)
    return proto
