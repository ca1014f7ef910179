"""A body's regular case in one call: ``walk`` decodes a body that has nothing to report, or
says it can't (None), and the generated decoder (codegen.py) decodes it as always.

A body version's layout becomes a program (``program``): per struct, its regular fields, each
``(code, key, flags, members)``, and its known tagged fields by tag. ``native.bodies.walk`` (C)
runs it, as does its twin ``walk_py``; both give the dict the generated decoder gives for the
same bytes, key for key and in order, or None where that decoder would meet anything to say: a
fault, a null in a non-nullable field, more array entries than ``items``, an unknown tagged
field (or a known one not filling its size, or holding a record set), trailing bytes. Record
sets are not decoded here: with ``raw`` they are the set's bytes, otherwise None in the dict
and a ``(dict, key, position, size, path)`` entry in the list returned beside it, for the
caller to decode in order (decoder_runtime.record_set) once the walk is known to hold.
"""

from __future__ import annotations

import struct

from kinspect import native
from kinspect.wire.layouts import Field, Layout

# field codes (native/_bodies.c has the same)
BOOL, INT8, INT16, UINT16, INT32, UINT32, INT64, FLOAT64, UUID, STRING, BYTES, RECORDS, STRUCT = range(13)
ARRAY, NULLABLE, COMPACT = 1, 2, 4

_CODES = {"bool": BOOL, "int8": INT8, "int16": INT16, "uint16": UINT16, "int32": INT32,
          "uint32": UINT32, "int64": INT64, "float64": FLOAT64, "uuid": UUID, "string": STRING,
          "bytes": BYTES, "records": RECORDS, "struct": STRUCT}
_FIXED = {BOOL: (struct.Struct(">?"), 1), INT8: (struct.Struct(">b"), 1),
          INT16: (struct.Struct(">h"), 2), UINT16: (struct.Struct(">H"), 2),
          INT32: (struct.Struct(">i"), 4), UINT32: (struct.Struct(">I"), 4),
          INT64: (struct.Struct(">q"), 8), FLOAT64: (struct.Struct(">d"), 8)}
_ARROW = " → "


def program(lay: Layout) -> tuple | None:
    """The walk's program of one body version: (flexible, the top struct), or None for a
    layout it does not cover (an array of record sets: none in Kafka's schemas). A struct is
    (its regular fields, {tag: field} of its known tagged fields but those holding record sets)."""
    if _array_of_records(lay.fields):
        return None
    return (lay.flexible, _struct_program(lay.fields))


def _array_of_records(fields: tuple[Field, ...]) -> bool:
    return any((f.array and f.type == "records") or _array_of_records(f.fields) for f in fields)


def _has_records(f: Field) -> bool:
    return f.type == "records" or any(_has_records(m) for m in f.fields)


def _op(f: Field) -> tuple:
    return (_CODES[f.type], f.key,
            (ARRAY if f.array else 0) | (NULLABLE if f.nullable else 0) | (COMPACT if f.compact else 0),
            _struct_program(f.fields) if f.type == "struct" else None)


def _struct_program(fields: tuple[Field, ...]) -> tuple:
    return (tuple(_op(f) for f in fields if f.tag is None),
            {f.tag: _op(f) for f in fields if f.tag is not None and not _has_records(f)})


class _Irregular(Exception):
    """What the generated decoder would report: the walk gives up."""


def walk_py(buf: bytes, start: int, end: int, prog: tuple, raw: bool, items: int,
            prefix: str) -> tuple[dict, list] | None:
    """native.bodies.walk's twin: (the body, its record sets to decode) or None."""
    if start < 0 or end > len(buf):
        raise ValueError("walk: start and end must lie within buf")
    if start > end:
        return None
    flexible, top = prog
    state = [items]
    sets: list = []
    body: dict = {}
    try:
        pos = _struct(buf, start, end, top, flexible, body, raw, state, prefix, sets)
    except _Irregular:
        return None
    if pos != end:
        return None
    return body, sets


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(5):
        if pos >= end:
            raise _Irregular
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise _Irregular


def _length(buf: bytes, pos: int, end: int, flags: int, wide: bool) -> tuple[int, int]:
    if flags & COMPACT:
        value, pos = _uvarint(buf, pos, end)
        return value - 1, pos
    size = 4 if wide else 2
    if end - pos < size:
        raise _Irregular
    return int.from_bytes(buf[pos:pos + size], "big", signed=True), pos + size


def _null(n: int, flags: int) -> bool:
    """Whether a length says null (the generated decoder's null_or without its reports)."""
    if n < 0:
        if n != -1 or not flags & NULLABLE:
            raise _Irregular
        return True
    return False


def _fixed(buf: bytes, pos: int, end: int, code: int):
    if code == UUID:
        if end - pos < 16:
            raise _Irregular
        h = buf[pos:pos + 16].hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}", pos + 16
    reader, size = _FIXED[code]
    if end - pos < size:
        raise _Irregular
    return reader.unpack_from(buf, pos)[0], pos + size


def _variable(buf: bytes, pos: int, end: int, code: int, flags: int, key: str, obj, raw: bool,
              path: str, sets: list):
    """A string, bytes or record set: (its value, the position after it)."""
    n, pos = _length(buf, pos, end, flags, code != STRING)
    if _null(n, flags):
        return None, pos
    if n > end - pos:
        raise _Irregular
    value = buf[pos:pos + n]
    if code == STRING:
        try:
            value = value.decode()
        except UnicodeDecodeError:
            pass
    elif code == RECORDS and not raw:
        sets.append((obj, key, pos, n, f"{path}{_ARROW}{key}"))
        value = None
    return value, pos + n


def _struct(buf: bytes, pos: int, end: int, program: tuple, flexible: bool, o: dict, raw: bool,
            state: list, path: str, sets: list) -> int:
    fields, tags = program
    for field in fields:
        pos = _field(buf, pos, end, field, flexible, o, raw, state, path, sets)
    if flexible:  # the tagged fields: known ones decoded as the generated decoder's tag functions do
        count, pos = _uvarint(buf, pos, end)
        for _ in range(count):
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            field = tags.get(tag)
            if field is None or size > end - pos:
                raise _Irregular
            stop = pos + size
            if _field(buf, pos, stop, field, flexible, o, raw, state, path, sets) != stop:
                raise _Irregular
            pos = stop
    return pos


def _field(buf: bytes, pos: int, end: int, field: tuple, flexible: bool, o: dict, raw: bool,
           state: list, path: str, sets: list) -> int:
    code, key, flags, members = field
    if flags & ARRAY:
        return _array(buf, pos, end, code, key, flags, members, flexible, o, raw, state, path, sets)
    if code == STRUCT:
        if flags & NULLABLE:
            if pos >= end:
                raise _Irregular
            pos += 1
            if buf[pos - 1] > 127:
                o[key] = None
                return pos
        e = o[key] = {}
        return _struct(buf, pos, end, members, flexible, e, raw, state, f"{path}{_ARROW}{key}", sets)
    if code >= STRING:
        o[key], pos = _variable(buf, pos, end, code, flags, key, o, raw, path, sets)
    else:
        o[key], pos = _fixed(buf, pos, end, code)
    return pos


def _array(buf: bytes, pos: int, end: int, code: int, key: str, flags: int, members, flexible: bool,
           o: dict, raw: bool, state: list, path: str, sets: list) -> int:
    n, pos = _length(buf, pos, end, flags, True)
    if _null(n, flags):
        o[key] = None
        return pos
    smallest = 16 if code == UUID else _FIXED[code][1] if code in _FIXED else 1
    if n * smallest > end - pos or n > state[0]:
        raise _Irregular
    state[0] -= n
    items: list = []
    o[key] = items
    for i in range(n):
        if code == STRUCT:
            e: dict = {}
            items.append(e)
            pos = _struct(buf, pos, end, members, flexible, e, raw, state, f"{path}{_ARROW}{key}[{i}]", sets)
        elif code >= STRING:
            value, pos = _variable(buf, pos, end, code, flags, key, items, raw, path, sets)
            items.append(value)
        else:
            value, pos = _fixed(buf, pos, end, code)
            items.append(value)
    return pos


walk = native.bodies.walk if native.bodies is not None and hasattr(native.bodies, "walk") else None
