"""Fuzz transaction indexes (kinspect/storage/txnindex.py), each entry checked against the ABORT
marker in its segment.

Input: the .txnindex and its .log (formats.pair; no .log: entries are checked against each
other only). Checks: no exception, no hidden one in any problem.
"""

import formats
import harness

with harness.instrumented("kinspect.storage"):
    from kinspect.storage.dump import DumpOptions, dump_file
    from kinspect.storage.files import FileInfo


def target(data: bytes) -> None:
    entries, log = formats.unpair(formats.Cursor(data))
    companion = lambda suffix: log if suffix == ".log" else None  # noqa: E731
    views = harness.DumpViews(False, False)
    for event in dump_file("fuzz.txnindex", entries, FileInfo("txnindex", 0), DumpOptions(), companion):
        views.show(event)
    views.finish()


if __name__ == "__main__":
    harness.main(target, "txnindex")
