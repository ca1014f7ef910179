"""Finishing decoded output on every core.

Capture reading, TCP reassembly, framing and pairing stay in one process (they are sequential by
nature); body decoding, record expansion and JSON encoding go to worker processes in chunks.
JSON lines given a ``sink`` are written by the workers themselves, each chunk when its turn
comes (chunk n after chunk n-1), so the output bytes never travel back through the main process;
other results come back to it in the original order. Topic ids are named by the main process,
which decodes the few responses that carry both ids and names before it hands out the chunks
that follow them.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from typing import Callable, Iterator, Protocol

from kinspect.filters import topics_of
from kinspect.render.jsonl import dumpb
from kinspect.wire import messages
from kinspect.wire.exchange import RAW, complete
from kinspect.wire.topics import TopicNames

LEARN_APIS = frozenset({3, 19, 75})   # Metadata, CreateTopics, DescribeTopicPartitions responses
CHUNK_RECORDS = 256
CHUNK_BYTES = 4 << 20
IN_FLIGHT_PER_JOB = 3

JSON, SUMMARY, RECORD = "json", "summary", "record"


def finish(record: dict, topics: TopicNames, keep: Callable[[dict], bool], mode: str):
    """(output or None when filtered out, whether the record has an error problem)."""
    if RAW in record:
        complete(record, topics)
    problems = record.get("problems")
    error = bool(problems) and any(p.get("severity") == "error" for p in problems)
    if not keep(record):
        return None, error
    if mode == JSON:
        return dumpb(record, newline=True), error
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
    """Where JSON lines go (cli.output.Output is one)."""

    def write_line(self, line: bytes) -> None: ...
    def flush(self) -> None: ...


def finished(run, keep: Callable[[dict], bool], mode: str, jobs: int,
             progress: Callable[[int], None] | None = None, sink: Sink | None = None
             ) -> Iterator[tuple]:
    """(output, has_error) for every record of a DecodeRun, in order, using ``jobs`` processes.

    With a ``sink`` (JSON mode), the lines go to ``sink.write_line`` in order and the outputs
    yielded are None."""
    if jobs <= 1:
        topics = run.topics
        for record in run.raw_records(progress):
            output, error = finish(record, topics, keep, mode)
            if sink is not None and output is not None:
                sink.write_line(output)
                output = None
            yield output, error
        return
    if sink is not None:
        sink.flush()  # nothing of the main process's may follow the workers' lines
    yield from _parallel(run, keep, mode, jobs, progress, sink)


# -- the worker side --------------------------------------------------------------------------

_worker: dict = {}


def _init(keep, mode, sink, turn, next_chunk) -> None:
    _worker.update(keep=keep, mode=mode, topics=TopicNames(), sink=sink, turn=turn, next=next_chunk)


def _work(task) -> list:
    index, names, chunk = task
    topics = _worker["topics"]
    topics.names = names
    keep, mode = _worker["keep"], _worker["mode"]
    results = [finish(record, topics, keep, mode) for record in chunk]
    sink = _worker["sink"]
    if sink is None:
        return results
    lines = b"".join(output for output, _ in results if output is not None)
    turn, next_chunk = _worker["turn"], _worker["next"]
    with turn:
        turn.wait_for(lambda: next_chunk.value == index)
        try:
            if lines:
                sink.write_line(lines)
                sink.flush()
        finally:  # a failed write still hands the turn on: the main process sees the error
            next_chunk.value = index + 1
            turn.notify_all()
    return [(None, error) for _, error in results]


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


def _parallel(run, keep, mode, jobs, progress, sink) -> Iterator[tuple]:
    context = multiprocessing.get_context("fork")
    turn, next_chunk = context.Condition(), context.Value("q", 0, lock=False)
    pool = context.Pool(jobs, initializer=_init, initargs=(keep, mode, sink, turn, next_chunk))
    pending: deque = deque()
    try:
        for index, (names, chunk) in enumerate(_chunks(run, progress)):
            pending.append(pool.apply_async(_work, ((index, names, chunk),)))
            while len(pending) >= jobs * IN_FLIGHT_PER_JOB:
                yield from pending.popleft().get()
        while pending:
            yield from pending.popleft().get()
        pool.close()
    finally:
        pool.terminate()
        pool.join()
