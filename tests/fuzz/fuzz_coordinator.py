"""Fuzz the records of the coordinator topics: __consumer_offsets (kinspect/storage/
offsets_records.py, with its members' consumer protocol), __transaction_state, __share_group_state
(coordinator_records.py) and __cluster_metadata (cluster_metadata.py).

Input: one byte choosing the topic (COORDINATOR_TOPICS' order), then the record's key and value
(formats.nullable each). Checks: no exception, no hidden one in any problem; where the offset
commit fast path (kinspect/groups/commit_records.py) takes a record, it gives what the general
decoder gives.
"""

import formats
import harness

with harness.instrumented("kinspect.storage", "kinspect.groups"):
    from kinspect.groups.commit_records import decode_commit
    from kinspect.storage.cluster_metadata import decode_metadata_record
    from kinspect.storage.offsets_records import decode_offsets_record
    from kinspect.storage.share_state import decode_share_state_record
    from kinspect.storage.transaction_state import decode_transaction_record

from kinspect.render.jsonl import dumpb  # noqa: E402

DECODERS = (decode_offsets_record, decode_transaction_record, decode_share_state_record,
            lambda key, value: decode_metadata_record(value))  # as seeds.COORDINATOR_TOPICS


def target(data: bytes) -> None:
    cursor = formats.Cursor(data)
    decoder = DECODERS[cursor.u8() % len(DECODERS)]
    key, value = cursor.nullable(), cursor.nullable()
    record, problems = decoder(key, value)
    harness.check_problems(problems)
    dumpb(record)
    if decoder is decode_offsets_record:
        fast = decode_commit(key, value)
        if fast is not None:
            if any(p.severity == "error" for p in problems):
                raise harness.Finding(f"the fast path takes a record the decoder finds in error: "
                                      f"{[str(p) for p in problems]}")
            slow = record["key"]
            harness.agree("offset commit", fast, (slow["group"], slow["topic"], slow["partition"],
                                                  record["value"]), ("decode_commit", "decode_offsets_record"))


if __name__ == "__main__":
    harness.main(target, "coordinator", generated=True)
