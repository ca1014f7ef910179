"""Request and response bodies of every Kafka API version, decoded from the generated table.

Each (api_key, api_version, kind) is compiled once, on first use, into plain Python source
(one function per body with nested structs inlined, precompiled struct.Struct readers for
runs of fixed-size fields, inline bounds checks) and exec'd; `decoder_source()` shows it.
A fault inside a body raises the internal _Fault, which collects the field path while it
unwinds; decode_body turns it into a Problem and returns everything decoded before it.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import lru_cache

from kinspect import generated
from kinspect.limits import DEFAULT_LIMITS, OPTION, Budget
from kinspect.problems import ERROR, INFO, WARNING, Problem
from kinspect.wire.apis import API_VERSIONS_KEY, api_name
from kinspect.wire._schemas import SCHEMAS

UNSUPPORTED_VERSION = 35
FIXED = {  # type → (struct format, size)
    "bool": ("?", 1), "int8": ("b", 1), "int16": ("h", 2), "uint16": ("H", 2),
    "int32": ("i", 4), "uint32": ("I", 4), "int64": ("q", 8), "float64": ("d", 8),
    "uuid": ("16s", 16),
}
VARIABLE = ("string", "bytes", "records")
NO_DEFAULT = "<no default>"  # Field.default when Kafka's implicit zero value applies


# ---------------------------------------------------------------- schema for one version

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
            resolved = _resolve(fields, commons, api_version, flexible)
            return Layout(api_key, api_version, kind, flexible, resolved)
    raise KeyError((api_key, api_version, kind))


def _resolve(fields, commons, version: int, flexible: bool) -> tuple[Field, ...]:
    out = []
    for f in fields:
        if not _has(f["versions"], version):
            continue
        kind = f["type"]
        array = kind.startswith("[]")
        base = kind[2:] if array else kind
        members: tuple[Field, ...] = ()
        if base not in FIXED and base not in VARIABLE:
            members = _resolve(f.get("fields") or commons[base], commons, version, flexible)
            base = "struct"
        tagged = _has(f.get("taggedVersions"), version)
        compact = flexible and ("flexibleVersions" not in f or _has(f["flexibleVersions"], version))
        out.append(Field(f["name"], snake(f["name"]), base, array,
                         _has(f.get("nullableVersions"), version),
                         f["tag"] if tagged else None, compact, members,
                         f.get("default", NO_DEFAULT), f.get("entityType")))
    return tuple(out)


# ---------------------------------------------------------------- runtime helpers

class _Fault(Exception):
    """A body that cannot be decoded past this point; trail grows while it unwinds."""
    check, severity = "body_structure", ERROR

    def __init__(self, what: str, field: str, pos: int):
        super().__init__(what)
        self.what, self.field, self.pos, self.trail = what, field, pos, []


class _Cut(_Fault):
    """A body whose arrays hold more entries than --max-items lets one body decode."""
    check, severity = "max_items", WARNING


def _too_many(n: int, decoded: int, c: "_Context", field: str, pos: int):
    raise _Cut(f"array of {n} entries passes the {c.limits.max_items} array entries one body may "
               f"decode: its first {decoded} are decoded, the rest of the body is not (raise it "
               f"with {OPTION['max_items']})", field, pos)


class _Context:
    __slots__ = ("problems", "prefix", "base", "raw_records", "partial_ok", "record_checks",
                 "budget", "limits", "items")

    def __init__(self, prefix: str, base: int, raw_records: bool, partial_ok: bool = True,
                 record_checks: bool = False, budget: Budget | None = None):
        self.budget = budget
        self.limits = budget.limits if budget is not None else DEFAULT_LIMITS
        self.items = self.limits.max_items  # array entries this body may still decode
        self.problems: list[Problem] = []
        self.prefix, self.base, self.raw_records = prefix, base, raw_records
        # A broker may cut a fetched record set short; a producer never sends half a batch.
        self.partial_ok = partial_ok
        self.record_checks = record_checks

    def warn(self, what: str, where: str, pos: int) -> None:
        path = f"{self.prefix} → {where}" if where else self.prefix
        self.problems.append(Problem(what, path, self.base + pos, WARNING))


def _short(need: int, left: int, field: str, pos: int):
    raise _Fault(f"truncated: need {need} bytes, {left} left", field, pos)


def _too_long(what: str, n: int, left: int, field: str, pos: int):
    raise _Fault(f"{what} length {n} exceeds remaining {left}", field, pos)


def _bad_length(what: str, n: int, field: str, pos: int):
    raise _Fault(f"{what} length {n}", field, pos)


def _uvarint(buf, pos: int, end: int, field: str) -> tuple[int, int]:
    value = shift = 0
    start = pos
    while pos < end:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise _Fault("varint longer than 5 bytes", field, start)
    _short(pos - start + 1, 0, field, pos)


def _uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _partial_run(buf, pos: int, end: int, o: dict, run: tuple) -> None:
    """A run of fixed-size fields that does not fit: keep the ones that do, then fault."""
    for key, unpack, size in run:
        if end - pos < size:
            _short(size, end - pos, key, pos)
        value = unpack(buf, pos)[0]
        o[key] = _uuid(value) if size == 16 else value
        pos += size


def _tagged(buf, pos: int, end: int, o: dict, c: _Context, known: dict, where: str) -> int:
    count, pos = _uvarint(buf, pos, end, "_tagged_fields")
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, end, "_tagged_fields")
        size, pos = _uvarint(buf, pos, end, f"_tagged_fields[{tag}]")
        if size > end - pos:
            _too_long("tagged field", size, end - pos, f"_tagged_fields[{tag}]", pos)
        decode = known.get(tag)
        if decode is None:
            o.setdefault("_unknown_tags", {})[tag] = bytes(buf[pos:pos + size])
        else:
            used = decode(buf, pos, pos + size, o, c) - pos
            if used != size:
                c.warn(f"tagged field {tag} used {used} of its {size} bytes", where, pos)
        pos += size
    return pos


def _records(buf, pos: int, n: int, path: str, c: _Context):
    decode = None if c.raw_records else _records_decoder()
    if decode is None:
        return buf[pos:pos + n]
    try:
        batches, problems = decode(memoryview(buf)[pos:pos + n], path=path, base=c.base + pos,
                                   partial_ok=c.partial_ok, checks=c.record_checks,
                                   **({} if c.budget is None else {"max_output": c.budget}))
    except Exception as exc:  # the record decoder must not take the body down with it
        c.problems.append(Problem(f"record decoder failed: {exc!r}", path, c.base + pos))
        return buf[pos:pos + n]
    if problems and not c.partial_ok:
        # Offsets in a Produce request are placeholders the broker replaces: no offset checks there.
        problems = [p for p in problems if p.check not in _BROKER_ASSIGNED]
    c.problems.extend(problems)
    return batches


_BROKER_ASSIGNED = frozenset({"wrapper_inner_offsets", "offset_order", "offset_gap"})


@lru_cache(maxsize=1)
def _records_decoder():
    for module in ("kinspect.records", "kinspect.records.recordset"):
        try:
            return getattr(__import__(module, fromlist=["decode_records"]), "decode_records")
        except (ImportError, AttributeError):
            continue
    return None


_RUNTIME = {
    "_Fault": _Fault, "_short": _short, "_too_long": _too_long, "_bad_length": _bad_length,
    "_uvarint": _uvarint, "_uuid": _uuid, "_partial_run": _partial_run, "_tagged": _tagged,
    "_too_many": _too_many,
    "_records": _records, "_unpack": struct.unpack_from,
    "_I16": struct.Struct(">h").unpack_from, "_I32": struct.Struct(">i").unpack_from,
}


# ---------------------------------------------------------------- code generation

def _carries_records(fields: tuple[Field, ...]) -> bool:
    return any(f.type == "records" or _carries_records(f.fields) for f in fields)


_SMALL_ARRAY = 16  # arrays of numbers up to this length get a precompiled reader


def _join(where: str, key: str) -> str:
    return f"{where} → {key}" if where else key


class _Generator:
    """Writes the decoder source of one body version; `names` are the constants it uses.

    Nested structs are inlined into their parent's code (a try block per array element
    adds the element to the fault's path), so a body costs one function call; only the
    decoders of known tagged fields are separate functions, looked up by tag.
    """

    def __init__(self, flexible: bool):
        self.flexible = flexible
        self.lines: list[str] = []
        self.names: dict[str, object] = {}
        self.tag_tables: dict[str, dict[int, str]] = {}
        self.counter = 0

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def const(self, stem: str, value) -> str:
        name = self.fresh(stem)
        self.names[name] = value
        return name

    def function(self, fields: tuple[Field, ...]) -> str:
        """The whole body: decode(buf, pos, end, o, c, path) -> pos."""
        body = self.struct_body(fields, "", "o", "    ", "path")
        self.lines += ["def decode(buf, pos, end, o, c, path):", *body, "    return pos", ""]
        return "decode"

    def struct_body(self, fields: tuple[Field, ...], where: str, obj: str, ind: str,
                    path_expr: str) -> list[str]:
        """Code decoding the fields of one struct into the dict named obj."""
        body: list[str] = []
        regular = [f for f in fields if f.tag is None]
        i = 0
        while i < len(regular):
            j = i
            while j < len(regular) and regular[j].type in FIXED and not regular[j].array:
                j += 1
            if j > i:
                self.fixed_run(regular[i:j], body, obj, ind)
                i = j
            else:
                self.field(regular[i], body, obj, ind, where, path_expr)
                i += 1
        if self.flexible:
            table = self.fresh("TAGS")
            self.tag_tables[table] = {f.tag: self.tag_function(f, where)
                                      for f in fields if f.tag is not None}
            body += [f"{ind}if pos >= end: _short(1, 0, '_tagged_fields', pos)",
                     f"{ind}if buf[pos]:",
                     f"{ind}    pos = _tagged(buf, pos, end, {obj}, c, {table}, {where!r})",
                     f"{ind}else:",
                     f"{ind}    pos += 1"]
        return body

    def tag_function(self, f: Field, where: str) -> str:
        name = self.fresh("tag")
        body: list[str] = []
        if f.type in FIXED and not f.array:
            self.fixed_run([f], body, "o", "    ")
        else:
            self.field(f, body, "o", "    ", where, "c.prefix")
        self.lines += [f"def {name}(buf, pos, end, o, c):  # {_join(where, f.key)} (tag {f.tag})",
                       *body, "    return pos", ""]
        return name

    def fixed_run(self, run: list[Field], body: list[str], obj: str, ind: str) -> None:
        """Consecutive fixed-size fields: one bounds check, one unpack."""
        fmt = ">" + "".join(FIXED[f.type][0] for f in run)
        size = struct.calcsize(fmt)
        reader = self.const("R", struct.Struct(fmt).unpack_from)
        pieces = self.const("RUN", tuple(
            (f.key, struct.Struct(">" + FIXED[f.type][0]).unpack_from, FIXED[f.type][1])
            for f in run))
        targets = ", ".join(f"{obj}[{f.key!r}]" for f in run) + ("," if len(run) == 1 else "")
        body += [f"{ind}if end - pos < {size}: _partial_run(buf, pos, end, {obj}, {pieces})",
                 f"{ind}{targets} = {reader}(buf, pos)",
                 f"{ind}pos += {size}"]
        body += [f"{ind}{obj}[{f.key!r}] = _uuid({obj}[{f.key!r}])" for f in run if f.type == "uuid"]

    def length(self, f: Field, var: str, body: list[str], ind: str, wide: bool) -> None:
        """Read a length prefix into var; -1 means null."""
        if f.compact:
            body += [f"{ind}if pos >= end: _short(1, 0, {f.key!r}, pos)",
                     f"{ind}{var} = buf[pos]",
                     f"{ind}pos += 1",
                     f"{ind}if {var} > 127: {var}, pos = _uvarint(buf, pos - 1, end, {f.key!r})",
                     f"{ind}{var} -= 1"]
        else:
            size, reader = (4, "_I32") if wide else (2, "_I16")
            body += [f"{ind}if end - pos < {size}: _short({size}, end - pos, {f.key!r}, pos)",
                     f"{ind}{var} = {reader}(buf, pos)[0]",
                     f"{ind}pos += {size}"]

    def null_or(self, f: Field, var: str, store: str, what: str, body: list[str], ind: str,
                where: str) -> None:
        """Emit: if var is null, store None (warn when not nullable); else: (caller goes on)."""
        body += [f"{ind}if {var} < 0:",
                 f"{ind}    if {var} != -1: _bad_length({what!r}, {var}, {f.key!r}, pos)",
                 f"{ind}    {store.format('None')}"]
        if not f.nullable:
            body.append(f"{ind}    c.warn('null in a non-nullable field', "
                        f"{_join(where, f.key)!r}, pos)")
        body.append(f"{ind}else:")

    def field(self, f: Field, body: list[str], obj: str, ind: str, where: str,
              path_expr: str) -> None:
        if f.array:
            self.array(f, body, obj, ind, where, path_expr)
        elif f.type == "struct":
            self.struct_field(f, body, obj, ind, where, path_expr)
        else:
            self.variable(f, f"{obj}[{f.key!r}] = {{}}", body, ind, where, path_expr)

    def variable(self, f: Field, store: str, body: list[str], ind: str, where: str,
                 path_expr: str) -> None:
        """string, bytes or records; store is a statement template for the value."""
        n = self.fresh("n")
        self.length(f, n, body, ind, wide=f.type != "string")
        self.null_or(f, n, store, f.type, body, ind, where)
        inner = ind + "    "
        body.append(f"{inner}if {n} > end - pos: "
                    f"_too_long({f.type!r}, {n}, end - pos, {f.key!r}, pos)")
        if f.type == "records":
            body.append(inner + store.format(
                f"_records(buf, pos, {n}, {path_expr} + ' → {f.key}', c)"))
        elif f.type == "bytes":
            body.append(inner + store.format(f"buf[pos:pos + {n}]"))
        else:
            v = self.fresh("v")
            body += [f"{inner}{v} = buf[pos:pos + {n}]",
                     f"{inner}try:",
                     f"{inner}    {v} = {v}.decode()",
                     f"{inner}except UnicodeDecodeError:",
                     f"{inner}    pass",
                     inner + store.format(v)]
        body.append(f"{inner}pos += {n}")

    def struct_field(self, f: Field, body: list[str], obj: str, ind: str, where: str,
                     path_expr: str) -> None:
        target = f"{obj}[{f.key!r}]"
        if f.nullable:  # an int8 marker: -1 null, 1 present
            body += [f"{ind}if pos >= end: _short(1, 0, {f.key!r}, pos)",
                     f"{ind}pos += 1",
                     f"{ind}if buf[pos - 1] > 127:",
                     f"{ind}    {target} = None",
                     f"{ind}else:"]
            ind += "    "
        e = self.fresh("e")
        inner_path = path_expr
        if _carries_records(f.fields):
            inner_path = self.fresh("p")
            body.append(f"{ind}{inner_path} = {path_expr} + ' → {f.key}'")
        body += [f"{ind}{e} = {target} = {{}}", f"{ind}try:"]
        body += self.struct_body(f.fields, _join(where, f.key), e, ind + "    ", inner_path)
        body += [f"{ind}except _Fault as fault:",
                 f"{ind}    fault.trail.append({f.key!r})",
                 f"{ind}    raise"]

    @staticmethod
    def all_fixed(fields: tuple[Field, ...]) -> bool:
        return all(f.type in FIXED and not f.array for f in fields if f.tag is None) and \
            any(f.tag is None for f in fields)

    def fixed_rows(self, f: Field, n: str, items: str, target: str, body: list[str],
                   ind: str) -> None:
        """Fast path for arrays of fixed-size structs: one iter_unpack, dicts built in a
        comprehension. Flexible elements end in a tagged-field count; a row whose count is
        not 0 sends the whole array down the general path (items stays None)."""
        regular = [m for m in f.fields if m.tag is None]
        fmt = ">" + "".join(FIXED[m.type][0] for m in regular) + ("B" if self.flexible else "")
        size = struct.calcsize(fmt)
        rows = self.const("ROWS", struct.Struct(fmt).iter_unpack)
        names = [self.fresh("x") for _ in regular]
        values = [f"_uuid({x})" if m.type == "uuid" else x for m, x in zip(regular, names)]
        literal = "{" + ", ".join(f"{m.key!r}: {v}" for m, v in zip(regular, values)) + "}"
        targets = names + (["t"] if self.flexible else [])
        unpacked = ", ".join(targets) + ("," if len(targets) == 1 else "")
        keep = " if not t" if self.flexible else ""
        body += [f"{ind}{items} = None",
                 f"{ind}if {n} * {size} <= end - pos:",
                 f"{ind}    {items} = [{literal} for {unpacked} in "
                 f"{rows}(buf[pos:pos + {n} * {size}]){keep}]",
                 f"{ind}    if len({items}) == {n}:",
                 f"{ind}        {target} = {items}",
                 f"{ind}        pos += {n} * {size}",
                 f"{ind}    else:",
                 f"{ind}        {items} = None"]

    def array(self, f: Field, body: list[str], obj: str, ind: str, where: str,
              path_expr: str) -> None:
        n, whole = self.fresh("n"), self.fresh("w")
        target = f"{obj}[{f.key!r}]"
        self.length(f, n, body, ind, wide=True)
        self.null_or(f, n, f"{target} = {{}}", "array", body, ind, where)
        inner = ind + "    "
        # Fixed-size elements must all fit; for others, a count above the bytes left is
        # certainly corrupt, while a plausible one decodes element by element up to the fault.
        smallest = FIXED[f.type][1] if f.type in FIXED else 1
        check = f"{n} * {smallest}" if smallest > 1 else n
        # Past the body's --max-items, the entries that fit are decoded, then the body stops.
        body += [f"{inner}if {check} > end - pos: "
                 f"_too_long('array', {n}, end - pos, {f.key!r}, pos)",
                 f"{inner}{whole} = {n}",
                 f"{inner}if {n} > c.items: {n} = max(c.items, 0)",
                 f"{inner}c.items -= {n}"]
        self.entries(f, n, target, body, inner, where, path_expr)
        body.append(f"{inner}if {whole} != {n}: _too_many({whole}, {n}, c, {f.key!r}, pos)")

    def entries(self, f: Field, n: str, target: str, body: list[str], inner: str, where: str,
                path_expr: str) -> None:
        """The code decoding the n entries of array f into target."""
        items, i = self.fresh("a"), self.fresh("i")
        if f.type in FIXED and f.type != "uuid":
            code, size = FIXED[f.type]
            readers = self.const("A", tuple(struct.Struct(f">{k}{code}").unpack_from
                                            for k in range(_SMALL_ARRAY)))
            body += [f"{inner}{target} = list({readers}[{n}](buf, pos) if {n} < {_SMALL_ARRAY} "
                     f"else _unpack(f'>{{{n}}}{code}', buf, pos))",
                     f"{inner}pos += {n} * {size}" if size > 1 else f"{inner}pos += {n}"]
            return
        if f.type == "struct" and self.all_fixed(f.fields):
            self.fixed_rows(f, n, items, target, body, inner)
            body.append(f"{inner}if {items} is None:")
            inner += "    "
        body += [f"{inner}{items} = {target} = []",
                 f"{inner}for {i} in range({n}):"]
        each = inner + "    "
        if f.type == "struct":
            e = self.fresh("e")
            inner_path = path_expr
            if _carries_records(f.fields):
                inner_path = self.fresh("p")
                body.append(f"{each}{inner_path} = f'{{{path_expr}}} → {f.key}[{{{i}}}]'")
            body += [f"{each}{e} = {{}}",
                     f"{each}{items}.append({e})",
                     f"{each}try:"]
            body += self.struct_body(f.fields, _join(where, f.key + "[]"), e, each + "    ",
                                     inner_path)
            body += [f"{each}except _Fault as fault:",
                     f"{each}    fault.trail.append(f'{f.key}[{{{i}}}]')",
                     f"{each}    raise"]
        elif f.type == "uuid":
            body += [f"{each}if end - pos < 16: _short(16, end - pos, {f.key!r}, pos)",
                     f"{each}{items}.append(_uuid(buf[pos:pos + 16]))",
                     f"{each}pos += 16"]
        else:  # strings or bytes, one at a time
            single = Field(f.name, f.key, f.type, False, f.nullable, None, f.compact)
            self.variable(single, f"{items}.append({{}})", body, each, where, path_expr)


@lru_cache(maxsize=None)
def _compiled(api_key: int, api_version: int, kind: str):
    """The decoder of a DEFINED body version."""
    lay = _layout(api_key, api_version, kind)
    source, names = _generate(lay)
    namespace = dict(_RUNTIME)
    namespace.update(names)
    exec(generated.code(source, f"<kinspect {api_name(api_key)}{kind.title()} v{api_version}>"), namespace)
    return namespace["decode"]


def _generate(lay: Layout) -> tuple[str, dict]:
    gen = _Generator(lay.flexible)
    gen.function(lay.fields)
    for table, functions in gen.tag_tables.items():
        entries = ", ".join(f"{tag}: {fn}" for tag, fn in functions.items())
        gen.lines.append(f"{table} = {{{entries}}}")
    return "\n".join(gen.lines) + "\n", gen.names


def decoder_source(api_key: int, api_version: int, kind: str) -> str | None:
    """The generated decoder of one body version, for reading and debugging."""
    lay = layout(api_key, api_version, kind)
    return None if lay is None else _generate(lay)[0]


# ---------------------------------------------------------------- entry point

_DECODERS: dict[tuple[int, int, str], tuple] = {}  # (key, version, kind) → (decoder, path prefix)


def decode_body(api_key: int, api_version: int, kind: str, buf: bytes | memoryview, base: int = 0,
                path: str | None = None, *, raw_records: bool = False, record_checks: bool = True,
                start: int = 0, budget: Budget | None = None) -> tuple[dict, list[Problem]]:
    """Decode one request or response body: ``buf[start:]`` (the bytes after the header; a
    frame and its header length need no copy), ``base`` the absolute position of ``buf[0]``.

    Returns the decoded fields (snake_case keys) and the problems met; a malformed body
    yields what was decoded before the fault plus an error Problem with the field path
    and the frame-absolute offset. raw_records keeps record sets as bytes. ``budget`` bounds
    the array entries, records held and decompression (kinspect.limits; defaults otherwise).
    """
    entry = _DECODERS.get((api_key, api_version, kind))
    if entry is None and (api_key, api_version, kind) in DEFINED:
        entry = _DECODERS[(api_key, api_version, kind)] = (
            _compiled(api_key, api_version, kind),
            f"{api_name(api_key)}{kind.title()} v{api_version}")
    if entry is None:
        prefix = path if path is not None else f"{api_name(api_key)}{kind.title()} v{api_version}"
        return {}, [Problem(f"unknown API key {api_key} / version {api_version} ({kind})",
                            prefix, base, ERROR, "known_api", None, (api_key, api_version))]
    compiled, default_prefix = entry
    prefix = default_prefix if path is None else path
    if not isinstance(buf, bytes):
        buf = bytes(buf)
    body, problems = _run(compiled, buf, base, prefix, raw_records, kind == "response", record_checks,
                          start, budget)
    if (api_key == API_VERSIONS_KEY and kind == "response" and api_version > 0 and problems
            and len(buf) - start >= 2 and _RUNTIME["_I16"](buf, start)[0] == UNSUPPORTED_VERSION):
        # a broker lacking the requested version answers with a v0 body
        v0_body, v0_problems = _run(_compiled(api_key, 0, kind), buf, base, prefix, raw_records,
                                    start=start, budget=budget)
        if not v0_problems:
            return v0_body, [Problem(
                f"broker answered ApiVersions v{api_version} with a v0 body (UNSUPPORTED_VERSION)",
                prefix, base + start, INFO, "api_versions_fallback", api_version, 0)]
    return body, problems


def _run(decode, buf: bytes, base: int, prefix: str, raw_records: bool, partial_ok: bool = True,
         record_checks: bool = False, start: int = 0, budget: Budget | None = None):
    c = _Context(prefix, base, raw_records, partial_ok, record_checks, budget)
    body: dict = {}
    end = len(buf)
    try:
        pos = decode(buf, start, end, body, c, prefix)
    except _Fault as fault:
        where = " → ".join([prefix, *reversed(fault.trail), fault.field])
        c.problems.append(Problem(fault.what, where, base + fault.pos, fault.severity, fault.check))
        return body, c.problems
    except Exception as exc:  # a decoder bug must cost one body, not the whole capture
        c.problems.append(Problem(f"decoder error: {exc!r}", prefix, base + start, ERROR, "decoder_error"))
        return body, c.problems
    if pos != end:
        c.problems.append(Problem(f"{end - pos} trailing bytes after the body", prefix, base + pos,
                                  WARNING, "trailing_bytes", 0, end - pos))
    return body, c.problems
