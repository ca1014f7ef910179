"""The code generator: a body or struct layout (layouts.py) becomes plain Python source, one
function per version with nested structs inlined, precompiled struct.Struct readers for runs of
fixed-size fields and inline bounds checks, compiled (kinspect.generated) in the namespace of
decoder_runtime.RUNTIME.

    decode = compile_decoder(layout, "<kinspect ProduceRequest v9>")
    body, problems = decoder_runtime.run_decoder(decode, buf, 0, "ProduceRequest v9", False)

Storage's record structs use the same entry with a Generator subclass of their own.
"""

from __future__ import annotations

import struct

from kinspect import generated
from kinspect.wire.decoder_runtime import RUNTIME
from kinspect.wire.layouts import FIXED, Field, Layout


_SMALL_ARRAY = 16  # arrays of numbers up to this length get a precompiled reader


def _join(where: str, key: str) -> str:
    return f"{where} → {key}" if where else key


class Generator:
    """Writes the decoder source of one body version; `names` are the constants it uses.

    Nested structs are inlined into their parent's code (a try block per array element
    adds the element to the fault's path), so a body costs one function call; only the
    decoders of known tagged fields are separate functions, looked up by tag. A record set's
    path (its problems') is built where the set is met, by one f-string: ``path_expr`` is that
    f-string's text so far (``{path} → topic_data[{i8}]``), not a string built per element.
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
        body = self.struct_body(fields, "", "o", "    ", "{path}")
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
            self.field(f, body, "o", "    ", where, "{c.prefix}")
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
                f"_records(buf, pos, {n}, f'{path_expr} → {f.key}', c)"))
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
        body += [f"{ind}{e} = {target} = {{}}", f"{ind}try:"]
        body += self.struct_body(f.fields, _join(where, f.key), e, ind + "    ",
                                 f"{path_expr} → {f.key}")
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
            body += [f"{each}{e} = {{}}",
                     f"{each}{items}.append({e})",
                     f"{each}try:"]
            body += self.struct_body(f.fields, _join(where, f.key + "[]"), e, each + "    ",
                                     f"{path_expr} → {f.key}[{{{i}}}]")
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


def generate(lay: Layout, generator: type[Generator] = Generator) -> tuple[str, dict]:
    """The decoder source of one layout and the constants it uses."""
    gen = generator(lay.flexible)
    gen.function(lay.fields)
    for table, functions in gen.tag_tables.items():
        entries = ", ".join(f"{tag}: {fn}" for tag, fn in functions.items())
        gen.lines.append(f"{table} = {{{entries}}}")
    return "\n".join(gen.lines) + "\n", gen.names


def compile_decoder(lay: Layout, filename: str, generator: type[Generator] = Generator,
                    runtime: dict | None = None):
    """The decoder of one layout: decode(buf, pos, end, o, c, path) -> pos, for
    decoder_runtime.run_decoder. ``runtime`` replaces some of RUNTIME's helpers (storage writes
    UUIDs the Kafka way); ``filename`` names the code in tracebacks and profiles."""
    source, names = generate(lay, generator)
    namespace = dict(RUNTIME)
    namespace.update(names)
    if runtime:
        namespace.update(runtime)
    exec(generated.code(source, filename), namespace)
    return namespace["decode"]
