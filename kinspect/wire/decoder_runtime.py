"""What the generated body and struct decoders run with: the faults they raise, the context
they carry through a body, the helpers their code calls (RUNTIME, the namespace codegen.py
compiles them in), and run_decoder, which runs one and turns a fault into a Problem.

A fault inside a body raises Fault, which collects the field path while it unwinds; run_decoder
returns everything decoded before it.
"""

from __future__ import annotations

import struct

from kinspect.limits import DEFAULT_LIMITS, OPTION, Budget
from kinspect.problems import ERROR, WARNING, Problem
from kinspect.records import decode_records


class Fault(Exception):
    """A body that cannot be decoded past this point; trail grows while it unwinds."""
    check, severity = "body_structure", ERROR

    def __init__(self, what: str, field: str, pos: int):
        super().__init__(what)
        self.what, self.field, self.pos, self.trail = what, field, pos, []


class Cut(Fault):
    """A body whose arrays hold more entries than --max-items lets one body decode."""
    check, severity = "max_items", WARNING


def too_many(n: int, decoded: int, c: "Context", field: str, pos: int):
    raise Cut(f"array of {n} entries passes the {c.limits.max_items} array entries one body may "
               f"decode: its first {decoded} are decoded, the rest of the body is not (raise it "
               f"with {OPTION['max_items']})", field, pos)


class Context:
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


def short_read(need: int, left: int, field: str, pos: int):
    raise Fault(f"truncated: need {need} bytes, {left} left", field, pos)


def too_long(what: str, n: int, left: int, field: str, pos: int):
    raise Fault(f"{what} length {n} exceeds remaining {left}", field, pos)


def bad_length(what: str, n: int, field: str, pos: int):
    raise Fault(f"{what} length {n}", field, pos)


def uvarint(buf, pos: int, end: int, field: str) -> tuple[int, int]:
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
            raise Fault("varint longer than 5 bytes", field, start)
    short_read(pos - start + 1, 0, field, pos)


def uuid_text(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def partial_run(buf, pos: int, end: int, o: dict, run: tuple) -> None:
    """A run of fixed-size fields that does not fit: keep the ones that do, then fault."""
    for key, unpack, size in run:
        if end - pos < size:
            short_read(size, end - pos, key, pos)
        value = unpack(buf, pos)[0]
        o[key] = uuid_text(value) if size == 16 else value
        pos += size


def tagged_fields(buf, pos: int, end: int, o: dict, c: Context, known: dict, where: str) -> int:
    count, pos = uvarint(buf, pos, end, "_tagged_fields")
    for _ in range(count):
        tag, pos = uvarint(buf, pos, end, "_tagged_fields")
        size, pos = uvarint(buf, pos, end, f"_tagged_fields[{tag}]")
        if size > end - pos:
            too_long("tagged field", size, end - pos, f"_tagged_fields[{tag}]", pos)
        decode = known.get(tag)
        if decode is None:
            o.setdefault("_unknown_tags", {})[tag] = bytes(buf[pos:pos + size])
        else:
            used = decode(buf, pos, pos + size, o, c) - pos
            if used != size:
                c.warn(f"tagged field {tag} used {used} of its {size} bytes", where, pos)
        pos += size
    return pos


def record_set(buf, pos: int, n: int, path: str, c: Context):
    if c.raw_records:
        return buf[pos:pos + n]
    try:
        batches, problems = decode_records(memoryview(buf)[pos:pos + n], path=path, base=c.base + pos,
                                   partial_ok=c.partial_ok, checks=c.record_checks,
                                   **({} if c.budget is None else {"max_output": c.budget}))
    except Exception as exc:  # the record decoder must not take the body down with it
        c.problems.append(Problem(f"record decoder failed: {exc!r}", path, c.base + pos))
        return buf[pos:pos + n]
    if problems and not c.partial_ok:
        # Offsets in a Produce request are placeholders the broker replaces: no offset checks there.
        problems = [p for p in problems if p.check not in BROKER_ASSIGNED]
    c.problems.extend(problems)
    return batches


BROKER_ASSIGNED = frozenset({"wrapper_inner_offsets", "offset_order", "offset_gap"})


RUNTIME = {  # the names generated code calls (its source says _short, _Fault...)
    "_Fault": Fault, "_short": short_read, "_too_long": too_long, "_bad_length": bad_length,
    "_uvarint": uvarint, "_uuid": uuid_text, "_partial_run": partial_run, "_tagged": tagged_fields,
    "_too_many": too_many,
    "_records": record_set, "_unpack": struct.unpack_from,
    "_I16": struct.Struct(">h").unpack_from, "_I32": struct.Struct(">i").unpack_from,
}


def run_decoder(decode, buf: bytes, base: int, prefix: str, raw_records: bool,
                partial_ok: bool = True, record_checks: bool = False, start: int = 0,
                budget: Budget | None = None) -> tuple[dict, list[Problem]]:
    """Run a generated decoder over ``buf[start:]``: what it decoded (all of it, or what came
    before a fault) and the problems met, a fault's with its field path."""
    c = Context(prefix, base, raw_records, partial_ok, record_checks, budget)
    body: dict = {}
    end = len(buf)
    try:
        pos = decode(buf, start, end, body, c, prefix)
    except Fault as fault:
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
