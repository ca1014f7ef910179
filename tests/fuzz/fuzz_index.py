"""Fuzz offset and time indexes (kinspect/storage/index.py) checked against their segment.

Input: one byte (bit 0: a .timeindex, else an .index; bit 1: the file name's base offset is
2**62, else 0), then the index and its .log (formats.pair; no .log: entries are checked
against each other only). Checks: no exception, no hidden one in any problem.
"""

import formats
import harness

with harness.instrumented("kinspect.storage"):
    from kinspect.storage.dump import DumpOptions, dump_file
    from kinspect.storage.files import FileInfo


def target(data: bytes) -> None:
    cursor = formats.Cursor(data)
    options = cursor.u8()
    entries, log = formats.unpair(cursor)
    info = FileInfo("timeindex" if options & 1 else "index", 1 << 62 if options & 2 else 0)
    companion = lambda suffix: log if suffix == ".log" else None  # noqa: E731
    views = harness.DumpViews(False, False)
    for event in dump_file("fuzz.index", entries, info, DumpOptions(), companion):
        views.show(event)
    views.finish()


if __name__ == "__main__":
    harness.main(target, "index")
