"""A broker's log dir for the report: each partition's size, its batches' sizes, codecs and
(offset, timestamp) points, read by storage's segment walk; and validate's findings over it.
Files are mapped, never written; a partition whose files cannot be read is named, not fatal."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from kinspect.limits import Limits
from kinspect.storage import files
from kinspect.storage.dump import batch_event
from kinspect.storage.mapped import mapped
from kinspect.storage.segment import walk_segment
from kinspect.validate import FileReport, validate_paths

POINTS = 500          # (offset, timestamp) points kept per partition
FINDINGS = 1000       # validate findings kept (all are counted)
NO_TIMESTAMP = -1


class LogDirUnreadable(Exception):
    """Not a directory, or no partition directory (topic-N) in it."""


class Partition:
    __slots__ = ("topic", "partition", "log_bytes", "batches", "records", "points", "stride", "seen")

    def __init__(self, topic: str, partition: int):
        self.topic, self.partition = topic, partition
        self.log_bytes = self.batches = self.records = 0
        self.points: list = []   # (last offset, max timestamp ms), every stride-th batch
        self.stride = 1
        self.seen = 0

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def point(self, offset: int, stamp: int) -> None:
        self.seen += 1
        if (self.seen - 1) % self.stride:
            return
        self.points.append((offset, stamp))
        if len(self.points) > POINTS:
            del self.points[1::2]
            self.stride *= 2


class LogDir:
    def __init__(self, path: Path):
        self.path = path
        self.partitions: list[Partition] = []
        self.sizes: dict[str, Counter] = {}      # codec -> batch size bin (bytes, a power of 2) -> count
        self.codecs: Counter = Counter()         # codec -> batches
        self.codec_bytes: Counter = Counter()    # codec -> bytes
        self.findings: list[dict] = []
        self.finding_counts: Counter = Counter()  # severity -> count
        self.files: list[dict] = []              # validate's per-file rows with a problem
        self.unreadable: list[str] = []


def read_log_dir(path: Path, limits: Limits | None = None) -> LogDir:
    if not path.is_dir():
        raise LogDirUnreadable(f"{path}: not a directory")
    try:
        entries = sorted(path.iterdir())
    except OSError as e:
        raise LogDirUnreadable(f"{path}: {e.strerror or e}") from None
    found = LogDir(path)
    for directory in entries:
        info = files.describe(directory / "x")
        if directory.is_dir() and info.topic is not None and info.partition is not None \
                and info.directory_state is None:
            found.partitions.append(_partition(found, info.topic, info.partition, directory, limits))
    if not found.partitions:
        raise LogDirUnreadable(f"{path}: no partition directories (topic-N): not a Kafka log dir")
    _validate(found)
    return found


def _partition(found: LogDir, topic: str, number: int, directory: Path, limits) -> Partition:
    part = Partition(topic, number)
    try:
        logs = sorted(p for p in directory.iterdir() if p.suffix == ".log" and p.is_file())
    except OSError as e:
        found.unreadable.append(f"{directory}: {e.strerror or e}")
        return part
    for log in logs:
        try:
            part.log_bytes += log.stat().st_size
            with mapped(log) as buf:
                for kind, unit, _ in walk_segment(buf, str(log), max_output=limits or Limits()):
                    if kind == "batch":
                        _batch(found, part, batch_event(unit))
        except OSError as e:
            found.unreadable.append(f"{log}: {e.strerror or e}")
    return part


def _batch(found: LogDir, part: Partition, event: dict) -> None:
    codec = str(event.get("compression") or "none")
    size = event["size"]
    found.sizes.setdefault(codec, Counter())[1 << max(0, size - 1).bit_length()] += 1
    found.codecs[codec] += 1
    found.codec_bytes[codec] += size
    part.batches += 1
    part.records += event.get("count") or 1
    stamp = event.get("max_timestamp")
    if isinstance(stamp, int) and stamp != NO_TIMESTAMP and isinstance(event.get("last_offset"), int):
        part.point(event["last_offset"], stamp)


def _validate(found: LogDir) -> None:
    for item in validate_paths([found.path], skip_unknown=True):
        if isinstance(item, FileReport):
            if item.unreadable is not None or any(item.counts.values()):
                found.files.append(item.to_dict())
            continue
        found.finding_counts[item.severity] += 1
        if len(found.findings) < FINDINGS:
            found.findings.append(item.to_dict())
