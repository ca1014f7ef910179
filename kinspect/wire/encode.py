"""Encode request and response bodies: the inverse of messages.decode_body.

Not a hot path: a plain walk over the same per-version layout the decoder compiles from.
Values take the decoder's shapes (snake_case keys, uuid as canonical str, strings as str or
bytes, record sets as bytes); a missing field takes its Kafka default. decode → encode of a
real body reproduces its bytes, unknown tagged fields included.
"""

from __future__ import annotations

import struct

from kinspect.wire.apis import request_header_version
from kinspect.wire.layouts import FIXED, NO_DEFAULT, Field, layout

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class EncodeError(ValueError):
    """The body cannot be encoded: unknown API version, or a value of the wrong shape."""


def encode_body(api_key: int, api_version: int, kind: str, body: dict) -> bytes:
    lay = layout(api_key, api_version, kind)
    if lay is None:
        raise EncodeError(f"unknown API key {api_key} / version {api_version} ({kind})")
    out = bytearray()
    _struct(out, lay.fields, body, lay.flexible, "")
    return bytes(out)


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   body: dict) -> bytes:
    """A whole request frame: int32 size, header of the right version, body."""
    header_version = request_header_version(api_key, api_version)
    out = bytearray(struct.pack(">hhi", api_key, api_version, correlation_id))
    if header_version >= 1:
        _string16(out, client_id)  # ClientId keeps its int16 length even in header v2
    if header_version >= 2:
        out.append(0)  # no tagged fields
    out += encode_body(api_key, api_version, "request", body)
    return _I32.pack(len(out)) + bytes(out)


def _struct(out: bytearray, fields: tuple[Field, ...], values: dict, flexible: bool,
            where: str) -> None:
    if not isinstance(values, dict):
        raise EncodeError(f"{where or 'body'}: expected a dict, got {type(values).__name__}")
    for f in fields:
        if f.tag is None:
            value = values[f.key] if f.key in values else _default(f)
            _value(out, f, value, f"{where}.{f.key}" if where else f.key)
    if flexible:
        tags: dict[int, bytes] = {}
        for f in fields:
            if f.tag is not None and f.key in values:
                encoded = bytearray()
                _value(encoded, f, values[f.key], f"{where}.{f.key}" if where else f.key)
                tags[f.tag] = bytes(encoded)
        for tag, raw in (values.get("_unknown_tags") or {}).items():
            tags.setdefault(int(tag), bytes(raw))
        _uvarint(out, len(tags))
        for tag in sorted(tags):
            _uvarint(out, tag)
            _uvarint(out, len(tags[tag]))
            out += tags[tag]


def _value(out: bytearray, f: Field, value, where: str) -> None:
    if f.array:
        if value is None:
            _length(out, f.compact, -1, wide=True)
            return
        if not isinstance(value, (list, tuple)):
            raise EncodeError(f"{where}: expected a list, got {type(value).__name__}")
        _length(out, f.compact, len(value), wide=True)
        for i, item in enumerate(value):
            _single(out, f, item, f"{where}[{i}]")
        return
    _single(out, f, value, where)


def _single(out: bytearray, f: Field, value, where: str) -> None:
    try:
        if f.type in FIXED:
            if f.type == "uuid":
                out += _uuid_bytes(value)
            else:
                out += struct.pack(">" + FIXED[f.type][0], value)
        elif f.type == "struct":
            if f.nullable and not f.array:
                if value is None:
                    out += _I8.pack(-1)
                    return
                out += _I8.pack(1)
            _struct(out, f.fields, value, f.compact, where)
        else:
            raw = value.encode() if isinstance(value, str) else value
            if raw is None:
                _length(out, f.compact, -1, wide=f.type != "string")
                return
            if not isinstance(raw, (bytes, bytearray, memoryview)):
                raise EncodeError(f"{where}: {f.type} needs str or bytes, got {type(raw).__name__}")
            _length(out, f.compact, len(raw), wide=f.type != "string")
            out += raw
    except struct.error as exc:
        raise EncodeError(f"{where}: {exc}") from None


def _default(f: Field):
    if f.default is not NO_DEFAULT:
        return f.default
    if f.array:
        return []
    if f.type == "struct":
        return {}
    if f.type == "uuid":
        return "00000000-0000-0000-0000-000000000000"
    if f.type in FIXED:
        return False if f.type == "bool" else 0
    return "" if f.type == "string" else b""


def _length(out: bytearray, compact: bool, n: int, wide: bool) -> None:
    if compact:
        _uvarint(out, n + 1)
    else:
        out += (_I32 if wide else _I16).pack(n)


def _string16(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
    else:
        raw = value.encode()
        out += _I16.pack(len(raw)) + raw


def _uvarint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _uuid_bytes(value) -> bytes:
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return bytes(value)
    try:
        raw = bytes.fromhex(str(value).replace("-", ""))
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise EncodeError(f"not a uuid: {value!r}")
    return raw
