"""Fuzz producer state snapshots (kinspect/storage/snapshot.py).

Input: the .snapshot file. Checks: no exception; the producers decoded are the entries the
file holds, never more.
"""

import harness

with harness.instrumented("kinspect.storage"):
    from kinspect.storage.dump import DumpOptions, dump_file
    from kinspect.storage.files import FileInfo
    from kinspect.storage.snapshot import ENTRY, HEADER, decode_snapshot


def target(data: bytes) -> None:
    decoded, problems = decode_snapshot(data)
    harness.check_problems(problems)
    room = max(len(data) - HEADER.size, 0) // ENTRY.size
    if len(decoded["producers"]) > room:
        raise harness.Finding(f"{len(decoded['producers'])} producers from room for {room}")
    views = harness.DumpViews(False, False)
    for event in dump_file("fuzz.snapshot", data, FileInfo("producer_snapshot", 0), DumpOptions(),
                           lambda suffix: None):
        views.show(event)
    views.finish()


if __name__ == "__main__":
    harness.main(target, "snapshot")
