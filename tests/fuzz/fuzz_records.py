"""Fuzz record sets (kinspect/records/recordset.py, batch.py): v2 batches, legacy messages and
their mix, with the record checks on and off, the streamed records of a big batch read back.

Input: one byte of options (bit 0: a cut-off last batch is normal, as in a Fetch; bit 1: the
record checks; bit 2: small bounds, so big batches are streamed; bit 3: a memoryview, as an
mmap'ed segment is read), then the record set. Checks: no exception; decode_records gives what
iter_batches gives; the C record loop (kinspect/native/_v2records.c) gives what the Python loop
gives, records and problems; the C bytes → JSON text (_bytes_json.c) gives what Python does,
on every key, value and header value; the units are written as a JSON line, the same line and
problems when regular batches are packed (records/packed.py: C's scan and to_json).
"""

import harness

with harness.instrumented("kinspect.records", "kinspect.limits"):
    from kinspect import native
    from kinspect.limits import Budget, Limits
    from kinspect.records import batch, decode_records, iter_batches
    from kinspect.records.stream import BatchStream, RecordStream

from kinspect.render import jsonl  # noqa: E402

NATIVE = batch._fast if native.v2records is not None else None
TEXT_OR = native.bytes_json.text_or if native.bytes_json is not None else None
SMALL = harness.small_limits()


def plain(units) -> list:
    """Units with their streamed batches and records read back, to compare."""
    if isinstance(units, BatchStream):
        streamed = len(units)
        units = list(units)
        if streamed != len(units):
            raise harness.Finding(f"a stream of {streamed} batches reads back {len(units)}")
    out = []
    for unit in units:
        records = unit["records"]
        if isinstance(records, RecordStream):
            unit = dict(unit, records=list(records), streamed=len(records))
            if unit["streamed"] != len(unit["records"]):
                raise harness.Finding(f"a stream of {unit['streamed']} records reads back "
                                      f"{len(unit['records'])}")
        out.append(unit)
    return out


def decode(buf, options: int, fast=NATIVE, pack: bool = False) -> tuple:
    saved, batch._fast = batch._fast, fast
    try:
        bound = Budget(SMALL if options & 4 else Limits(), len(buf), pack_records=pack)
        units, problems = decode_records(buf, "records", 0, partial_ok=bool(options & 1),
                                         checks=bool(options & 2), max_output=bound)
        return plain(units), [p.to_dict() for p in problems]
    finally:
        batch._fast = saved


def target(data: bytes) -> None:
    options, records = (data[0], data[1:]) if data else (0, b"")
    buf = memoryview(bytearray(records)) if options & 8 else records
    units, problems = decode(buf, options)
    harness.check_problems(problems)
    walked = [unit for unit, _ in iter_batches(buf, "records", 0, partial_ok=bool(options & 1),
                                               checks=bool(options & 2)) if unit is not None]
    if len(walked) != len(units):
        raise harness.Finding(f"iter_batches gives {len(walked)} units, decode_records {len(units)}")
    if NATIVE is not None:
        harness.agree("v2 records", (units, problems), decode(buf, options, None))
    line = jsonl.dumpb({"units": units})
    if NATIVE is not None:  # regular batches packed, their JSON written by C: the same line
        packed, packed_problems = decode(buf, options, pack=True)
        harness.agree("packed records", (jsonl.dumpb({"units": packed}), packed_problems),
                      (line, problems))
    if TEXT_OR is not None:
        for unit in units:
            for record in unit["records"]:
                headers = [h["value"] for h in record["headers"]]
                for value in (record["key"], record["value"], *headers):
                    if value is not None:
                        harness.agree("bytes as JSON", TEXT_OR(jsonl._default, value),
                                      jsonl._default(value))


if __name__ == "__main__":
    harness.main(target, "records")
