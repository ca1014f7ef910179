"""Protobuf payloads straight to JSON text: a walker over the wire format, driven by tables
compiled once per schema, writing what ProtoReader.read's value gives through decode --json.

    tables = JsonTables(pool, "orders.proto")          # every message the file's messages reach
    walker = json_walker(tables.spec)                  # C (_protobuf.Walker) or this file's twin
    walker.walk(payload, tables.ids["lab.orders.Refund"])   # JSON bytes, or None

None means "not the fast way": the Python path (ProtoReader.read) then decodes the value and
says what is wrong with it. The walker gives None for anything it does not do exactly as
that path does: well-known types (google.protobuf.*, json_format's own forms), groups,
extensions, required fields, editions, enum values with options, a closed enum's unknown number,
a known field on a wire type not its own, invalid UTF-8, nesting deeper than MAX_DEPTH, and
every byte that does not read. What it writes:
- fields in field-number order (upb's ListFields); a singular field without presence only when
  not its default (a float's -0.0 is shown); oneofs: the member seen last, from when it was set;
- scalars last-one-wins, singular messages merged over all their occurrences, repeated fields
  from every occurrence, packed or not, in wire order;
- int64 kinds as strings, bytes as base64, enums by name (an open enum's unknown number as the
  number), NaN and infinities as strings, floats as their shortest float32 decimal;
- maps as objects in key order (keys as text), the last entry of a key winning.
Every value the Python path would parse is checked as it would be (strings overwritten later,
oneof members replaced, map entries shadowed), so a payload it refuses is never shown here.

Table spec (what the C walker and the twin read; built by JsonTables):
    messages: tuple of (full_name, supported, fields), fields sorted by number, each
              (number, name, type, flags, sub, enum)  with type a FieldDescriptor.TYPE_*,
              flags REPEATED | PRESENCE | MAP | ONEOF-index << 8 (+1), sub a message id or -1,
              enum an enum id or -1
    enums:    tuple of (closed, null_value, ((number, name or None), ...) sorted by number)
"""

from __future__ import annotations

import base64
import struct

import orjson
from google.protobuf.descriptor import FieldDescriptor as FD
from google.protobuf.internal.type_checkers import ToShortestFloat

from kinspect import native

_NATIVE = native.protobuf
MAX_DEPTH = 64  # below protobuf's own 100: deeper values go the Python path
REPEATED, PRESENCE, MAP = 1, 2, 4
ONEOF_SHIFT = 8
MAX_FIELDS = 1 << 16

_VARINT_KINDS = frozenset((FD.TYPE_INT64, FD.TYPE_UINT64, FD.TYPE_INT32, FD.TYPE_BOOL, FD.TYPE_UINT32,
                           FD.TYPE_ENUM, FD.TYPE_SINT32, FD.TYPE_SINT64))
_FIXED64_KINDS = frozenset((FD.TYPE_DOUBLE, FD.TYPE_FIXED64, FD.TYPE_SFIXED64))
_FIXED32_KINDS = frozenset((FD.TYPE_FLOAT, FD.TYPE_FIXED32, FD.TYPE_SFIXED32))


def wire_type(kind: int) -> int:
    if kind in _VARINT_KINDS:
        return 0
    if kind in _FIXED64_KINDS:
        return 1
    if kind in _FIXED32_KINDS:
        return 5
    return 3 if kind == FD.TYPE_GROUP else 2


class JsonTables:
    """The walker's tables for every message a file's messages reach (ids by full name)."""

    def __init__(self, pool, file_name: str):
        self.ids: dict[str, int] = {}
        self._messages: list = []
        self._enums: list = []
        self._enum_ids: dict[str, int] = {}
        self._syntax: dict[str, str] = {}
        file = pool.FindFileByName(file_name)
        pending = list(file.message_types_by_name.values())
        while pending:
            desc = pending.pop()
            if desc.full_name in self.ids:
                continue
            self.ids[desc.full_name] = len(self._messages)
            self._messages.append(desc)
            pending.extend(desc.nested_types)
            pending.extend(f.message_type for f in desc.fields if f.message_type is not None)
        self.spec = (tuple(self._message(desc) for desc in self._messages), tuple(self._enums))
        del self._messages

    def _message(self, desc) -> tuple:
        fields = sorted(desc.fields, key=lambda f: f.number)
        supported = (not desc.full_name.startswith("google.protobuf.") and not desc.extension_ranges
                     and self._file_syntax(desc.file) in ("proto2", "proto3") and len(fields) < MAX_FIELDS
                     and not any(f.is_required for f in fields))
        return desc.full_name, supported, tuple(self._field(f) for f in fields)

    def _field(self, field) -> tuple:
        flags = REPEATED if field.is_repeated else 0
        if field.has_presence:
            flags |= PRESENCE
        if field.containing_oneof is not None:
            flags |= (field.containing_oneof.index + 1) << ONEOF_SHIFT
        sub = -1
        if field.message_type is not None:
            sub = self.ids[field.message_type.full_name]
            options = field.message_type.GetOptions() if field.message_type.has_options else None
            if options is not None and options.map_entry:
                flags |= MAP
        enum = self._enum(field.enum_type) if field.enum_type is not None else -1
        return field.number, field.name, field.type, flags, sub, enum

    def _enum(self, enum) -> int:
        found = self._enum_ids.get(enum.full_name)
        if found is None:
            values = tuple(sorted((number, None if value.has_options else value.name)
                                  for number, value in enum.values_by_number.items()))
            found = self._enum_ids[enum.full_name] = len(self._enums)
            self._enums.append((bool(enum.is_closed), enum.full_name == "google.protobuf.NullValue", values))
        return found

    def _file_syntax(self, file) -> str:
        found = self._syntax.get(file.name)
        if found is None:
            from google.protobuf import descriptor_pb2
            proto = descriptor_pb2.FileDescriptorProto()
            file.CopyToProto(proto)
            found = self._syntax[file.name] = proto.syntax or "proto2"
        return found


def json_walker(spec):
    """The C walker where it is built, else the twin."""
    module = _NATIVE
    return module.Walker(spec) if module is not None else PyWalker(spec)


class _Fail(Exception):
    pass


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    for i in range(10):
        if pos >= end:
            raise _Fail
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
    raise _Fail


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _zigzag(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return (value >> 1) ^ -(value & 1)


_UNPACK_D = struct.Struct("<d").unpack_from
_UNPACK_F = struct.Struct("<f").unpack_from
_UNPACK_Q = struct.Struct("<Q").unpack_from
_UNPACK_I = struct.Struct("<I").unpack_from


def _special(value: float):
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return None


class PyWalker:
    """The C walker's twin, over the same tables: reads the payload into the values the Python
    path shows and writes them with orjson, as decode does."""

    def __init__(self, spec):
        messages, enums = spec
        self.messages = messages
        self.enums = [(closed, null, dict(values)) for closed, null, values in enums]
        self.numbers = [{field[0]: i for i, field in enumerate(fields)} for _, _, fields in messages]

    def bind(self, resolve) -> None:
        """read_json's names: resolve(indexes) -> (full name, message id) | None."""
        self.names: dict[tuple, tuple | None] = {}
        self.resolve = resolve

    def read_json(self, payload: bytes, indexes) -> tuple[str, bytes] | None:
        key = tuple(indexes)
        entry = self.names.get(key, False)
        if entry is False:
            entry = self.resolve(indexes)
            if len(self.names) < 1024:
                self.names[key] = entry
        if entry is None:
            return None
        text = self.walk(payload, entry[1])
        return None if text is None else (entry[0], text)

    def walk(self, payload: bytes, message: int) -> bytes | None:
        if not 0 <= message < len(self.messages):
            return None
        buf = bytes(payload)
        try:
            return orjson.dumps(self._message(message, buf, [(0, len(buf))], 0))
        except (_Fail, RecursionError):
            return None

    def _scan(self, mid: int, buf: bytes, segments, depth: int, entry: bool = False) -> dict:
        """Field index -> its occurrences (wire type, start, end), oneofs resolved. A map entry
        holding an unknown field is not read here (upb moves the whole entry aside)."""
        _, supported, fields = self.messages[mid]
        if not supported or depth > MAX_DEPTH:
            raise _Fail
        numbers = self.numbers[mid]
        slots: dict[int, list] = {}
        cases: dict[int, int] = {}
        for start, end in segments:
            pos = start
            while pos < end:
                tag, pos = _varint(buf, pos, end)
                number, wt = tag >> 3, tag & 7
                if number == 0 or tag > 0xFFFFFFFF:
                    raise _Fail
                if wt == 0:
                    value_start = pos
                    _, pos = _varint(buf, pos, end)
                elif wt == 1 or wt == 5:
                    value_start = pos
                    pos += 8 if wt == 1 else 4
                    if pos > end:
                        raise _Fail
                elif wt == 2:
                    size, value_start = _varint(buf, pos, end)
                    if size > end - value_start:
                        raise _Fail
                    pos = value_start + size
                else:
                    raise _Fail
                index = numbers.get(number)
                if index is None:
                    if entry:
                        raise _Fail
                    continue
                _, _, kind, flags, sub, _ = fields[index]
                if wt != wire_type(kind) and not (wt == 2 and flags & REPEATED and wire_type(kind) != 2):
                    raise _Fail
                if kind == FD.TYPE_STRING:
                    try:
                        buf[value_start:pos].decode("utf-8")
                    except UnicodeDecodeError:
                        raise _Fail from None
                occurrence = (wt, value_start, pos)
                oneof = flags >> ONEOF_SHIFT
                if oneof and cases.get(oneof) != index:
                    old = cases.get(oneof)
                    if old is not None:
                        gone = slots.pop(old)
                        if fields[old][2] == FD.TYPE_MESSAGE:  # parsed before it was replaced
                            self._message(fields[old][4], buf, [o[1:] for o in gone], depth + 1)
                    slots.pop(index, None)
                    cases[oneof] = index
                if flags & REPEATED or kind == FD.TYPE_MESSAGE:
                    slots.setdefault(index, []).append(occurrence)
                else:
                    slots[index] = [occurrence]
        return slots

    def _message(self, mid: int, buf: bytes, segments, depth: int) -> dict:
        slots = self._scan(mid, buf, segments, depth)
        fields = self.messages[mid][2]
        shown = {}
        for index in sorted(slots):
            _, name, kind, flags, sub, enum = fields[index]
            occurrences = slots[index]
            if flags & MAP:
                entries = {}
                for _, start, end in occurrences:
                    key, value = self._entry(sub, buf, start, end, depth + 1)
                    entries[key] = value
                shown[name] = dict(sorted(entries.items()))
            elif flags & REPEATED:
                values = []
                for wt, start, end in occurrences:
                    if wt == 2 and wire_type(kind) != 2:
                        values.extend(self._packed(kind, enum, buf, start, end))
                    elif kind == FD.TYPE_MESSAGE:
                        values.append(self._message(sub, buf, [(start, end)], depth + 1))
                    else:
                        values.append(self._shown(kind, enum, self._raw(kind, buf, start, end)))
                if values:
                    shown[name] = values
            elif kind == FD.TYPE_MESSAGE:
                shown[name] = self._message(sub, buf, [o[1:] for o in occurrences], depth + 1)
            else:
                _, start, end = occurrences[-1]
                raw = self._raw(kind, buf, start, end)
                if flags & PRESENCE or raw:
                    shown[name] = self._shown(kind, enum, raw)
        return shown

    def _entry(self, mid: int, buf: bytes, start: int, end: int, depth: int) -> tuple[str, object]:
        slots = self._scan(mid, buf, [(start, end)], depth, entry=True)
        fields = self.messages[mid][2]
        key = value = None
        for index, field in enumerate(fields):
            number, _, kind, _, sub, enum = field
            occurrences = slots.get(index)
            if kind == FD.TYPE_MESSAGE:
                shown = self._message(sub, buf, [o[1:] for o in occurrences or ()], depth + 1)
            else:
                raw = self._raw(kind, buf, *occurrences[-1][1:]) if occurrences else (
                    b"" if wire_type(kind) == 2 else 0)
                shown = self._shown(kind, enum, raw)
            if number == 1:
                key = "true" if shown is True else "false" if shown is False else str(shown)
            elif number == 2:
                value = shown
        return key, value

    def _packed(self, kind: int, enum: int, buf: bytes, start: int, end: int) -> list:
        values, wt = [], wire_type(kind)
        pos = start
        while pos < end:
            if wt == 0:
                raw, pos = _varint(buf, pos, end)
                raw = self._from_varint(kind, raw)
            else:
                size = 8 if wt == 1 else 4
                if pos + size > end:
                    raise _Fail
                raw = self._fixed(kind, buf, pos)
                pos += size
            values.append(self._shown(kind, enum, raw))
        return values

    def _raw(self, kind: int, buf: bytes, start: int, end: int):
        """The field's value as read, before it is shown; falsy exactly for the default."""
        wt = wire_type(kind)
        if wt == 0:
            return self._from_varint(kind, _varint(buf, start, end)[0])
        if wt == 2:
            return buf[start:end]
        return self._fixed(kind, buf, start)

    @staticmethod
    def _from_varint(kind: int, raw: int):
        if kind == FD.TYPE_INT64:
            return _signed(raw, 64)
        if kind in (FD.TYPE_INT32, FD.TYPE_ENUM):
            return _signed(raw, 32)
        if kind == FD.TYPE_UINT32:
            return raw & 0xFFFFFFFF
        if kind == FD.TYPE_SINT32:
            return _zigzag(raw, 32)
        if kind == FD.TYPE_SINT64:
            return _zigzag(raw, 64)
        if kind == FD.TYPE_BOOL:
            return raw != 0
        return raw

    @staticmethod
    def _fixed(kind: int, buf: bytes, pos: int):
        if kind in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
            bits = _UNPACK_Q(buf, pos)[0] if kind == FD.TYPE_DOUBLE else _UNPACK_I(buf, pos)[0]
            return (bits, (_UNPACK_D if kind == FD.TYPE_DOUBLE else _UNPACK_F)(buf, pos)[0]) if bits else 0
        if kind == FD.TYPE_FIXED64:
            return _UNPACK_Q(buf, pos)[0]
        if kind == FD.TYPE_FIXED32:
            return _UNPACK_I(buf, pos)[0]
        if kind == FD.TYPE_SFIXED64:
            return _signed(_UNPACK_Q(buf, pos)[0], 64)
        return _signed(_UNPACK_I(buf, pos)[0], 32)

    def _shown(self, kind: int, enum: int, raw):
        if kind in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
            value = raw[1] if raw else 0.0
            special = _special(value)
            if special is not None:
                return special
            return ToShortestFloat(value) if kind == FD.TYPE_FLOAT else value
        if kind in (FD.TYPE_INT64, FD.TYPE_UINT64, FD.TYPE_SINT64, FD.TYPE_FIXED64, FD.TYPE_SFIXED64):
            return str(raw)
        if kind == FD.TYPE_STRING:
            return raw.decode("utf-8") if raw else ""
        if kind == FD.TYPE_BYTES:
            return base64.b64encode(raw).decode("ascii") if raw else ""
        if kind == FD.TYPE_ENUM:
            closed, null, names = self.enums[enum]
            if null:
                return None
            if raw in names:
                name = names[raw]
                if name is None:
                    raise _Fail  # a value with options: json_format's
                return name
            if closed:
                raise _Fail
            return raw
        if kind == FD.TYPE_BOOL:
            return bool(raw)
        return raw
