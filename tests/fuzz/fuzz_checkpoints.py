"""Fuzz the broker's text files (kinspect/storage/checkpoints.py): leader-epoch and offset
checkpoints, partition.metadata, meta.properties, quorum-state, .kafka_cleanshutdown.

Input: one byte choosing the kind (CHECKPOINT_KINDS' order), then the file. Checks: no
exception, no hidden one in any problem.
"""

import harness

with harness.instrumented("kinspect.storage"):
    from kinspect.storage.dump import DumpOptions, dump_file
    from kinspect.storage.files import FileInfo

CHECKPOINT_KINDS = ("leader_epoch_checkpoint", "offset_checkpoint", "partition_metadata",
                    "meta_properties", "quorum_state", "clean_shutdown")  # as seeds.py numbers them


def target(data: bytes) -> None:
    if not data:
        return
    kind = CHECKPOINT_KINDS[data[0] % len(CHECKPOINT_KINDS)]
    views = harness.DumpViews(False, False)
    for event in dump_file("fuzz-checkpoint", data[1:], FileInfo(kind), DumpOptions(),
                           lambda suffix: None):
        views.show(event)
    views.finish()


if __name__ == "__main__":
    harness.main(target, "checkpoints")
