"""Decode the structs Kafka writes into its internal topics, with the wire decoder's machinery.

The coordinator records (kinspect/storage/_record_schemas.py, generated from Kafka's JSON
definitions), the share-group state records (share_schemas.py) and the KRaft metadata
records (metadata_schemas.py) are described in the same
notation as the protocol bodies, so the wire's code generator (kinspect/wire/codegen.py)
compiles them into the same generated decoders: one exec'd function per (struct, version), bounds-checked, never raising.

UUIDs are written as Kafka prints them (URL-safe base64, no padding), as in partition.metadata,
meta.properties and kafka-dump-log, not as the dashed hex of the wire decoder.
"""

from __future__ import annotations

import base64
from dataclasses import replace
from functools import lru_cache

from kinspect.problems import ERROR, Problem
from kinspect.storage._record_schemas import GROUP_RECORD_TYPES, STRUCTS, TRANSACTION_RECORD_TYPES
from kinspect.storage.metadata_schemas import METADATA_RECORDS
from kinspect.storage.share_schemas import SHARE_RECORD_TYPES, SHARE_STRUCTS
from kinspect.wire.codegen import Generator, compile_decoder
from kinspect.wire.decoder_runtime import run_decoder, short_read
from kinspect.wire.layouts import Layout, resolve_fields

SEGMENTS: dict[str, tuple] = {
    **STRUCTS,
    **SHARE_STRUCTS,
    **{name: ((0, last, 0, fields, {}, "4.1"),)
       for name, last, fields in METADATA_RECORDS.values()},
}
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
_RECORD_TYPES = {"TransactionLog": TRANSACTION_RECORD_TYPES, "ShareSnapshot": SHARE_RECORD_TYPES,
                 "ShareUpdate": SHARE_RECORD_TYPES}  # by record name; __consumer_offsets' else


def kafka_uuid(raw: bytes) -> str:
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode("ascii")


def _partial_run(buf, pos: int, end: int, o: dict, run: tuple) -> None:
    """The generated decoders' run of fixed-size fields, writing UUIDs the Kafka way."""
    for key, unpack, size in run:
        if end - pos < size:
            short_read(size, end - pos, key, pos)
        value = unpack(buf, pos)[0]
        o[key] = kafka_uuid(value) if size == 16 else value
        pos += size


def record_structs(record_name: str | None, record_type: int | None) -> tuple[str, int, str] | None:
    """A coordinator record's (key struct, key version, value struct), from its decoded name
    (a transaction or share-group state record, else a __consumer_offsets one) and type."""
    return _RECORD_TYPES.get(record_name, GROUP_RECORD_TYPES).get(record_type)


def _segment(name: str, version: int):
    for segment in SEGMENTS.get(name, ()):
        if segment[0] <= version <= segment[1]:
            return segment
    return None


def has_version(name: str, version: int) -> bool:
    return _segment(name, version) is not None


def versions(name: str) -> tuple[int, int] | None:
    """The lowest and highest version kinspect knows for a struct."""
    segments = SEGMENTS.get(name)
    if not segments:
        return None
    return min(s[0] for s in segments), max(s[1] for s in segments)


@lru_cache(maxsize=None)
def layout(name: str, version: int) -> Layout:
    """The resolved fields of one struct version (which must exist: see has_version)."""
    first, last, flexible_from, fields, commons, _ = _segment(name, version)
    flexible = flexible_from is not None and version >= flexible_from
    resolved = resolve_fields(fields, commons, version, flexible)
    return Layout(-1, version, name, flexible, resolved)


class _StructGenerator(Generator):
    """The wire generator, plus tagged nullable structs (not in the protocol, but in
    coordinator records): their presence marker is an unsigned varint, 0 null and 1 present,
    where a plain nullable struct's is an int8, -1 null."""

    def struct_field(self, f, body, obj, ind, where, path_expr):
        if f.nullable and f.tag is not None:
            body += [f"{ind}if pos >= end: _short(1, 0, {f.key!r}, pos)",
                     f"{ind}pos += 1",
                     f"{ind}if buf[pos - 1] == 0:",
                     f"{ind}    {obj}[{f.key!r}] = None",
                     f"{ind}else:"]
            f, ind = replace(f, nullable=False), ind + "    "
        super().struct_field(f, body, obj, ind, where, path_expr)


@lru_cache(maxsize=None)
def _decoder(name: str, version: int):
    return compile_decoder(layout(name, version), f"<kinspect {name} v{version}>", _StructGenerator,
                           {"_uuid": kafka_uuid, "_partial_run": _partial_run})


def decode_struct(name: str, version: int, buf: bytes | memoryview, base: int = 0,
                  path: str | None = None) -> tuple[dict, list[Problem]]:
    """Decode buf as one struct version; what decoded before a fault, plus the problems."""
    prefix = path if path is not None else f"{name} v{version}"
    if not has_version(name, version):
        known = versions(name)
        return {}, [Problem(f"{name} version {version} is unknown (kinspect knows "
                            f"{'none' if known is None else '%d..%d' % known})", prefix, base,
                            ERROR, "record_version", known, version)]
    if not isinstance(buf, bytes):
        buf = bytes(buf)
    return run_decoder(_decoder(name, version), buf, base, prefix, True)
