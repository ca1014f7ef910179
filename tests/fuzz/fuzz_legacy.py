"""Fuzz legacy message sets (kinspect/records/legacy.py): magic 0 and 1, compressed wrappers
and the messages inside them, and what dump adds to them (kinspect/storage/dump.py: the CRCs of
inner messages, record sizes), as `dump --records --data` shows a segment of them.

Input: one byte of options (bit 0: a cut-off last message is normal; bit 1: the record checks;
bit 2: small bounds; bit 3: the first message's magic byte is kept, not forced to 0 or 1; bits
4-5: how data is shown, auto, text, hex or json), then the message set, decoded and dumped
through dump's renderers. Checks: no exception, no hidden one in any problem, no control
character in the table.
"""

import harness

with harness.instrumented("kinspect.records", "kinspect.limits", "kinspect.storage"):
    from kinspect.limits import Budget, Limits
    from kinspect.records import decode_records
    from kinspect.storage.dump import DumpOptions, dump_file
    from kinspect.storage.files import FileInfo

SMALL = harness.small_limits()
MAGIC_AT = 16


def target(data: bytes) -> None:
    options, records = (data[0], bytearray(data[1:])) if data else (0, bytearray())
    if not options & 8 and len(records) > MAGIC_AT:
        records[MAGIC_AT] &= 1
    records = bytes(records)
    limits = SMALL if options & 4 else Limits()
    units, problems = decode_records(records, "records", 0, partial_ok=bool(options & 1),
                                     checks=bool(options & 2), max_output=Budget(limits, len(records)))
    harness.check_problems(problems)
    dump = DumpOptions(records=True, data=True, checks=bool(options & 2), limits=limits)
    views = harness.DumpViews(True, True, harness.DUMP_MODES[options >> 4 & 3])
    for event in dump_file("fuzz.log", records, FileInfo("log"), dump, lambda suffix: None):
        views.show(event)
    views.finish()


if __name__ == "__main__":
    harness.main(target, "legacy")
