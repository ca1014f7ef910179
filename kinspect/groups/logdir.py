"""A broker's data directory, as far as offsets need it: which __consumer_offsets partitions it
holds, their segments in offset order, topic ids → names, and each partition's log end offset.
"""

from __future__ import annotations

from pathlib import Path

from kinspect.storage import files
from kinspect.storage.checkpoints import decode_partition_metadata
from kinspect.storage.mapped import mapped
from kinspect.storage.segment import walk_segment

OFFSETS_TOPIC = "__consumer_offsets"


def offsets_partitions(log_dir: Path) -> dict[int, Path]:
    """__consumer_offsets-N directories by N (live ones: not marked for deletion, not future)."""
    found = {}
    for path in log_dir.glob(f"{OFFSETS_TOPIC}-*"):
        info = files.describe(path / "x")
        if path.is_dir() and info.topic == OFFSETS_TOPIC and info.directory_state is None:
            found[info.partition] = path
    return dict(sorted(found.items()))


def segments(partition_dir: Path) -> tuple[list[Path], list[Path]]:
    """(the .log segments in base-offset order, files the broker renamed and will not load)."""
    logs, skipped = [], []
    for path in partition_dir.iterdir():
        info = files.describe(path)
        if info.kind != "log" or info.base_offset is None:
            continue
        (skipped if info.renamed else logs).append(path)
    logs.sort(key=lambda p: files.describe(p).base_offset)
    return logs, sorted(skipped)


def topic_names(log_dir: Path) -> dict[str, str]:
    """Topic id → name from every partition's partition.metadata."""
    names = {}
    for meta in log_dir.glob("*/partition.metadata"):
        info = files.describe(meta)
        if info.topic is None or info.directory_state is not None:
            continue
        try:
            decoded, _ = decode_partition_metadata(meta.read_bytes(), str(meta))
        except OSError:
            continue
        if decoded.get("topic_id"):
            names[decoded["topic_id"]] = info.topic
    return names


def log_end_offset(partition_dir: Path) -> int | None:
    """The offset after the last batch of the partition's newest segment; None when unreadable.

    An empty newest segment (just rolled) ends where its name says it starts.
    """
    try:
        logs, _ = segments(partition_dir)
        if not logs:
            return None
        newest = logs[-1]
        end = files.describe(newest).base_offset
        with mapped(newest) as buf:
            for kind, item, _ in walk_segment(buf, str(newest), decode=False):
                if kind == "batch":
                    end = item["last_offset"] + 1
        return end
    except OSError:
        return None
