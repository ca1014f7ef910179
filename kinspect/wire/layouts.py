"""The layout of each request and response body version: its fields, read from the generated
table (wire/_schemas.py) and resolved for one version (present fields, nullability, tags,
flexible encoding). The code generator (codegen.py) compiles decoders from it; encode.py walks it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from kinspect.wire._schemas import SCHEMAS

FIXED = {  # type → (struct format, size)
    "bool": ("?", 1), "int8": ("b", 1), "int16": ("h", 2), "uint16": ("H", 2),
    "int32": ("i", 4), "uint32": ("I", 4), "int64": ("q", 8), "float64": ("d", 8),
    "uuid": ("16s", 16),
}
VARIABLE = ("string", "bytes", "records")
NO_DEFAULT = "<no default>"  # Field.default when Kafka's implicit zero value applies


@dataclass(frozen=True, slots=True)
class Field:
    name: str                 # Kafka's name, "ThrottleTimeMs"
    key: str                  # output key, "throttle_time_ms"
    type: str                 # a FIXED or VARIABLE type, or "struct"
    array: bool
    nullable: bool
    tag: int | None           # set when the field is tagged in this version
    compact: bool             # flexible encoding (varint lengths)
    fields: tuple[Field, ...] = ()   # struct members
    default: object = NO_DEFAULT
    entity: str | None = None


@dataclass(frozen=True, slots=True)
class Layout:
    api_key: int
    version: int
    kind: str
    flexible: bool
    fields: tuple[Field, ...]


def snake(name: str) -> str:
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


@lru_cache(maxsize=None)
def _range(spec: str) -> tuple[int, int]:
    if spec == "none":
        return 1, 0
    if spec.endswith("+"):
        return int(spec[:-1]), 1 << 15
    low, _, high = spec.partition("-")
    return int(low), int(high or low)


def _has(spec: str | None, version: int) -> bool:
    if spec is None:
        return False
    low, high = _range(spec)
    return low <= version <= high


# Every (api_key, version, kind) the table defines; caches below only ever hold these, so
# garbage keys and versions from a capture cannot grow them.
DEFINED = frozenset(
    (key, version, kind)
    for key, (_, requests, responses) in SCHEMAS.items()
    for kind, segments in (("request", requests), ("response", responses))
    for first, last, *_ in segments
    for version in range(first, last + 1))


def layout(api_key: int, api_version: int, kind: str) -> Layout | None:
    """The fields of one body version, or None when the table does not define it."""
    if (api_key, api_version, kind) not in DEFINED:
        return None
    return _layout(api_key, api_version, kind)


@lru_cache(maxsize=None)
def _layout(api_key: int, api_version: int, kind: str) -> Layout:
    entry = SCHEMAS[api_key]
    for first, last, flexible_from, fields, commons, _ in entry[1 if kind == "request" else 2]:
        if first <= api_version <= last:
            flexible = flexible_from is not None and api_version >= flexible_from
            resolved = resolve_fields(fields, commons, api_version, flexible)
            return Layout(api_key, api_version, kind, flexible, resolved)
    raise KeyError((api_key, api_version, kind))


def resolve_fields(fields, commons, version: int, flexible: bool) -> tuple[Field, ...]:
    """The fields of one version of a schema in the table's notation (wire/_schemas.py, and
    storage's record schemas): only those present in it, with their encoding settled."""
    out = []
    for f in fields:
        if not _has(f["versions"], version):
            continue
        kind = f["type"]
        array = kind.startswith("[]")
        base = kind[2:] if array else kind
        members: tuple[Field, ...] = ()
        if base not in FIXED and base not in VARIABLE:
            members = resolve_fields(f.get("fields") or commons[base], commons, version, flexible)
            base = "struct"
        tagged = _has(f.get("taggedVersions"), version)
        compact = flexible and ("flexibleVersions" not in f or _has(f["flexibleVersions"], version))
        out.append(Field(f["name"], snake(f["name"]), base, array,
                         _has(f.get("nullableVersions"), version),
                         f["tag"] if tagged else None, compact, members,
                         f.get("default", NO_DEFAULT), f.get("entityType")))
    return tuple(out)
