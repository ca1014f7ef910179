"""A regular v2 batch's records kept as their bytes, until an output writes them.

Outputs that never show records as objects (--json writes them as JSON text, text lines and
--summary not at all, -v through that JSON) ask for them this way (Budget.pack_records). A batch qualifies when the C fast
path finds every record regular, every header key UTF-8 and the offset deltas 0, 1, 2, ...
(``native.v2records.scan``): then there is no problem to report record by record, and the
checks need only the count and the largest timestamp, which the scan gives. render/jsonl.py
writes the JSON text straight from the bytes (``native.v2records.to_json``); anything else
that reads the records gets the dicts ``decode`` builds, the same as an unpacked batch holds.

``values`` (None, or set by schemas/stage.py) is how framed keys and values are decoded: its
``to_json(data, start, stop, base_offset, base_timestamp, fixed_timestamp)`` gives the JSON array
with them decoded (or None: then the dicts are used), and ``apply(records)`` decodes them in the
dicts that ``records()`` gives, in place.
"""

from __future__ import annotations

from collections.abc import Iterator

from kinspect import native


class PackedRecords:
    __slots__ = ("data", "start", "stop", "base_offset", "base_timestamp", "fixed_timestamp",
                 "count", "largest_timestamp", "values")

    def __init__(self, data: bytes | memoryview, start: int, stop: int, base_offset: int, base_timestamp: int,
                 fixed_timestamp: int | None, count: int, largest_timestamp: int | None):
        """The records of ``data[start:stop]``; ``largest_timestamp`` is None with a fixed one."""
        self.data, self.start, self.stop = data, start, stop
        self.base_offset, self.base_timestamp = base_offset, base_timestamp
        self.fixed_timestamp, self.count = fixed_timestamp, count
        self.largest_timestamp = largest_timestamp
        self.values = None

    def to_json(self) -> bytes | None:
        """The records as a JSON array, as render/jsonl.py writes their dicts (None: not this way)."""
        data, start, stop = self._bytes()
        if self.values is not None:
            return self.values.to_json(data, start, stop, self.base_offset, self.base_timestamp,
                                       self.fixed_timestamp)
        return native.v2records.to_json(data, start, stop, self.base_offset, self.base_timestamp,
                                        self.fixed_timestamp)

    def records(self) -> list[dict]:
        """The records as dicts, as decode_batch holds those of a batch it does not pack (with
        ``values``, their keys and values decoded as it says)."""
        data, start, stop = self._bytes()
        got = native.v2records.decode(data, start, stop, self.base_offset, self.base_timestamp,
                                      self.fixed_timestamp, self.count, [], 0)
        if self.values is not None:
            self.values.apply(got[0])
        return got[0]

    def _bytes(self) -> tuple[bytes, int, int]:
        """data, start and stop, with the records copied out of a view (of a mapped file)."""
        if type(self.data) is bytes:
            return self.data, self.start, self.stop
        return bytes(self.data[self.start:self.stop]), 0, self.stop - self.start

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def __iter__(self) -> Iterator[dict]:
        return iter(self.records())

    def __getitem__(self, index):
        return self.records()[index]

    def __repr__(self) -> str:
        return f"<PackedRecords of {self.count} records>"


def scan(data: bytes | memoryview, start: int, stop: int, base_offset: int, base_timestamp: int,
         fixed_timestamp: int | None, limit: int) -> PackedRecords | None:
    """The records of data[start:stop] packed, or None when they don't qualify (see the
    module's docstring) or there are more than ``limit``. A view (of a mapped file) is packed
    where it lies: its records are copied out only if read."""
    if native.v2records is None or type(data) not in (bytes, memoryview):
        return None
    got = native.v2records.scan(data, start, stop, base_offset, base_timestamp, fixed_timestamp,
                                limit)
    if got is None:
        return None
    count, largest = got
    return PackedRecords(data, start, stop, base_offset, base_timestamp, fixed_timestamp, count,
                         largest)
