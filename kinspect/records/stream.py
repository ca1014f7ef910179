"""Records and record sets too big to hold in memory, decoded again a chunk at a time when read.

A RecordStream stands where a batch's list of records would be. It knows how many records
there are, the first and the last (decoding already went through them once, counting them and
finding their problems); iterating it decodes them again, ``STREAM_CHUNK`` at a time, from the
bytes it keeps: the batch's own bytes, or its compressed payload, inflated again. Renderers
write it chunk by chunk (render/jsonl.py), so memory stays bounded by a chunk, not a batch.
"""

from __future__ import annotations

from collections.abc import Iterator

from kinspect.problems import ProblemCap
from kinspect.records.codecs import decompress

STREAM_CHUNK = 4096


class _Streamed:
    """What both streams share: a known length, and items read chunk by chunk (``chunks``)."""
    __slots__ = ("_count",)

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[dict]:
        for chunk in self.chunks():
            yield from chunk

    def __getitem__(self, index: int) -> dict:
        if index < 0:
            index += self._count
        for number, item in enumerate(self):
            if number == index:
                return item
        raise IndexError(index)

    def head(self, count: int) -> list[dict]:
        """The first ``count`` items (for previews)."""
        out: list[dict] = []
        for chunk in self.chunks(min(count, STREAM_CHUNK)):
            out += chunk[:count - len(out)]
            if len(out) >= count:
                break
        return out

    def chunks(self, size: int = 0) -> Iterator[list[dict]]:
        raise NotImplementedError


class RecordStream(_Streamed):
    __slots__ = ("_window", "_data", "_start", "_stop", "_first", "_last", "_each")

    def __init__(self, window, data, start: int, stop: int, count: int, first: dict | None,
                 last: dict | None, each=None):
        """``data``: the record bytes, or (codec, compressed payload, decompressed size);
        ``each``, if given, is applied to every record as it is read (see ``mapped``)."""
        self._window, self._data, self._start, self._stop = window, data, start, stop
        self._count, self._first, self._last, self._each = count, first, last, each

    def mapped(self, each) -> RecordStream:
        """The same records, each passed through ``each(record) -> record`` when read (the
        first and last, kept from the first pass, are returned as they were decoded)."""
        inner = self._each
        composed = each if inner is None else (lambda record: each(inner(record)))
        return RecordStream(self._window, self._data, self._start, self._stop, self._count,
                            self._first, self._last, composed)

    def __getitem__(self, index: int) -> dict:
        if index in (0, -self._count) and self._first is not None:
            return self._first
        if index == -1 and self._last is not None:
            return self._last
        return super().__getitem__(index)

    def chunks(self, size: int = 0) -> Iterator[list[dict]]:
        """The records, ``size`` at a time (problems were reported by the first pass)."""
        size = size or STREAM_CHUNK
        window = self._window
        data = self._data
        if isinstance(data, tuple):
            codec, payload, size_out = data
            data, _ = decompress(codec, payload, size_out)
            if data is None:
                return
        window.data = data
        try:
            pos, framed, stop = self._start, 0, self._stop
            ignored = ProblemCap([], keep=0)  # the first pass reported them: now nothing is built
            while pos < stop:
                records, n, pos = window.decode(pos, stop, ignored, framed, size)
                framed += n
                if records:
                    yield records if self._each is None else list(map(self._each, records))
        finally:
            window.data = self._data if not isinstance(self._data, tuple) else None

    def __repr__(self) -> str:
        return f"<RecordStream of {self._count} records>"


class BatchStream(_Streamed):
    """The batches of a record set with more of them than may be held at once (each batch
    counts ``BATCH_WEIGHT`` records against the budget). Decoding went through them once,
    finding their problems; reading decodes them again, ``BATCH_CHUNK`` batches at a time,
    with a copy of the budget as it was when the record set began, so every batch is decoded
    (and decompressed, or refused) exactly as the first time."""

    __slots__ = ("_walk",)

    def __init__(self, walk, count: int):
        """``walk()`` yields the record set's batches again; ``count`` how many."""
        self._walk, self._count = walk, count

    def mapped(self, each) -> BatchStream:
        """The same batches, each passed through ``each(batch) -> batch`` when read."""
        walk = self._walk
        return BatchStream(lambda: map(each, walk()), self._count)

    def chunks(self, size: int = 0) -> Iterator[list[dict]]:
        chunk: list[dict] = []
        for batch in self._walk():
            chunk.append(batch)
            if len(chunk) >= (size or BATCH_CHUNK):
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    def __repr__(self) -> str:
        return f"<BatchStream of {self._count} batches>"


BATCH_WEIGHT = 4   # a batch's dict holds about as much memory as this many records
BATCH_CHUNK = 256  # batches decoded at a time when a record set is streamed
