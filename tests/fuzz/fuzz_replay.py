"""Fuzz the replay of __consumer_offsets into group state (kinspect/groups/replay.py) and the
rows `kinspect offsets` shows of it (groups/describe.py).

Input: one byte of options (bit 0: only the group of the first record is asked for; bit 1: no
history), then entries (formats.replay_entries): a record of a plain or transactional batch,
or a COMMIT or ABORT marker of a producer, offsets increasing. Checks: no exception, no hidden one in any problem.
"""

import formats
import harness

with harness.instrumented("kinspect.groups", "kinspect.storage"):
    from kinspect.groups import describe
    from kinspect.groups.replay import OffsetsReplay

from kinspect.render.jsonl import dumpb  # noqa: E402


def target(data: bytes) -> None:
    cursor = formats.Cursor(data)
    options = cursor.u8()
    entries = list(formats.replay_entries(cursor))
    first_key = entries[0][3] if entries else None
    group = None
    if options & 1 and first_key:  # every key: int16 type, int16 length, the group id
        group = first_key[4:4 + int.from_bytes(first_key[2:4], "big")].decode("utf-8", "replace")
    replay = OffsetsReplay(group=group, history=not options & 2)
    offset = 0
    for number, (flags, producer, step, key, value) in enumerate(entries):
        offset += max(step, 1)  # records of one log have offsets of their own
        batch = {"magic": 2, "crc_valid": True, "base_offset": offset, "last_offset_delta": 0,
                 "position": number * 100, "producer_id": producer,
                 "is_transactional": bool(flags & (formats.TRANSACTIONAL | formats.CONTROL_COMMIT
                                                   | formats.CONTROL_ABORT)),
                 "records": [{"offset": offset, "key": key, "value": value}]}
        if flags & (formats.CONTROL_COMMIT | formats.CONTROL_ABORT):
            marker = "COMMIT" if flags & formats.CONTROL_COMMIT else "ABORT"
            batch.update(is_control=True, control={"type": marker}, records=[])
        replay.batch(batch, "fuzz.log")
    view = replay.finish()
    # not once: the replay gives a record's problems the record's position, not their byte in
    # it, so two faults of one record read alike (said in the report, not a bug)
    harness.check_problems(view.problems, once=False)
    rows = describe.history_rows(view)
    for listed in describe.listed_groups(view):
        rows += describe.offset_rows(view, listed) + describe.member_rows(view, listed)
        rows.append(describe.state_row(listed))
    dumpb(rows)


if __name__ == "__main__":
    harness.main(target, "replay", generated=True)
