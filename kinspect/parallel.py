"""Finishing decoded output on every core.

Capture reading, TCP reassembly, framing and pairing stay in one process (they are sequential by
nature); body decoding, record expansion and JSON encoding go to worker processes in chunks.
JSON lines given a ``sink`` are written by the workers themselves, each chunk when its turn
comes (chunk n after chunk n-1), so the output bytes never travel back through the main process;
other results come back to it in the original order. Topic ids are named by the main process,
which decodes the few responses that carry both ids and names before it hands out the chunks
that follow them.

A worker that dies (the OOM killer, a signal) ends the run with WorkerDied within moments: the
other workers are stopped, whether they wait for the dead one's turn or not, and a line the dead
one was cut off writing is taken back when the output is a regular file.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import stat
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterator, Protocol

from kinspect.filters import topics_of
from kinspect.limits import Budget
from kinspect.render.jsonl import pieces
from kinspect.wire import messages
from kinspect.wire.exchange import RAW, complete
from kinspect.wire.topics import TopicNames

LEARN_APIS = frozenset({3, 19, 75})   # Metadata, CreateTopics, DescribeTopicPartitions responses
CHUNK_RECORDS = 256
CHUNK_BYTES = 4 << 20
IN_FLIGHT_PER_JOB = 3
PIECE_BYTES = 1 << 20  # workers write whole lines, this much at a time

JSON, SUMMARY, RECORD = "json", "summary", "record"


def finish(record: dict, topics: TopicNames, keep: Callable[[dict], bool], mode: str,
           budget: Budget | None = None):
    """(output or None when filtered out, whether the record has an error problem). A JSON
    output is the line's pieces: one, or more written as they are encoded when the record holds
    batches too big to hold (see render.jsonl.pieces)."""
    if RAW in record:
        complete(record, topics, budget)
    problems = record.get("problems")
    error = bool(problems) and any(p.get("severity") == "error" for p in problems)
    if not keep(record):
        return None, error
    if mode == JSON:
        return pieces(record, newline=True), error
    if mode == SUMMARY and record.get("type") == "exchange":
        slim = {k: v for k, v in record.items() if k not in ("request", "response")}
        slim["_topics"] = sorted(topics_of(record)) if record["error_codes"] else []
        return slim, error
    return record, error


def default_jobs() -> int:
    """Worker processes by default: one per CPU beyond the one the main process keeps busy, and
    two on a two-CPU machine, where the workers share the second CPU with whatever the main
    process leaves (tests/bench/results: on 2 vCPUs, -j2 finished in ~0.65x the wall time of
    -j1, for ~1.3x its CPU time). One CPU: no workers."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return 1 if cpus < 2 else max(2, cpus - 1)


class Sink(Protocol):
    """Where JSON lines go (cli.output.Output is one). A sink whose fileno() is a regular file
    gets a line cut off by a dying worker taken back."""

    def write_line(self, line: bytes) -> None: ...
    def flush(self) -> None: ...


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


def finished(run, keep: Callable[[dict], bool], mode: str, jobs: int,
             progress: Callable[[int], None] | None = None, sink: Sink | None = None
             ) -> Iterator[tuple]:
    """(output, has_error) for every record of a DecodeRun, in order, using ``jobs`` processes.

    With a ``sink`` (JSON mode), the lines go to ``sink.write_line`` in order and the outputs
    yielded are None; without one, JSON outputs are the lines' bytes."""
    if jobs <= 1:
        topics = run.topics
        budget = Budget(run.limits, pack_records=mode != RECORD)
        for record in run.raw_records(progress):
            budget.next_unit()  # the record before this one is written out
            output, error = finish(record, topics, keep, mode, budget)
            if mode == JSON and output is not None:
                if sink is None:
                    output = b"".join(output)
                else:
                    for piece in output:
                        sink.write_line(piece)
                    output = None
            yield output, error
        return
    if sink is not None:
        sink.flush()  # nothing of the main process's may follow the workers' lines
    yield from _parallel(run, keep, mode, jobs, progress, sink)


# -- the worker side --------------------------------------------------------------------------

_worker: dict = {}

# What the worker holding the turn has written: [file offset at the start of its chunk (-1 when
# the sink is not a regular file), bytes of whole lines written since, 1 while it writes]
START, DONE, WRITING = range(3)


def _init(keep, mode, sink, turn, next_chunk, written, limits) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    _worker.update(keep=keep, mode=mode, topics=TopicNames(), sink=sink, turn=turn, next=next_chunk,
                   written=written, limits=limits)


def _work(task) -> list:
    index, names, chunk = task
    topics = _worker["topics"]
    topics.names = names
    keep, mode = _worker["keep"], _worker["mode"]
    # the chunk's output is held until its turn: one unit
    budget = Budget(_worker["limits"], pack_records=mode != RECORD)
    results = []
    for number, record in enumerate(chunk):
        chunk[number] = None  # decoded records die once encoded: held, they cost +40% CPU in cache misses
        results.append(finish(record, topics, keep, mode, budget))
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
    if held:
        sink.write_line(b"".join(held) if len(held) > 1 else held[0])
    sink.flush()
    written[DONE] += size


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

def _chunks(run, progress) -> Iterator[tuple[dict, list]]:
    topics = run.topics
    chunk: list = []
    size = 0
    for record in run.raw_records(progress):
        raw = record.get(RAW)
        if raw is not None:
            size += len(raw[0]) + (len(raw[2]) if raw[2] is not None else 0)
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
        self.context = multiprocessing.get_context("fork")
        self.started: list = []

    def __getattr__(self, name):
        return getattr(self.context, name)

    def Process(self, *args, **kwargs):
        process = self.context.Process(*args, **kwargs)
        self.started.append(process)
        return process


def _parallel(run, keep, mode, jobs, progress, sink) -> Iterator[tuple]:
    context = _Forks()
    turn, next_chunk = context.Condition(), context.Value("q", 0, lock=False)
    written = context.Array("q", 3, lock=False)
    pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_init,
                               initargs=(keep, mode, sink, turn, next_chunk, written, run.limits))
    workers = context.started
    pending: deque = deque()
    try:
        for index, (names, chunk) in enumerate(_chunks(run, progress)):
            pending.append(pool.submit(_work, (index, names, chunk)))
            while len(pending) >= jobs * IN_FLIGHT_PER_JOB:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
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


def _first_dead(workers: list) -> tuple[int | None, int | None]:
    """The worker that took the pool down: one not stopped by the pool's own SIGTERM if any."""
    dead = [w for w in workers if w.exitcode not in (None, 0)]
    dead.sort(key=lambda w: w.exitcode == -signal.SIGTERM)
    return (dead[0].pid, dead[0].exitcode) if dead else (None, None)
