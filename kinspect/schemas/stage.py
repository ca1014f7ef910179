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

from kinspect.records.packed import PackedRecords
from kinspect.schemas.capture import FETCH, PRODUCE, SchemaRecords
from kinspect.schemas.records import apply_record
from kinspect.schemas.sources import DEFAULT_TOPIC, feed_records

CHUNK = 1 << 24


class ValueStage:
    __slots__ = ("schemas", "topic", "show_secrets", "learn", "notices")

    def __init__(self, schemas, topic: str = DEFAULT_TOPIC, show_secrets: bool = False, learn: bool = True,
                 notices: WorkerNotices | None = None):
        self.schemas, self.topic, self.show_secrets, self.learn = schemas, topic, show_secrets, learn
        self.notices = notices

    def __call__(self, exchange: dict, topics=None, budget=None) -> None:
        api = exchange.get("api_key")
        if api == PRODUCE:
            batches = _produce_batches(exchange.get("request"))
        elif api == FETCH:
            batches = _fetch_batches(exchange.get("response"))
        else:
            return
        if self.learn:
            collected = SchemaRecords(self.topic)
            collected.exchange(exchange)
            if len(collected):
                feed_records(self.schemas.store, collected.records())
        if not len(self.schemas.store) and self.schemas.fallback is None:
            return  # nothing could decode: values stay as they are, at no cost
        for batch in batches:
            self._batch(batch)
        if self.notices is not None:
            self.notices.send(self.schemas)

    def _batch(self, batch) -> None:
        if not isinstance(batch, dict) or batch.get("is_control"):
            return
        records = batch.get("records")
        if isinstance(records, PackedRecords):
            unpacked = records.records()
            if self._records(unpacked):  # kept packed (the fast JSON path) when nothing is framed
                batch["records"] = unpacked
        elif isinstance(records, list):
            self._records(records)

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


def _produce_batches(request):
    if not isinstance(request, dict):
        return
    for entry in request.get("topic_data") or ():
        if isinstance(entry, dict):
            for part in entry.get("partition_data") or ():
                if isinstance(part, dict):
                    yield from part.get("records") or ()


def _fetch_batches(response):
    if not isinstance(response, dict):
        return
    for entry in response.get("responses") or ():
        if isinstance(entry, dict):
            for part in entry.get("partitions") or ():
                if isinstance(part, dict):
                    yield from part.get("records") or ()


def mentions(path: str, topic: str) -> bool:
    """Whether the capture file's bytes (gunzipped) hold the topic's name anywhere: a capture
    that never names it has none of its records, and needs no first pass. Only for regular files
    (a pipe read here would be gone for the decode itself)."""
    import gzip
    import mmap

    needle = topic.encode()
    try:
        with open(path, "rb") as f:
            if f.read(2) != b"\x1f\x8b":
                if not os.fstat(f.fileno()).st_size:
                    return False
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                    return mapped.find(needle) >= 0
        tail = b""
        with gzip.open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                if needle in tail + chunk[:len(needle)] or needle in chunk:
                    return True
                tail = chunk[-len(needle):]
    except (OSError, EOFError, ValueError):
        return True  # unreadable or damaged: let the pass itself say so
    return False
