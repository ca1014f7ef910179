"""Decoded structs as Kafka's generated JSON converters write them (for --format kafka).

Field order is the definition's; names are the definition's with a lower-case first letter;
tagged fields appear only when they differ from their default; bytes are base64 with padding;
UUIDs Kafka's base64; strings escaped as Jackson does (\\uXXXX in upper case, short escapes for
\\b \\t \\n \\f \\r); doubles as Java's Double.toString; bytes that are not UTF-8 read as Java
reads them (java_text).
"""

from __future__ import annotations

import base64
import codecs
import math
from decimal import Decimal

from kinspect.storage import structs
from kinspect.wire.layouts import NO_DEFAULT, Field

_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r",
                 ord('"'): '\\"', ord("\\"): "\\\\"})
_ZERO = {"bool": False, "string": "", "bytes": b"", "uuid": structs.ZERO_UUID, "float64": 0.0}


def java_json(name: str, version: int, data: dict, nested: dict[str, str] | None = None) -> str:
    """One struct version as JSON text; nested maps a bytes field's key to the struct its
    decoded dict (with its own "version") was read as (consumer protocol members)."""
    return _struct(structs.layout(name, version).fields, data, nested or {})


def string(text: str | bytes) -> str:
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = java_text(text)
    return '"' + text.translate(_ESCAPES) + '"'


def java_text(raw) -> str:
    """Bytes as Java's new String(bytes, UTF_8) reads them (JDK 17), as kafka-dump-log does: one
    U+FFFD per malformed sequence as Java delimits them, which is not always as Python does
    (ED A6: one for Java, two for Python; a sequence cut by the end: one for what is left)."""
    return bytes(raw).decode("utf-8", "kinspect-java")


def _continuation(data: bytes, i: int) -> bool:
    return i < len(data) and data[i] & 0xC0 == 0x80


def _java_malformed(data: bytes, pos: int) -> int:
    """How many bytes Java's UTF-8 decoder replaces by one U+FFFD at pos, where Python found a
    malformed sequence (java.lang.String.decodeUTF8_UTF16 and its malformed3/malformed4)."""
    b1, left = data[pos], len(data) - pos
    if 0xE0 <= b1 <= 0xEF:
        if left >= 3:
            if (b1 == 0xE0 and data[pos + 1] & 0xE0 == 0x80) or not _continuation(data, pos + 1):
                return 1
            return 3 if _continuation(data, pos + 2) else 2  # 3: a surrogate, well formed but refused
        if left == 2 and ((b1 == 0xE0 and data[pos + 1] & 0xE0 == 0x80) or not _continuation(data, pos + 1)):
            return 1
        return left  # cut by the end: one for the rest
    if 0xF0 <= b1 <= 0xF7:
        b2 = data[pos + 1] if left >= 2 else None
        second_bad = b2 is not None and ((b1 == 0xF0 and not 0x90 <= b2 <= 0xBF)
                                         or (b1 == 0xF4 and b2 & 0xF0 != 0x80) or b2 & 0xC0 != 0x80)
        if b1 > 0xF4 or second_bad:
            return 1
        if left >= 4:
            return 2 if not _continuation(data, pos + 2) else 3
        return 2 if left == 3 and not _continuation(data, pos + 2) else left
    return 1  # a continuation byte, C0/C1, F8..FF, or a two-byte lead without its second byte


def _java_replace(error: UnicodeDecodeError) -> tuple[str, int]:
    return "\ufffd", error.start + _java_malformed(error.object, error.start)


codecs.register_error("kinspect-java", _java_replace)


def double(value: float) -> str:
    """Java's Double.toString: plain between 1e-3 and 1e7, else d.dddE±n; always a dot."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    shortest = Decimal(repr(abs(value))).normalize()
    _, digits, exponent = shortest.as_tuple()
    if 1e-3 <= abs(value) < 1e7:
        text = format(shortest, "f")
        return sign + (text if "." in text else text + ".0")
    text = "".join(map(str, digits))
    return f"{sign}{text[0]}.{text[1:] or '0'}E{len(digits) - 1 + exponent}"


def _struct(fields: tuple[Field, ...], data: dict, nested: dict[str, str]) -> str:
    parts = []
    for f in fields:
        if f.tag is not None and f.type == "struct" and not f.array:
            # Kafka's default for a tagged struct is an empty struct: null is written
            value = data.get(f.key)
            if value is None and not f.nullable:
                continue
        elif f.key not in data:
            continue
        else:
            value = data[f.key]
            if f.tag is not None and value == _default(f):
                continue
        parts.append(f'"{f.name[:1].lower()}{f.name[1:]}":{_value(f, value, nested)}')
    return "{" + ",".join(parts) + "}"


def _default(f: Field):
    if f.default is not NO_DEFAULT:
        return f.default
    if f.array:
        return []
    if f.type == "struct":
        return None
    return _ZERO.get(f.type, 0)


def _value(f: Field, value, nested: dict[str, str]) -> str:
    if value is None:
        return "null"
    if f.array:
        single = Field(f.name, f.key, f.type, False, False, None, f.compact, f.fields)
        return "[" + ",".join(_value(single, item, nested) for item in value) + "]"
    if f.type == "struct":
        return _struct(f.fields, value, nested)
    if f.type == "bytes":
        if isinstance(value, dict) and f.key in nested:
            return java_json(nested[f.key], _known(nested[f.key], value["version"]), value)
        if isinstance(value, str):  # a redacted secret, "<redacted N bytes>"
            return string(value)
        return '"' + base64.b64encode(bytes(value)).decode("ascii") + '"'
    if f.type in ("string", "uuid"):
        return string(value)
    if f.type == "bool":
        return "true" if value else "false"
    if f.type == "float64":
        return double(value)
    return str(value)


def _known(name: str, version: int) -> int:
    low, high = structs.versions(name)
    return min(max(version, low), high)
