"""Schema-aware values in decode's finishing step (decode.finish's ``stages=``).

    stage = ValueStage(schemas, topic="_schemas", show_secrets=False, learn=True)
    run_outputs(run, keep, mode, jobs, stages=(stage,))

Called on every finished exchange: with ``learn``, the exchange's own records of the registry's
topic (Produce requests, Fetch responses) are replayed into the store first, so that values seen
after their schema decode; then every record of its Produce and Fetch batches goes through
``records.apply_record``. Worker processes are forked with the stage (decode.parallel), each
with its copy of what was known when they started. While no schema is known at all, records are
not looked at (a capture with no schema pays nothing).
"""

from __future__ import annotations

import os

from kinspect import native
from kinspect.records.packed import PackedRecords
from kinspect.records.stream import BatchStream, RecordStream
from kinspect.schemas.capture import FETCH, PRODUCE, SchemaRecords
from kinspect.schemas.packed_values import PackedValues
from kinspect.schemas.records import apply_record
from kinspect.schemas.sources import DEFAULT_TOPIC, feed_records

CHUNK = 1 << 23


class ValueStage:
    """``packed_json``: a packed batch (records/packed.py) stays packed, its framed keys and
    values decoded only as its JSON text is written (schemas/packed_values.py), or as its dicts
    are read; for outputs that read batches no other way (decode --json: not --summary, whose
    counts by schema read the dicts the stage leaves)."""

    __slots__ = ("schemas", "topic", "show_secrets", "learn", "notices", "packed_json", "_values")

    def __init__(self, schemas, topic: str = DEFAULT_TOPIC, show_secrets: bool = False, learn: bool = True,
                 notices: WorkerNotices | None = None, packed_json: bool = False):
        self.schemas, self.topic, self.show_secrets, self.learn = schemas, topic, show_secrets, learn
        self.notices = notices
        self.packed_json = packed_json
        self._values = None

    def __call__(self, exchange: dict, topics=None, budget=None) -> None:
        api = exchange.get("api_key")
        if api == PRODUCE:
            parts = _produce_parts(exchange.get("request"))
        elif api == FETCH:
            parts = _fetch_parts(exchange.get("response"))
        else:
            return
        if self.learn:
            collected = SchemaRecords(self.topic)
            collected.exchange(exchange)
            if len(collected):
                feed_records(self.schemas.store, collected.records())
        if not len(self.schemas.store) and self.schemas.fallback is None:
            return  # nothing could decode: values stay as they are, at no cost
        for part in parts:
            batches = part.get("records")
            if isinstance(batches, BatchStream):  # too many to hold: each decoded as it is read
                part["records"] = batches.mapped(self._streamed_batch)
            else:
                for batch in batches or ():
                    self._batch(batch)
        if self.notices is not None:
            self.notices.send(self.schemas)

    def _batch(self, batch) -> None:
        if not isinstance(batch, dict) or batch.get("is_control"):
            return
        records = batch.get("records")
        if isinstance(records, PackedRecords):
            if self.packed_json and native.v2records is not None:
                if self._values is None:
                    self._values = PackedValues(self)
                records.values = self._values
                return
            unpacked = records.records()
            if self._records(unpacked):  # kept packed (the fast JSON path) when nothing is framed
                batch["records"] = unpacked
        elif isinstance(records, list):
            self._records(records)
        elif isinstance(records, RecordStream):  # too big to hold: decoded as it is read
            batch["records"] = records.mapped(self._streamed)

    def _streamed_batch(self, batch):
        self._batch(batch)
        return batch

    def _streamed(self, record):
        if isinstance(record, dict):
            before = len(self.schemas.notices)
            apply_record(record, self.schemas, self.show_secrets)
            if self.notices is not None and len(self.schemas.notices) != before:
                self.notices.send(self.schemas)
        return record

    def records(self, records: list) -> None:
        """A packed batch's records (PackedValues.apply), decoded the Python way after the stage
        was called: the notices they give are sent from here."""
        self._records(records)
        if self.notices is not None:
            self.notices.send(self.schemas)

    def _records(self, records: list) -> bool:
        framed = False
        schemas, show = self.schemas, self.show_secrets
        for record in records:
            if isinstance(record, dict) and apply_record(record, schemas, show):
                framed = True
        return framed


class WorkerNotices:
    """The notices a worker process's copy of the Schemas gives (unknown ids, schemas that do not
    compile), handed to the main process through a pipe made before the workers fork. Each is a
    JSON line under PIPE_BUF, written whole or not at all; a full pipe drops it (the main process
    reads the pipe after the run; the Schemas gives at most resolver.MAX_NOTICES)."""

    MAX_LINE = 4000

    def __init__(self):
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._pid = os.getpid()
        self._sent = 0

    def send(self, schemas) -> None:
        if os.getpid() == self._pid:
            return  # the main process's own notices are read from its Schemas
        problems = schemas.problems()
        if len(problems) <= self._sent:
            return
        import json
        for problem in problems[self._sent:]:
            shown = problem.to_dict()
            shown["what"] = shown["what"][:3000]
            line = json.dumps(shown).encode() + b"\n"
            if len(line) <= self.MAX_LINE:
                try:
                    os.write(self._write, line)
                except (BlockingIOError, BrokenPipeError):
                    pass
        self._sent = len(problems)

    def received(self) -> list[dict]:
        """The notices workers sent so far (in this process only)."""
        import json
        data = b""
        while True:
            try:
                got = os.read(self._read, 65536)
            except BlockingIOError:
                break
            if not got:
                break
            data += got
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    def close(self) -> None:
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass


def all_notices(schemas, notices: WorkerNotices | None) -> list[dict]:
    """The run's schema notices, each once, in one order whatever process gave them."""
    found = {}
    for shown in [p.to_dict() for p in schemas.problems()] + (notices.received() if notices else []):
        found.setdefault(shown["what"], shown)
    return [found[what] for what in sorted(found)]


def _produce_parts(request):
    """The partitions of a Produce request (their "records": batches, or a BatchStream)."""
    if not isinstance(request, dict):
        return
    for entry in request.get("topic_data") or ():
        if isinstance(entry, dict):
            for part in entry.get("partition_data") or ():
                if isinstance(part, dict):
                    yield part


def _fetch_parts(response):
    """The partitions of a Fetch response (their "records": batches, or a BatchStream)."""
    if not isinstance(response, dict):
        return
    for entry in response.get("responses") or ():
        if isinstance(entry, dict):
            for part in entry.get("partitions") or ():
                if isinstance(part, dict):
                    yield part


def mentions(path: str, topic: str, limits=None) -> bool:
    """Whether the capture file's bytes (gunzipped) hold the topic's name anywhere: a capture
    that never names it has none of its records, and needs no first pass. Only for regular files
    (a pipe read here would be gone for the decode itself). Read through one buffer of CHUNK
    bytes, never mapped whole: the file's pages would count in the run's peak memory. A gzip'ed
    file is read only as far as the decode may read it (``limits``, kinspect.limits: the first
    max_batch_bytes, then max_file_ratio bytes per compressed byte): past that, no record is
    decoded, mentioned or not (a 4.2 MB bomb took the scan through all of its 2.1 GB)."""
    import gzip

    from kinspect.limits import DEFAULT_LIMITS
    limits = limits or DEFAULT_LIMITS
    needle = topic.encode()
    try:
        with open(path, "rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            if not gzipped:
                return _holds(f, needle)
            counted = _Counted(f)
            return _holds(gzip.open(counted, "rb"), needle,
                          lambda: limits.max_batch_bytes + limits.max_file_ratio * counted.count)
    except (OSError, EOFError, ValueError):
        return True  # unreadable or damaged: let the pass itself say so


class _Counted:
    """A file whose reads are counted: the compressed bytes a gzip stream has taken."""

    def __init__(self, file) -> None:
        self.file, self.count = file, 0

    def read(self, size: int = -1) -> bytes:
        data = self.file.read(size)
        self.count += len(data)
        return data


def _holds(stream, needle: bytes, allowed=None) -> bool:
    """``allowed``: how many bytes of the stream may be read so far (None: all)."""
    buffer = bytearray(CHUNK + len(needle))
    view = memoryview(buffer)
    find = None
    kept = 0  # the last bytes of the chunk before, where the needle may begin
    seen = 0
    while read := stream.readinto(view[kept:kept + CHUNK]):
        end = kept + read
        find = find or _finder(buffer, needle, end)
        if find(needle, end):
            return True
        seen += read
        if allowed is not None and seen > allowed():
            return False
        kept = min(len(needle) - 1, end)
        buffer[:kept] = buffer[end - kept:end]
    return False


def _finder(buffer: bytearray, needle: bytes, end: int):
    """``find(needle, end)``: whether buffer[:end] holds needle. The C scan (native.packets.holds:
    memchr for the needle's byte that is rarest in the first chunk's first 64 KB, 0.10 s against
    memmem's 0.16 s for the 323 MB loopback capture, reading included), else the C library's
    memmem (twice bytearray.find's speed), else bytearray.find."""
    from kinspect import native
    if native.packets is not None and needle:
        sample = buffer[:min(end, 1 << 16)]
        at = min(range(len(needle)), key=lambda i: sample.count(needle[i]))
        return lambda needle, end: native.packets.holds(buffer, end, needle, at)
    import ctypes
    try:
        memmem = ctypes.CDLL(None).memmem
    except (AttributeError, OSError):
        return lambda needle, end: buffer.find(needle, 0, end) >= 0
    memmem.restype = ctypes.c_void_p
    memmem.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    address = ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
    return lambda needle, end: memmem(address, end, needle, len(needle)) is not None
