"""Transaction indexes (.txnindex): the aborted transactions whose ABORT marker is in the segment.

Entry (34 bytes): int16 version (0), int64 producer id, int64 first offset, int64 last offset
(the ABORT marker's), int64 last stable offset when the marker was written. A consumer with
isolation.level=read_committed skips a producer's records from first to last offset.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from kinspect.problems import ERROR, WARNING, Problem

ENTRY = struct.Struct(">hqqqq")
VERSION = 0


def iter_aborted(buf, path: str = "txnindex") -> Iterator[tuple[dict | None, list[Problem]]]:
    size = ENTRY.size
    count, trailing = divmod(len(buf), size)
    previous_last = None
    for index in range(count):
        version, producer_id, first, last, stable = ENTRY.unpack_from(buf, index * size)
        entry = {"index": index, "version": version, "producer_id": producer_id,
                 "first_offset": first, "last_offset": last, "last_stable_offset": stable}
        where, at = f"{path} → entry[{index}]", index * size
        problems: list[Problem] = []
        if version != VERSION:
            problems.append(Problem(f"entry version {version} is unknown (Kafka writes "
                                    f"{VERSION})", where, at, ERROR, "txnindex_version",
                                    VERSION, version))
        if first > last or producer_id < 0:
            problems.append(Problem(f"aborted transaction of producer {producer_id} from offset "
                                    f"{first} to {last} is not a range", where, at + 10, ERROR,
                                    "txnindex_entry"))
        if stable < first:
            problems.append(Problem(f"last stable offset {stable} is before the transaction's "
                                    f"first offset {first}", where, at + 26, WARNING,
                                    "txnindex_entry", f">= {first}", stable))
        if previous_last is not None and last < previous_last:
            problems.append(Problem(f"last offset {last} goes back (previous entry "
                                    f"{previous_last})", where, at + 18, ERROR, "txnindex_order",
                                    f">= {previous_last}", last))
        previous_last = last
        yield entry, problems
    if trailing:
        yield None, [Problem(f"{trailing} bytes after the last whole {size}-byte entry", path,
                             count * size, ERROR, "txnindex_size", 0, trailing)]


def check_marker(entry: dict, batch: dict | None, control_type: str | None, where: str,
                 at: int) -> list[Problem]:
    """The aborted transaction's last offset must be its producer's ABORT marker in the log.

    batch: the header of the batch holding entry["last_offset"] (None when not found);
    control_type: that batch's control record type when it is a control batch.
    """
    last, producer = entry["last_offset"], entry["producer_id"]
    if batch is None or batch["last_offset"] < last or (
            batch["base_offset"] is not None and batch["base_offset"] > last):
        return [Problem(f"no batch holds offset {last}, the ABORT marker of producer {producer}",
                        where, at + 18, ERROR, "txnindex_marker")]
    if not batch["is_control"] or control_type != "ABORT" or batch["producer_id"] != producer:
        producer_there = batch["producer_id"]
        found = (f"a {control_type} marker of producer {producer_there}" if batch["is_control"]
                 else f"a data batch of producer {producer_there}")
        return [Problem(f"offset {last} should be an ABORT marker of producer {producer}; the log "
                        f"has {found}", where, at + 18, ERROR, "txnindex_marker",
                        f"ABORT of {producer}", found)]
    return []
