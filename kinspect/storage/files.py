"""What a file in a Kafka log dir is, from its name and the directory it is in.

    describe(Path("logs/orders-3/00000000000000001234.log"))
    -> FileInfo(kind="log", base_offset=1234, topic="orders", partition=3, ...)

Kinds: log, index, timeindex, producer_snapshot, txnindex, kraft_snapshot (.checkpoint, also
bootstrap.checkpoint), leader_epoch_checkpoint, offset_checkpoint (replication-offset-,
recovery-point-offset-, log-start-offset-, cleaner-offset-checkpoint), partition_metadata,
meta_properties, quorum_state, clean_shutdown, lock; None for anything else. Files the broker
renamed for deletion or compaction (.deleted, .cleaned, .swap) keep their kind, with a note.
"""

from __future__ import annotations

import os

import re
from dataclasses import dataclass
from pathlib import Path

SUFFIX_KINDS = {".log": "log", ".index": "index", ".timeindex": "timeindex",
                ".snapshot": "producer_snapshot", ".txnindex": "txnindex",
                ".checkpoint": "kraft_snapshot"}
NAME_KINDS = {"leader-epoch-checkpoint": "leader_epoch_checkpoint",
              "replication-offset-checkpoint": "offset_checkpoint",
              "recovery-point-offset-checkpoint": "offset_checkpoint",
              "log-start-offset-checkpoint": "offset_checkpoint",
              "cleaner-offset-checkpoint": "offset_checkpoint",
              "partition.metadata": "partition_metadata", "meta.properties": "meta_properties",
              "quorum-state": "quorum_state", ".kafka_cleanshutdown": "clean_shutdown",
              ".lock": "lock"}
KINDS = tuple(SUFFIX_KINDS.values()) + tuple(dict.fromkeys(NAME_KINDS.values()))
RENAMED = (".deleted", ".cleaned", ".swap")
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__cluster_metadata",
                   "__share_group_state")
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)"
                            r"(?:\.(?P<uuid>[0-9a-f]{32})-(?P<state>delete|future|stray))?$")
_OFFSET_NAME = re.compile(r"^(?P<offset>\d{20})(?:-(?P<epoch>\d{10}))?\.")


@dataclass(frozen=True, slots=True)
class FileInfo:
    kind: str | None
    base_offset: int | None = None      # from the 20-digit file name
    snapshot_epoch: int | None = None   # KRaft snapshots: <end offset>-<epoch>.checkpoint
    topic: str | None = None
    partition: int | None = None
    renamed: str | None = None          # .deleted, .cleaned or .swap
    directory_state: str | None = None  # delete, future or stray partition directories

    @property
    def records_topic(self) -> str | None:
        """The internal topic whose record decoder applies, if any."""
        if self.kind == "kraft_snapshot":
            return "__cluster_metadata"
        return self.topic if self.topic in INTERNAL_TOPICS else None


def describe(path: Path, kind: str | None = None) -> FileInfo:
    name = path.name
    renamed = next((suffix for suffix in RENAMED if name.endswith(suffix)), None)
    if renamed:
        name = name[:-len(renamed)]
    if kind is None:
        kind = NAME_KINDS.get(name) or SUFFIX_KINDS.get(Path(name).suffix)
    match = _OFFSET_NAME.match(name)
    base_offset = int(match["offset"]) if match else None
    epoch = int(match["epoch"]) if match and match["epoch"] else None
    directory = _PARTITION_DIR.match(path.parent.name) or _PARTITION_DIR.match(_real_directory(path))
    topic = partition = state = None
    if directory:
        topic, partition = directory["topic"], int(directory["partition"])
        state = directory["state"]
    return FileInfo(kind, base_offset, epoch, topic, partition, renamed, state)


def _real_directory(path: Path) -> str:
    """The name of the directory that really holds ``path`` (a bare name run inside a partition
    directory, as kafka-dump-log users do, or a link to a file of one)."""
    try:
        return os.path.basename(os.path.dirname(os.path.realpath(path)))
    except (OSError, ValueError):
        return ""


def companion(path: Path, suffix: str) -> Path:
    """The file of the same segment with another suffix: 0...0.index → 0...0.log."""
    stem = path.name.split(".", 1)[0]
    return path.with_name(stem + suffix)
