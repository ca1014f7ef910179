"""Finishing decoded output on every core.

Capture reading, TCP reassembly, framing and pairing stay in one process (they are sequential by
nature); body decoding, record expansion and JSON encoding go to worker processes in chunks.
JSON lines given a ``sink`` are written by the workers themselves, each chunk when its turn
comes (chunk n after chunk n-1), so the output bytes never travel back through the main process;
other results come back to it in the original order. The chunks' raw payloads (the bulk of
what is handed over) go through a buffer the workers share (``_Ring``), not their pipe. Topic ids are named by the main process,
which decodes the few responses that carry both ids and names before it hands out the chunks
that follow them.

A worker that dies (the OOM killer, a signal) ends the run with WorkerDied within moments: the
other workers are stopped, whether they wait for the dead one's turn or not, and a line the dead
one was cut off writing is taken back when the output is a regular file.
"""

from __future__ import annotations

import os
import signal
import stat
import time
from collections import deque
from typing import Callable, Iterator, Protocol

from kinspect.decode.finish import JSON, RECORD, Finish
from kinspect.wire import messages
from kinspect.wire.exchange import RAW
from kinspect.wire.topics import TopicNames

LEARN_APIS = frozenset({3, 19, 75})   # Metadata, CreateTopics, DescribeTopicPartitions responses
CHUNK_RECORDS = 256
CHUNK_BYTES = 4 << 20
IN_FLIGHT_PER_JOB = 3
PIECE_BYTES = 1 << 20  # workers write whole lines, this much at a time
RING_BYTES = 48 << 20  # the payloads of the chunks in flight (see _Ring)


def default_jobs() -> int:
    """Worker processes to use: one per CPU beyond the one the main process keeps busy, and
    two on a two-CPU machine, where the workers share the second CPU with whatever the main
    process leaves. One CPU: no workers."""
    cpus = _cpus()
    return 1 if cpus < 2 else max(2, cpus - 1)


class Sink(Protocol):
    """Where JSON lines go (cli.output.Output is one). A sink whose fileno() is a regular file
    gets a line cut off by a dying worker taken back."""

    def write_line(self, line: bytes) -> None: ...
    def flush(self) -> None: ...
    # and optionally write_lines(pieces): whole lines in pieces, written without joining them


class WorkerDied(Exception):
    """A worker process ended before finishing its work: the output stops short."""

    def __init__(self, pid: int | None, exitcode: int | None, cut: bool):
        self.pid, self.exitcode = pid, exitcode
        self.cut = cut  # the last line written may be a part of one
        super().__init__(str(self))

    def __str__(self) -> str:
        pid = f" (pid {self.pid})" if self.pid is not None else ""
        return f"a decoding worker process{pid} died: {_how(self.exitcode)}"


def _how(exitcode: int | None) -> str:
    if exitcode is None:
        return "it ended abruptly"
    if exitcode >= 0:
        return f"it exited with status {exitcode}"
    try:
        name = signal.Signals(-exitcode).name
    except ValueError:
        name = "an unknown signal"
    hint = " (out of memory?)" if -exitcode == signal.SIGKILL else ""
    return f"killed by signal {-exitcode}, {name}{hint}"


def run_outputs(run, keep: Callable[[dict], bool], mode: str, jobs: int | None,
                progress: Callable[[int], None] | None = None, sink: Sink | None = None,
                stages: tuple = ()) -> Iterator[tuple]:
    """(output, has_error) for every record of a DecodeRun, finished (decode/finish.py) in order,
    using ``jobs`` processes; ``jobs`` None: in this process, until the work measured so far says
    that default_jobs() workers would finish the rest sooner (see Probe), then with them.
    ``keep``, ``mode`` and ``stages``: the finishing step's (finish.Finish).

    With a ``sink`` (JSON mode), the lines go to ``sink.write_line`` in order and the outputs
    yielded are None; without one, JSON outputs are the lines' bytes.

    Whatever ``jobs`` says, this process finishes records themselves (RECORD mode: text output; a
    batch too big to hold is a stream over the capture's bytes, which no worker could hand back)
    and lines for a sink without a file descriptor (lines a worker wrote to its copy of an
    in-memory stream would be lost)."""
    keep_heap()  # before any worker forks: they inherit it
    records = run.raw_records(progress)
    finish = Finish(run.topics, run.limits, keep=keep, mode=mode, stages=stages)
    if mode == RECORD or sink is not None and not _has_fd(sink) or jobs is not None and jobs <= 1:
        yield from _here(records, finish, sink)
        return
    if jobs is None:
        jobs = default_jobs()
        if jobs <= 1:
            yield from _here(records, finish, sink)
            return
        probe = Probe(run.size, jobs)
        yield from _here(records, finish, sink, probe)
        if not probe.switched:
            return
    if sink is not None:
        sink.flush()  # nothing of the main process's may follow the workers' lines
    yield from _parallel(records, run, finish, jobs, sink)


def _here(records: Iterator[dict], finish: Finish, sink: Sink | None,
          probe: Probe | None = None) -> Iterator[tuple]:
    """Records finished in this process, each a unit of its own (written before the next);
    with a ``probe``, only until it says to hand the rest to workers (``records`` then goes on
    from there)."""
    one = finish.record
    json_mode = finish.mode == JSON
    if probe is None:  # nothing to measure: no clock calls (two a record cost ~1 µs)
        for record in records:
            output, error = one(record)
            yield (_written(output, sink) if json_mode and output is not None else output), error
        return
    clock = time.thread_time
    started = clock()
    for record in records:
        read = clock()
        output, error = one(record)
        yield (_written(output, sink) if json_mode and output is not None else output), error
        now = clock()
        if probe.measured(record, read - started, now - read):
            return
        started = clock()


def _written(pieces, sink: Sink | None):
    """A JSON line's pieces: written to the sink (then None), or joined when there is none."""
    if sink is None:
        return b"".join(pieces)
    for piece in pieces:
        sink.write_line(piece)
    return None


class Probe:
    """Whether worker processes would finish the rest of a capture sooner than this one.

    Measured here, per byte of the exchanges read so far: the CPU time of reading, reassembly and
    pairing, which stays in this process, and of finishing (bodies, records, output), which
    workers take over, at WORKER_COST times the price (hand-over, colder caches); and the CPUs
    the rest of the machine left free meanwhile (/proc/stat). The rest of the capture is taken
    to cost the same per byte (as much again as read so far when its size is unknown, as from
    stdin). Workers start when they would save more than START_COST, with a margin: small
    captures, captures whose work is mostly reading, and busy machines stay in one process.

    How FIRST_LOOK and START_COST were fitted: tests/bench/README.md, "Tuning history".
    """

    FIRST_LOOK = 0.03   # s since the start before the first look
    LOOK_EVERY = 0.05   # s between looks; the CPUs free are those of the last WINDOW looks
    START_COST = 0.3    # s: starting the workers and the first chunks' wait
    WORKER_COST = 1.2
    MARGIN = 0.85

    def __init__(self, size: int | None, workers: int):
        self.size, self.workers = size, workers
        self.read_s = self.finish_s = 0.0
        self.done = 0
        self.switched = False
        self.started = time.perf_counter()
        self.next_look = self.started + self.FIRST_LOOK
        # (when, machine busy, this process's CPU) at the last looks: the window free_cpus reads
        self.looks = deque([(self.started, _machine_busy(), time.process_time())], maxlen=WINDOW)

    def measured(self, record: dict, read_s: float, finish_s: float) -> bool:
        """Adds one record's costs; whether to switch to workers now."""
        self.read_s += read_s
        self.finish_s += finish_s
        self.done += record.get("request_size", 0) + (record.get("response_size") or 0)
        now = time.perf_counter()
        if now < self.next_look or not self.done:
            return False
        self.next_look = now + self.LOOK_EVERY
        self.switched = self.pays(self.rest(), self.free_cpus(now))
        return self.switched

    def rest(self) -> float:
        """The rest of the capture, in multiples of what was read so far."""
        if self.size is None:
            return 1.0
        return max(self.size - self.done, 0) / self.done

    def free_cpus(self, now: float) -> float:
        """CPUs this process and its workers may count on: those the rest of the machine did not
        use in the last few looks."""
        cpus = _cpus()
        busy, own = _machine_busy(), time.process_time()
        then, busy_then, own_then = self.looks[0]
        self.looks.append((now, busy, own))
        if busy is None or busy_then is None:
            return float(cpus)
        others = (busy - busy_then - (own - own_then)) / (now - then)
        return max(1.0, cpus - max(others, 0.0))

    def pays(self, rest: float, free_cpus: float) -> bool:
        cpus = min(self.workers + 1, free_cpus)
        here = (self.read_s + self.finish_s) * rest
        there = max(self.read_s, (self.read_s + self.WORKER_COST * self.finish_s) / cpus) * rest
        return there + self.START_COST < here * self.MARGIN


WINDOW = 6


def _machine_busy() -> float | None:
    """Seconds of CPU time the whole machine has spent busy (Linux's /proc/stat; else None)."""
    try:
        with open("/proc/stat", "rb") as stat_file:
            fields = stat_file.readline().split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[1:9])
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq + steal) / _TICKS


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# -- the worker side --------------------------------------------------------------------------

_worker: dict = {}

# What the worker holding the turn has written: [file offset at the start of its chunk (-1 when
# the sink is not a regular file), bytes of whole lines written since, 1 while it writes]
START, DONE, WRITING = range(3)


def _init(finish: Finish, sink, turn, next_chunk, written, ring) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    topics = TopicNames()
    _worker.update(finish=finish.twin(topics), topics=topics, sink=sink, turn=turn, next=next_chunk,
                   written=written, ring=ring)


# glibc's mallopt parameters, and the values workers use
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
KEEP_FREE_HEAP, MMAP_FROM = 64 << 20, 16 << 20


def keep_heap() -> None:
    """Decoding allocates and frees buffers of up to megabytes all along (frames, decompressed
    batches, their JSON text). glibc hands the big ones back to the kernel as soon as they are
    free, and each new one is faulted in again: 140k page faults and 0.5 s of system time in two
    workers on the loopback capture, and 20k more in the main process that hands them frames.
    Buffers under MMAP_FROM now come from the heap, and up to KEEP_FREE_HEAP of it stays: 52k
    faults in the workers, 8% less wall time; 32k instead of 52k in the main process, 2-3% less
    (tests/bench). Set once in the main process, which the workers inherit it from. A Spark
    task's worker sets it too (spark/task.py): 45k faults instead of 65-85k on bench-1m.pcap, and
    3% less CPU. Nothing where the C library is not glibc."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_FROM)
    mallopt(M_TRIM_THRESHOLD, KEEP_FREE_HEAP)


def _work(task) -> list:
    index, names, chunk, placed = task
    if placed:
        _Ring.take(_worker["ring"], chunk, placed)
    _worker["topics"].names = names
    finish = _worker["finish"]
    mode = finish.mode
    finish.new_unit()  # the chunk's output is held until its turn: one unit
    held = finish.held
    results = []
    for number, record in enumerate(chunk):
        chunk[number] = None  # decoded records die once encoded: held, they cost +40% CPU in cache misses
        results.append(held(record))
    sink = _worker["sink"]
    if sink is None:
        return [(b"".join(o) if mode == JSON and o is not None else o, e) for o, e in results]
    lines = [output for output, _ in results if output is not None]
    turn, next_chunk = _worker["turn"], _worker["next"]
    with turn:
        turn.wait_for(lambda: next_chunk.value == index)
        try:
            if lines:
                _write(sink, lines, _worker["written"])
        finally:  # a failed write still hands the turn on: the main process sees the error
            next_chunk.value = index + 1
            turn.notify_all()
    return [(None, error) for _, error in results]


def _write(sink: Sink, lines: list, written) -> None:
    """Whole lines, PIECE_BYTES at a time, counted in ``written`` as they are flushed; a line
    in many pieces (streamed batches) is written piece by piece as they are encoded."""
    fd = _regular_file(sink)
    written[START] = os.lseek(fd, 0, os.SEEK_CUR) if fd is not None else -1
    written[DONE] = 0
    written[WRITING] = 1
    held: list[bytes] = []
    size = 0
    for line in lines:
        if type(line) is list and size < PIECE_BYTES:
            held += line
            size += sum(map(len, line))
            continue
        if held:
            _flush(sink, held, size, written)
            held, size = [], 0
        if type(line) is list:
            held, size = line, sum(map(len, line))
            continue
        streamed = 0
        for piece in line:
            sink.write_line(piece)
            streamed += len(piece)
        _flush(sink, [], streamed, written)
    if held:
        _flush(sink, held, size, written)
    written[WRITING] = 0


def _flush(sink: Sink, held: list[bytes], size: int, written) -> None:
    if len(held) > 1 and hasattr(sink, "write_lines"):
        sink.write_lines(held)  # no join: written as they are (cli.output's os.writev)
    elif held:
        sink.write_line(b"".join(held) if len(held) > 1 else held[0])
    sink.flush()
    written[DONE] += size


def _has_fd(sink: Sink) -> bool:
    try:
        sink.fileno()
        return True
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return False


def _regular_file(sink: Sink) -> int | None:
    try:
        fd = sink.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (AttributeError, OSError, ValueError):
        return None


def _take_back(sink: Sink, written) -> bool:
    """Drop what a dead worker wrote after its last whole line; False when that can't be done
    (a pipe, a terminal) and a part of a line may be out."""
    if not written[WRITING]:
        return True
    fd = _regular_file(sink)
    if fd is None or written[START] < 0:
        return False
    end = written[START] + written[DONE]
    try:
        if os.lseek(fd, 0, os.SEEK_CUR) > end:
            os.ftruncate(fd, end)
            os.lseek(fd, end, os.SEEK_SET)
    except OSError:
        return False
    return True


# -- the main side ----------------------------------------------------------------------------

def _raw_size(raw: list) -> int:
    """Payload bytes an exchange carries raw (exchange.RAW): its request, and its response if any."""
    return len(raw[0]) + (len(raw[2]) if raw[2] is not None else 0)


def _chunks(records: Iterator[dict], topics: TopicNames) -> Iterator[tuple[dict, list]]:
    chunk: list = []
    size = 0
    for record in records:
        raw = record.get(RAW)
        if raw is not None:
            size += _raw_size(raw)
            if record["api_key"] in LEARN_APIS and raw[2] is not None:
                body, _ = messages.decode_body(record["api_key"], record["api_version"], "response",
                                               raw[2], start=raw[3])
                before = dict(topics.names)
                topics.learn(record["api_key"], body)
                if topics.names != before and chunk:
                    # names learned here reach this record and those after it, not those before
                    yield before, chunk
                    chunk, size = [], 0
        chunk.append(record)
        if len(chunk) >= CHUNK_RECORDS or size >= CHUNK_BYTES:
            yield dict(topics.names), chunk
            chunk, size = [], 0
    if chunk:
        yield dict(topics.names), chunk


class _Forks:
    """The fork context, keeping every worker process it starts: their exit codes say which one
    died, even once multiprocessing has reaped it."""

    def __init__(self):
        import multiprocessing  # with the modules below, only once workers start: -j1 never does

        self.context = multiprocessing.get_context("fork")
        self.started: list = []

    def __getattr__(self, name):
        return getattr(self.context, name)

    def Process(self, *args, **kwargs):
        process = self.context.Process(*args, **kwargs)
        self.started.append(process)
        return process


def _parallel(records, run, finish: Finish, jobs, sink) -> Iterator[tuple]:
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    context = _Forks()
    turn, next_chunk = context.Condition(), context.Value("q", 0, lock=False)
    written = context.Array("q", 3, lock=False)
    ring = _Ring(RING_BYTES)  # mapped before the workers fork: theirs too
    pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_init,
                               initargs=(finish, sink, turn, next_chunk, written, ring.buf))
    workers = context.started
    pending: deque = deque()  # (future, its chunk's ring region or None), oldest first
    try:
        for index, (names, chunk) in enumerate(_chunks(records, run.topics)):
            size = _Ring.payload_bytes(chunk)
            while pending and not ring.fits(size):  # room made as the oldest chunks come back
                future, region = pending.popleft()
                yield from future.result()
                ring.release(region)
            region, placed = ring.put(chunk, size)
            pending.append((pool.submit(_work, (index, names, chunk, placed)), region))
            while len(pending) >= jobs * IN_FLIGHT_PER_JOB:
                future, region = pending.popleft()
                yield from future.result()
                ring.release(region)
        while pending:
            future, region = pending.popleft()
            yield from future.result()
            ring.release(region)
    except BrokenProcessPool:
        pool.shutdown(wait=True)  # the pool has stopped the other workers: exit codes are final
        pid, exitcode = _first_dead(workers)
        raise WorkerDied(pid, exitcode, cut=sink is not None and not _take_back(sink, written)
                         ) from None
    finally:
        for worker in workers:  # workers still at work or waiting for a turn that won't come
            if worker.exitcode is None:
                worker.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


class _Ring:
    """The raw payloads of the chunks in flight, in a buffer shared with the workers (an anonymous
    shared mapping made before they fork). Pickled through the pool's pipe, the loopback bench
    capture's 322 MB were copied five times (pickle, pipe write, pipe read, its buffer, unpickle)
    in a thousand small writes, and the pool's feeder thread held the main process's GIL for the
    pickling; through the ring they are copied twice, into it and out of it in the worker
    (tests/bench). Chunks take contiguous regions in order, and a region is free again once its
    chunk's result is back: the worker copies its payloads out before it starts. A chunk larger
    than the whole ring goes through the pipe as before."""

    def __init__(self, size: int):
        import mmap

        self.buf = mmap.mmap(-1, size)
        self.size = size
        self.head = 0  # where the next region starts, unless it must wrap to 0
        self.regions: deque = deque()  # (start, end) in flight, oldest first

    @staticmethod
    def payload_bytes(chunk: list) -> int:
        return sum(_raw_size(record[RAW]) for record in chunk if RAW in record)

    def _start(self, size: int) -> int | None:
        """Where a region of ``size`` bytes fits now, or None."""
        if not self.regions:
            return 0 if size <= self.size else None
        oldest = self.regions[0][0]
        if self.head > oldest:  # in use: [oldest, head)
            if size <= self.size - self.head:
                return self.head
            return 0 if size < oldest else None
        return self.head if size < oldest - self.head else None  # in use: [oldest, end) and [0, head)

    def fits(self, size: int) -> bool:
        """Whether a chunk of ``size`` payload bytes can be handed over now: placed in the ring,
        or (none, or more than the whole ring) sent through the pipe."""
        return size == 0 or size > self.size or self._start(size) is not None

    def put(self, chunk: list, size: int) -> tuple[tuple[int, int] | None, list]:
        """Moves ``chunk``'s payloads into the ring: (its region or None, [(record number, field
        number, start, length)] for the worker's ``take``); a chunk that cannot fit stays as it is."""
        start = self._start(size) if 0 < size <= self.size else None
        if start is None:
            return None, []
        buf = self.buf
        placed = []
        at = start
        for number, record in enumerate(chunk):
            raw = record.get(RAW)
            if raw is None:
                continue
            for field in (0, 2):
                payload = raw[field]
                if payload is None:
                    continue
                length = len(payload)
                buf[at:at + length] = payload
                placed.append((number, field, at, length))
                raw[field] = None
                at += length
        region = (start, at)
        self.regions.append(region)
        self.head = at
        return region, placed

    def release(self, region: tuple[int, int] | None) -> None:
        if region is not None:
            self.regions.popleft()
            if not self.regions:
                self.head = 0

    @staticmethod
    def take(buf, chunk: list, placed: list) -> None:
        """The worker's side: the payloads back into their records, as bytes."""
        for number, field, start, length in placed:
            chunk[number][RAW][field] = buf[start:start + length]


def _first_dead(workers: list) -> tuple[int | None, int | None]:
    """The worker that took the pool down: one not stopped by the pool's own SIGTERM if any."""
    dead = [w for w in workers if w.exitcode not in (None, 0)]
    dead.sort(key=lambda w: w.exitcode == -signal.SIGTERM)
    return (dead[0].pid, dead[0].exitcode) if dead else (None, None)
