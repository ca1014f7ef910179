"""Offset (.index) and time (.timeindex) indexes, checked against their segment.

.index entries: int32 offset relative to the segment's base offset, int32 file position.
.timeindex entries: int64 timestamp, int32 relative offset. Files may end in zero-filled,
preallocated space (a broker that did not shut down cleanly): an entry whose relative
offset is 0 after the first one starts it, as for Kafka's own reader.

The broker appends an .index entry after each append of about index.interval.bytes: the
position of the first batch appended and the largest offset appended, so normally the last
offset of the batch at that position (kafka-dump-log checks exactly this); a follower that
appends several batches at once leaves an entry whose offset is the last of a later batch,
and brokers before 0.11 indexed the first offset of the append, inside the batch. Either
way a lookup (the last entry at or below an offset, then a scan) lands well: the entry's
position must start a batch whose base offset is at or below the entry's offset.
A .timeindex entry holds the largest timestamp so far and the last offset of its batch.

    for kind, item, problems in check_offset_index(index_buf, base_offset, headers, path):
        kind == "entry": {"index", "offset", "position", "batch_last_offset"}
        kind == "zero_tail": {"index", "entries", "position", "size"}
`headers` iterates the segment's batch headers (segment.walk_segment(decode=False)), or is
None when the .log is not there (entries are then only checked against each other).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

from kinspect.problems import ERROR, INFO, WARNING, Problem

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")

Item = tuple[str, dict, list[Problem]]
Headers = Callable[[], Iterator[dict]]


def iter_entries(buf, entry: struct.Struct, path: str, relative_at: int
                 ) -> Iterator[tuple[int, tuple, list[Problem]] | tuple[str, dict, list[Problem]]]:
    """(index, fields) up to the zero-filled tail; then ("zero_tail", info, problems)."""
    size = entry.size
    count, trailing = divmod(len(buf), size)
    unpack = entry.unpack_from
    for i in range(count):
        fields = unpack(buf, i * size)
        if i and fields[relative_at] == 0:
            yield "zero_tail", _zero_tail(buf, i, count, size), []
            break
        yield i, fields, []
    if trailing:
        yield "trailing", {"position": count * size, "size": trailing}, [Problem(
            f"{trailing} bytes after the last whole {size}-byte entry", path, count * size,
            WARNING, "index_size", 0, trailing)]


def _zero_tail(buf, first: int, count: int, size: int) -> dict:
    start, end = first * size, count * size
    return {"index": first, "entries": count - first, "position": start, "size": end - start,
            "all_zero": not bytes(buf[start:end]).strip(b"\0")}


def _tail_problems(info: dict, path: str) -> list[Problem]:
    if info["all_zero"]:
        return [Problem(f"{info['entries']} zero-filled entries from byte {info['position']} "
                        f"(preallocated space, not entries)", path, info["position"], INFO,
                        "index_preallocated")]
    return [Problem(f"entry {info['index']} has relative offset 0 (the end, for Kafka) but "
                    f"non-zero bytes follow in the next {info['size']} bytes", path,
                    info["position"], ERROR, "index_garbage")]


class BatchCursor:
    """Walks batch headers forward; restarts from the top when asked to go back."""

    def __init__(self, headers: Headers):
        self._headers = headers
        self._iterator = headers()
        self.current: dict | None = next(self._iterator, None)

    def restart(self) -> None:
        self._iterator = self._headers()
        self.current = next(self._iterator, None)

    def advance(self) -> None:
        self.current = next(self._iterator, None)

    def at_or_after_position(self, position: int) -> dict | None:
        if self.current is not None and self.current["position"] > position:
            self.restart()
        while self.current is not None and self.current["position"] < position:
            self.advance()
        return self.current

    def ending_at_or_after(self, offset: int) -> dict | None:
        if self.current is not None and self.current["last_offset"] > offset:
            self.restart()
        while self.current is not None and self.current["last_offset"] < offset:
            self.advance()
        return self.current


def check_offset_index(buf, base_offset: int, headers: Headers | None, path: str,
                       log_size: int | None = None) -> Iterator[Item]:
    batches = BatchCursor(headers) if headers is not None else None
    previous = None
    for (kind, fields, problems), following in _with_next_position(
            iter_entries(buf, OFFSET_ENTRY, path, 0)):
        if kind == "zero_tail":
            yield kind, fields, _tail_problems(fields, path)
            continue
        if kind == "trailing":
            yield kind, fields, problems
            continue
        relative, position = fields
        offset = base_offset + relative
        at = kind * OFFSET_ENTRY.size
        where = f"{path} → entry[{kind}]"
        entry = {"index": kind, "offset": offset, "position": position, "batch_last_offset": None}
        if previous is not None:
            if offset <= previous[0]:
                problems.append(Problem(f"offset {offset} does not increase (previous entry "
                                        f"{previous[0]})", where, at, ERROR, "index_order",
                                        f"> {previous[0]}", offset))
            if position <= previous[1]:
                problems.append(Problem(f"position {position} does not increase (previous "
                                        f"entry {previous[1]})", where, at + 4, ERROR,
                                        "index_order", f"> {previous[1]}", position))
        if relative < 0 or position < 0:
            problems.append(Problem(f"negative relative offset {relative} or position "
                                    f"{position}", where, at, ERROR, "index_entry"))
        elif batches is not None:
            _check_against_log(entry, batches, following, log_size, where, at, problems)
        previous = (offset, position)
        yield "entry", entry, problems


def _with_next_position(items: Iterator) -> Iterator[tuple[tuple, int | None]]:
    """Each item with the position of the next entry (None for the last one)."""
    current = next(items, None)
    while current is not None:
        following = next(items, None)
        position = (following[1][1] if following is not None and isinstance(following[0], int)
                    else None)
        yield current, position
        current = following


def _check_against_log(entry: dict, batches: BatchCursor, following: int | None,
                       log_size: int | None, where: str, at: int,
                       problems: list[Problem]) -> None:
    offset, position = entry["offset"], entry["position"]
    batch = batches.at_or_after_position(position)
    if batch is None or batch["position"] != position:
        beyond = log_size is not None and position >= log_size
        problems.append(Problem(
            f"position {position} is " + (f"past the end of the log ({log_size} bytes)" if beyond
                                          else "not the start of a batch in the log"),
            where, at + 4, ERROR, "index_position", "a batch start", position))
        return
    entry["batch_last_offset"] = batch["last_offset"]
    if batch["last_offset"] == offset:
        return
    if batch["base_offset"] is not None and offset < batch["base_offset"]:
        problems.append(Problem(f"offset {offset} is below the base offset "
                                f"{batch['base_offset']} of the batch at position {position}",
                                where, at, ERROR, "index_offset", batch["base_offset"], offset))
        return
    if offset < batch["last_offset"]:
        # brokers before 0.11 indexed the first offset of an append; lookups still land well
        problems.append(Problem(f"offset {offset} is inside the batch at position {position} "
                                f"(offsets up to {batch['last_offset']}), not its last, as "
                                f"brokers before 0.11 indexed (kafka-dump-log lists a mismatch)",
                                where, at, INFO, "index_offset", batch["last_offset"], offset))
        return
    # an append of several batches: the offset must end a later batch before the next entry
    later = batches.ending_at_or_after(offset)
    if (later is not None and later["last_offset"] == offset
            and (following is None or later["position"] < following)):
        problems.append(Problem(f"offset {offset} ends the batch at position {later['position']}, "
                                f"a later batch of the append that starts at {position} "
                                f"(kafka-dump-log lists this as a mismatch)", where, at, INFO,
                                "index_offset", batch["last_offset"], offset))
        return
    problems.append(Problem(f"offset {offset} is not the last offset of a batch between position "
                            f"{position} and the next entry", where, at, ERROR, "index_offset",
                            batch["last_offset"], offset))


def check_time_index(buf, base_offset: int, headers: Headers | None, path: str
                     ) -> Iterator[Item]:
    """kind "entry": {"index", "timestamp", "offset", "batch_max_timestamp",
    "batch_last_offset"}; zero_tail and trailing as for check_offset_index."""
    batches = BatchCursor(headers) if headers is not None else None
    previous = None
    for kind, fields, problems in iter_entries(buf, TIME_ENTRY, path, 1):
        if kind == "zero_tail":
            yield kind, fields, _tail_problems(fields, path)
            continue
        if kind == "trailing":
            yield kind, fields, problems
            continue
        timestamp, relative = fields
        offset = base_offset + relative
        at = kind * TIME_ENTRY.size
        where = f"{path} → entry[{kind}]"
        entry = {"index": kind, "timestamp": timestamp, "offset": offset,
                 "batch_max_timestamp": None, "batch_last_offset": None}
        if previous is not None:
            if timestamp <= previous[0]:
                problems.append(Problem(f"timestamp {timestamp} does not increase (previous "
                                        f"entry {previous[0]})", where, at, ERROR,
                                        "timeindex_order", f"> {previous[0]}", timestamp))
            if offset < previous[1]:
                problems.append(Problem(f"offset {offset} goes back (previous entry "
                                        f"{previous[1]})", where, at + 8, ERROR,
                                        "timeindex_order", f">= {previous[1]}", offset))
        if batches is not None:
            batch = batches.ending_at_or_after(offset)
            if batch is None or batch["last_offset"] != offset:
                found = None if batch is None else batch["last_offset"]
                problems.append(Problem(f"offset {offset} is not the last offset of a batch "
                                        f"(the batch there ends at {found})", where, at + 8,
                                        ERROR, "timeindex_offset", offset, found))
            else:
                entry["batch_max_timestamp"] = batch["max_timestamp"]
                entry["batch_last_offset"] = batch["last_offset"]
                if batch["max_timestamp"] != timestamp:
                    problems.append(Problem(f"timestamp {timestamp} is not the max timestamp "
                                            f"{batch['max_timestamp']} of the batch ending at "
                                            f"offset {offset}", where, at, ERROR,
                                            "timeindex_timestamp", batch["max_timestamp"],
                                            timestamp))
        previous = (timestamp, offset)
        yield "entry", entry, problems
