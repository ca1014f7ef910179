"""Avro payloads, decoded with fastavro against a registry schema and its references.

    reader = compile_avro(text, named)   # named: {"ns.Name": parsed} from the references
    value = reader.read(payload)         # fastavro's values; AvroError with an offset if bad

fastavro's reader is C and trusts the data in two ways that hostile input exploits: an array of
items that take no bytes (null, an empty record, fixed(0)) is read for as many items as its block
count declares (10⁹ Nones), and a recursive schema recurses as deep as the data nests (a segfault
past some 10⁵ levels). compile_avro finds both in the schema once; a schema that has either gets
a bounded walk of the payload first (_Walk: depth, items and lengths checked against the bytes
left), and only a payload that passes reaches fastavro. Other schemas go straight to fastavro:
every item then costs at least one byte, so the work is bounded by the payload's length, and its
short reads raise EOFError.
"""

from __future__ import annotations

import io
import struct

from fastavro import parse_schema, schemaless_reader

try:  # schemaless_reader's own body: without its set-up on every call (a third of its time)
    from fastavro._read import _read_data
except ImportError:  # fastavro without its C modules, or one that moved it
    _read_data = None

MAX_DEPTH = 64            # nesting of records, arrays, maps and unions in data
MAX_SCHEMA_DEPTH = 200    # nesting of the schema text itself
MAX_EMPTY_ITEMS = 100_000  # items of zero bytes one payload may declare
PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_OPTIONS = {"return_record_name": False, "return_record_name_override": False,  # schemaless_reader's
            "handle_unicode_errors": "strict", "return_named_type": False,      # defaults
            "return_named_type_override": False}


class AvroError(ValueError):
    def __init__(self, what: str, offset: int | None = None):
        super().__init__(what)
        self.offset = offset


class AvroReader:
    __slots__ = ("parsed", "guarded", "name", "field_names", "named", "direct", "json_program")

    def __init__(self, parsed, guarded: bool, name: str | None, field_names=frozenset(),
                 direct: bool = True):
        self.parsed, self.guarded, self.name = parsed, guarded, name
        self.field_names = field_names  # of every record the schema reaches (for redaction)
        self.named = {"writer": {}, "reader": {}}  # what schemaless_reader makes on every call
        self.parsed = parse_schema(parsed, self.named["writer"])
        self.direct = direct and _read_data is not None
        from kinspect.schemas.avro_json import NoProgram, compile_program
        try:  # for read_json: None when this schema's values have no JSON program
            self.json_program = compile_program(self.parsed, self.named["writer"])
        except NoProgram:
            self.json_program = None

    def read_json(self, payload: bytes) -> bytes | None:
        """The value's JSON text as ``decode --json`` writes what read() gives, or None when it
        does not go that way (then read() decodes it, or says what is wrong)."""
        if self.json_program is None:
            return None
        from kinspect.schemas.avro_json import read_json
        return read_json(self.json_program, payload)

    def read(self, payload: bytes):
        if self.guarded:
            end = _Walk(payload).walk(self.parsed)
            if end != len(payload):
                raise AvroError(f"{len(payload) - end} bytes after the value", end)
        stream = io.BytesIO(payload)
        try:
            if self.direct:
                value = _read_data(stream, self.parsed, self.named, None, _OPTIONS)
            else:
                value = schemaless_reader(stream, self.parsed, None)
        except EOFError:
            raise AvroError("payload cut off: a length or count says more than the bytes left",
                            stream.tell()) from None
        except (UnicodeDecodeError, ValueError, IndexError, KeyError, TypeError, struct.error,
                OverflowError, RecursionError) as e:
            raise AvroError(f"does not read as this schema: {type(e).__name__}: {e}"[:300],
                            stream.tell()) from None
        if stream.tell() != len(payload):
            raise AvroError(f"{len(payload) - stream.tell()} bytes after the value", stream.tell())
        return value


def compile_avro(text: str, named: dict | None = None) -> tuple[AvroReader, dict]:
    """(reader, the named types this schema defines, for schemas that reference it)."""
    import json
    try:
        schema = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise AvroError(f"schema is not JSON: {e}"[:200]) from None
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        raise AvroError(f"schema nests deeper than {MAX_SCHEMA_DEPTH}")
    known = dict(named or {})
    try:
        parsed = parse_schema(schema, named_schemas=known)
    except RecursionError:
        raise AvroError("schema nests too deep") from None
    except Exception as e:  # fastavro raises SchemaParseException, ValueError, KeyError, TypeError...
        raise AvroError(f"schema does not parse: {type(e).__name__}: {e}"[:300]) from None
    name = parsed.get("name") if isinstance(parsed, dict) else None
    return AvroReader(parsed, _risky(parsed, known), name, _field_names(parsed, known)), known


def _field_names(schema, named: dict) -> frozenset:
    names, seen, stack = set(), set(), [schema]
    while stack:
        node = _resolve(stack.pop(), named)
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict) and id(node) not in seen:
            seen.add(id(node))
            for f in node.get("fields", ()) if isinstance(node.get("fields"), list) else ():
                if isinstance(f, dict):
                    names.add(f.get("name"))
                    stack.append(f.get("type"))
            for part in ("type", "items", "values"):
                if isinstance(node.get(part), (dict, list, str)):
                    stack.append(node[part])
    return frozenset(n for n in names if isinstance(n, str))


def _depth(node, limit: int = MAX_SCHEMA_DEPTH + 1) -> int:
    """Nesting depth of a JSON value, stopping past limit (iterative: the text is hostile)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > limit:
            return depth
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _risky(schema, named: dict) -> bool:
    """Does the schema recurse, or hold an array whose items can take no bytes?"""
    return _recurses(schema, named, set()) or _empty_array_items(schema, named, set())


def _resolve(node, named: dict):
    if isinstance(node, str) and node not in PRIMITIVES:
        return named.get(node, node)
    return node


def _recurses(node, named: dict, open_names: set) -> bool:
    node = _resolve(node, named)
    if isinstance(node, list):
        return any(_recurses(branch, named, open_names) for branch in node)
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if isinstance(kind, (dict, list)):
        return _recurses(kind, named, open_names)
    if kind == "record" or kind == "error":
        name = node.get("name")
        if name in open_names:
            return True
        inner = open_names | {name}
        return any(_recurses(f.get("type"), named, inner) for f in node.get("fields", ()))
    if kind == "array":
        return _recurses(node.get("items"), named, open_names)
    if kind == "map":
        return _recurses(node.get("values"), named, open_names)
    return False


def _can_be_empty(node, named: dict, seen: set) -> bool:
    node = _resolve(node, named)
    if node == "null":
        return True
    if isinstance(node, list):
        return False  # a union's branch index takes a byte
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if isinstance(kind, (dict, list)) or kind == "null":
        return _can_be_empty(kind, named, seen)
    if kind == "fixed":
        return node.get("size") == 0
    if kind in ("record", "error"):
        name = node.get("name")
        if name in seen:
            return False
        return all(_can_be_empty(f.get("type"), named, seen | {name}) for f in node.get("fields", ()))
    return False


def _empty_array_items(node, named: dict, seen: set) -> bool:
    node = _resolve(node, named)
    if isinstance(node, list):
        return any(_empty_array_items(branch, named, seen) for branch in node)
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if isinstance(kind, (dict, list)):
        return _empty_array_items(kind, named, seen)
    if kind == "array":
        items = node.get("items")
        return _can_be_empty(items, named, set()) or _empty_array_items(items, named, seen)
    if kind == "map":
        return _empty_array_items(node.get("values"), named, seen)
    if kind in ("record", "error"):
        name = node.get("name")
        if name in seen:
            return False
        return any(_empty_array_items(f.get("type"), named, seen | {name}) for f in node.get("fields", ()))
    return False


class _Walk:
    """Avro's binary encoding skipped over, checked against the bytes left, for the schemas
    fastavro cannot be trusted with (parsed by fastavro: named types appear by name)."""

    def __init__(self, data: bytes):
        self.data, self.pos, self.empty = data, 0, 0
        self.named: dict = {}

    def walk(self, schema) -> int:
        self._collect(schema, set())
        self._value(schema, 0)
        return self.pos

    def _collect(self, node, seen: set) -> None:
        stack = [node]
        while stack:
            item = stack.pop()
            if isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, dict):
                name = item.get("name")
                if item.get("type") in ("record", "error", "enum", "fixed") and name and id(item) not in seen:
                    seen.add(id(item))
                    self.named[name] = item
                    stack.extend(f.get("type") for f in item.get("fields", ()))
                elif item.get("type") in ("array", "map"):
                    stack.append(item.get("items", item.get("values")))
                elif isinstance(item.get("type"), (dict, list)):
                    stack.append(item["type"])

    def _long(self) -> int:
        data, pos = self.data, self.pos
        result = shift = 0
        for i in range(pos, min(pos + 10, len(data))):
            byte = data[i]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.pos = i + 1
                return (result >> 1) ^ -(result & 1)
            shift += 7
        raise AvroError("varint cut off or longer than 10 bytes", pos)

    def _skip(self, size: int, what: str) -> None:
        if size < 0 or size > len(self.data) - self.pos:
            raise AvroError(f"{what} of {size} bytes, {len(self.data) - self.pos} left", self.pos)
        self.pos += size

    def _value(self, node, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise AvroError(f"data nests deeper than {MAX_DEPTH}", self.pos)
        if isinstance(node, str):
            if node in PRIMITIVES:
                self._primitive(node)
                return
            node = self.named.get(node)
            if node is None:
                raise AvroError("schema names an unknown type", self.pos)
        if isinstance(node, list):
            at = self.pos
            branch = self._long()
            if not 0 <= branch < len(node):
                raise AvroError(f"union branch {branch} of {len(node)}", at)
            self._value(node[branch], depth + 1)
            return
        kind = node.get("type")
        if isinstance(kind, (dict, list)) or kind in PRIMITIVES:
            self._value(kind, depth)  # a primitive with a logicalType, or a nested definition
        elif kind in ("record", "error"):
            for f in node.get("fields", ()):
                self._value(f["type"], depth + 1)
        elif kind == "enum":
            at = self.pos
            index = self._long()
            if not 0 <= index < len(node.get("symbols", ())):
                raise AvroError(f"enum index {index} of {len(node.get('symbols', ()))}", at)
        elif kind == "fixed":
            self._skip(node.get("size", 0), "fixed")
        elif kind in ("array", "map"):
            self._blocks(node, kind == "map", depth)
        else:
            raise AvroError(f"unknown schema type {kind!r}", self.pos)

    def _blocks(self, node, is_map: bool, depth: int) -> None:
        items = node.get("values") if is_map else node.get("items")
        while True:
            at = self.pos
            count = self._long()
            if count == 0:
                return
            if count < 0:
                count = -count
                self._long()  # the block's size in bytes
            start = self.pos
            for _ in range(count):
                if is_map:
                    self._skip(self._long(), "map key")
                before = self.pos
                self._value(items, depth + 1)
                if self.pos == before and not is_map:
                    self.empty += 1
                    if self.empty > MAX_EMPTY_ITEMS:
                        raise AvroError(f"block declares {count} items of no bytes (more than "
                                        f"{MAX_EMPTY_ITEMS} in one value)", at)
            if self.pos == start and count > MAX_EMPTY_ITEMS:
                raise AvroError(f"block of {count} items", at)

    def _primitive(self, kind: str) -> None:
        if kind == "null":
            return
        if kind == "boolean":
            self._skip(1, "boolean")
        elif kind in ("int", "long"):
            self._long()
        elif kind == "float":
            self._skip(4, "float")
        elif kind == "double":
            self._skip(8, "double")
        else:
            self._skip(self._long(), kind)
