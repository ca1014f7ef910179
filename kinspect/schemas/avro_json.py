"""An Avro value's JSON text straight from its bytes, without fastavro's objects in between.

    program = compile_program(parsed, named)   # fastavro's parsed schema and its named types
    text = read_json(program, payload)         # bytes, or None: then fastavro reads it

The text is byte for byte what ``decode --json`` writes for the value fastavro reads (records as
objects in field order, enums as their symbol, a union as its branch's value, bytes and fixed as
render/jsonl.py writes bytes, floats as orjson writes them). None whenever that is not sure or the
payload is wrong in any way; the Python path (schemas/avro.py) then reads it and reports what is
wrong, at which byte. native/_avro.c walks the program in C (``read_json``); ``read_json_py`` is
its twin, the same walk in Python.

A program is a list of int32 nodes, the root's at 0, with the JSON texts they write in one bytes
object (``texts``), each as (offset, length):
    NULL, BOOLEAN, LONG (int and long), FLOAT, DOUBLE, BYTES, STRING   the opcode alone
    FIXED size | ENUM n (offset, length)*n | ARRAY items | MAP values | UNION n node*n
    RECORD n (offset, length, node)*n         a field's text: '{"name":' first, then ',"name":'
A named type is one node, that every use points to (a recursive schema loops through it).
Schemas with a logical type fastavro converts (decimal, uuid, date, time-*, timestamp-*) have
no program: their values are Python objects rendered by their own rules.
"""

from __future__ import annotations

import base64
import struct
from array import array

import orjson

from kinspect import native

NULL, BOOLEAN, LONG, FLOAT, DOUBLE, BYTES, STRING, FIXED, ENUM, ARRAY, MAP, UNION, RECORD = range(13)
PRIMITIVES = {"null": NULL, "boolean": BOOLEAN, "int": LONG, "long": LONG, "float": FLOAT,
              "double": DOUBLE, "bytes": BYTES, "string": STRING}
MAX_DEPTH = 64            # as native/_avro.c: nesting of the data
MAX_EMPTY_ITEMS = 100_000  # array or map items of no bytes in one value
MAP_KEYS = 64             # a map's keys are checked for repeats pairwise
MAX_NODES = 1 << 20

_avro = native.avro


class NoProgram(ValueError):
    """The schema's values cannot be written this way (see the module's docstring)."""


class Program:
    __slots__ = ("code", "texts", "capsule")

    def __init__(self, code: list[int], texts: bytes):
        self.code, self.texts = code, texts
        self.capsule = None if _avro is None else _avro.program(array("i", code).tobytes(), texts)


def compile_program(schema, named: dict) -> Program:
    """The program of a schema as fastavro parsed it (named types referenced by their full
    name, defined in ``named``); NoProgram when it has none."""
    try:
        from fastavro.read import LOGICAL_READERS
    except ImportError:
        LOGICAL_READERS = None
    code: list[int] = []
    texts = bytearray()
    placed: dict[str, int] = {}

    def text(data: bytes) -> tuple[int, int]:
        texts.extend(data)
        return len(texts) - len(data), len(data)

    def node(s) -> int:
        if len(code) > MAX_NODES:
            raise NoProgram("schema too big")
        if isinstance(s, str):
            if s in PRIMITIVES:
                code.append(PRIMITIVES[s])
                return len(code) - 1
            if s in placed:
                return placed[s]
            if s not in named:
                raise NoProgram(f"unknown type {s!r}")
            return node(named[s])
        if isinstance(s, list):
            at = len(code)
            code.extend([UNION, len(s)] + [0] * len(s))
            for i, branch in enumerate(s):
                code[at + 2 + i] = node(branch)
            return at
        if not isinstance(s, dict):
            raise NoProgram(f"schema node {s!r}")
        kind = s.get("type")
        if isinstance(kind, (dict, list)):
            return node(kind)
        logical = s.get("logicalType")
        if logical is not None and (LOGICAL_READERS is None or f"{kind}-{logical}" in LOGICAL_READERS):
            raise NoProgram(f"logical type {logical!r}")
        if kind in PRIMITIVES:
            return node(kind)
        at = len(code)
        name = s.get("name")
        if kind in ("record", "error"):
            fields = s.get("fields") or []
            placed[name] = at
            code.extend([RECORD, len(fields)] + [0] * (3 * len(fields)))
            for i, field in enumerate(fields):
                key = (b"{" if i == 0 else b",") + orjson.dumps(field["name"]) + b":"
                code[at + 2 + 3 * i:at + 4 + 3 * i] = text(key)
                code[at + 4 + 3 * i] = node(field["type"])
        elif kind == "enum":
            symbols = s.get("symbols") or []
            placed[name] = at
            code.extend([ENUM, len(symbols)])
            for symbol in symbols:
                code.extend(text(orjson.dumps(symbol)))
        elif kind == "fixed":
            placed[name] = at
            code.extend([FIXED, int(s["size"])])
        elif kind in ("array", "map"):
            code.extend([ARRAY if kind == "array" else MAP, 0])
            code[at + 1] = node(s["items"] if kind == "array" else s["values"])
        else:
            raise NoProgram(f"schema type {kind!r}")
        return at

    try:
        root = node(schema)
    except RecursionError:
        raise NoProgram("schema nests too deep") from None
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise NoProgram(f"{type(e).__name__}: {e}") from None
    if root != 0:
        raise NoProgram("the root is not the first node")
    return Program(code, bytes(texts))


def read_json(program: Program, payload: bytes) -> bytes | None:
    if program.capsule is not None:
        return _avro.read_json(program.capsule, payload)
    return read_json_py(program, payload)


class _Stop(Exception):
    pass


def read_json_py(program: Program, payload: bytes) -> bytes | None:
    """read_json's twin: the same walk in Python (what KINSPECT_PURE_PYTHON=1 runs)."""
    walk = _Walk(program, payload)
    try:
        walk.node(0, 0)
    except _Stop:
        return None
    if walk.pos != len(payload):
        return None
    return b"".join(walk.out)


class _Walk:
    __slots__ = ("code", "texts", "data", "pos", "empty", "out")

    def __init__(self, program: Program, data: bytes):
        self.code, self.texts, self.data = program.code, program.texts, data
        self.pos = self.empty = 0
        self.out: list[bytes] = []

    def long(self) -> int:
        data, pos = self.data, self.pos
        raw = shift = 0
        while shift < 70:
            if pos >= len(data):
                raise _Stop
            byte = data[pos]
            pos += 1
            if shift == 63 and byte > 1:
                raise _Stop
            raw |= (byte & 0x7F) << shift
            if byte < 0x80:
                self.pos = pos
                return (raw >> 1) ^ -(raw & 1)
            shift += 7
        raise _Stop

    def take(self, size: int) -> bytes:
        if size < 0 or size > len(self.data) - self.pos:
            raise _Stop
        self.pos += size
        return self.data[self.pos - size:self.pos]

    def string(self) -> bytes:
        try:
            return orjson.dumps(self.take(self.long()).decode("utf-8"))
        except UnicodeDecodeError:
            raise _Stop from None

    def node(self, at: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _Stop
        code, out = self.code, self.out
        op = code[at]
        if op == NULL:
            out.append(b"null")
        elif op == BOOLEAN:
            byte = self.take(1)[0]
            if byte > 1:
                raise _Stop
            out.append(b"true" if byte else b"false")
        elif op == LONG:
            out.append(b"%d" % self.long())
        elif op == FLOAT:
            out.append(orjson.dumps(struct.unpack("<f", self.take(4))[0]))
        elif op == DOUBLE:
            out.append(orjson.dumps(struct.unpack("<d", self.take(8))[0]))
        elif op == STRING:
            out.append(self.string())
        elif op in (BYTES, FIXED):
            raw = self.take(self.long() if op == BYTES else code[at + 1])
            try:
                out.append(orjson.dumps(raw.decode("utf-8")))
            except UnicodeDecodeError:
                out.append(b'{"b64":"' + base64.b64encode(raw) + b'"}')
        elif op in (ENUM, UNION):
            index = self.long()
            if not 0 <= index < code[at + 1]:
                raise _Stop
            if op == ENUM:
                offset, length = code[at + 2 + 2 * index], code[at + 3 + 2 * index]
                out.append(self.texts[offset:offset + length])
            else:
                self.node(code[at + 2 + index], depth + 1)
        elif op in (ARRAY, MAP):
            self.blocks(code[at + 1], depth, op == MAP)
        elif op == RECORD:
            count = code[at + 1]
            if not count:
                out.append(b"{}")
                return
            for i in range(count):
                offset, length, field = code[at + 2 + 3 * i:at + 5 + 3 * i]
                out.append(self.texts[offset:offset + length])
                self.node(field, depth + 1)
            out.append(b"}")
        else:
            raise _Stop

    def blocks(self, items: int, depth: int, is_map: bool) -> None:
        out = self.out
        out.append(b"{" if is_map else b"[")
        keys: list[bytes] = []
        total = 0
        while True:
            count = self.long()
            if count == 0:
                break
            if count < 0:
                if count == -(1 << 63):
                    raise _Stop
                self.long()
                count = -count
            if count > (len(self.data) - self.pos) + (MAX_EMPTY_ITEMS - self.empty):
                raise _Stop
            for _ in range(count):
                if total:
                    out.append(b",")
                if is_map:
                    if total >= MAP_KEYS:
                        raise _Stop
                    key = self.take(self.long())
                    try:
                        text = orjson.dumps(key.decode("utf-8"))
                    except UnicodeDecodeError:
                        raise _Stop from None
                    if key in keys:
                        raise _Stop
                    keys.append(key)
                    out.append(text + b":")
                before = self.pos
                self.node(items, depth + 1)
                if self.pos == before:
                    self.empty += 1
                    if self.empty > MAX_EMPTY_ITEMS:
                        raise _Stop
                total += 1
        out.append(b"}" if is_map else b"]")
