"""Fuzz log segments and KRaft snapshots (kinspect/storage/segment.py, dump.py): the walk past
damage, batch events, records, the internal topics' records decoded by type, as `dump` reads a
mapped segment.

Input: two bytes of options, then the .log file. First byte: bit 0 records, bit 1 their data,
bit 2 no record checks, bit 3 headers only (shallow), bit 4 a KRaft .checkpoint, bits 5-7 the
topic whose records are decoded (1-4: seeds.COORDINATOR_TOPICS' order; 5-7: none, small bounds).
Second byte: bit 0 bytes rather than an mmap, bits 1-2 how data is shown (auto, text, hex,
json). Every event goes through dump's table, kafka-dump-log and JSON Lines renderers. Checks:
no exception; no hidden one in any problem; no control character in the table; damage, padding
and batches tile the file in order.
"""

import mmap

import harness

with harness.instrumented("kinspect.storage", "kinspect.records", "kinspect.limits"):
    from kinspect.limits import Limits
    from kinspect.storage import segment
    from kinspect.storage.dump import DumpOptions, dump_file
    from kinspect.storage.files import FileInfo

TOPICS = (None, "__consumer_offsets", "__transaction_state", "__share_group_state",
          "__cluster_metadata")
SMALL = harness.small_limits()


def mapped(data: bytes):
    if not data:
        return data
    buf = mmap.mmap(-1, len(data))
    buf.write(data)
    return buf


def check_tiling(buf, checks: bool, decode: bool) -> None:
    position = 0
    for kind, item, problems in segment.walk_segment(buf, checks=checks, decode=decode):
        harness.check_problems(problems)
        start = item["position"]
        if start < position:
            raise harness.Finding(f"{kind} at {start} overlaps what ends at {position}")
        if kind == "batch" and decode:
            size = item["batch_length"] if item["magic"] == 2 else item["message_size"]
            position = start + 12 + size
        else:
            position = start + item["size"]
        if position > len(buf):
            raise harness.Finding(f"{kind} at {start} ends at {position}, past {len(buf)}")


def target(data: bytes) -> None:
    if len(data) < 2:
        return
    options, more, log = data[0], data[1], data[2:]
    topic_choice = options >> 5
    topic = TOPICS[topic_choice] if topic_choice < len(TOPICS) else None
    kind = "kraft_snapshot" if options & 16 else "log"
    dump = DumpOptions(records=bool(options & 1), data=bool(options & 2), checks=not options & 4,
                       shallow=bool(options & 8), limits=SMALL if topic_choice >= len(TOPICS) else None)
    buf = log if more & 1 else mapped(log)
    info = FileInfo(kind, 0, None, topic, 0 if topic else None)
    views = harness.DumpViews(dump.records, dump.data, harness.DUMP_MODES[more >> 1 & 3],
                             dump.shallow)
    for event in dump_file("fuzz.log", buf, info, dump, lambda suffix: None):
        views.show(event)
    views.finish()
    check_tiling(buf, dump.checks, not dump.shallow)


if __name__ == "__main__":
    harness.main(target, "segment", generated=True)
