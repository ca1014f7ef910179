"""Worker processes give exactly the output of one process, in the same order."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections import deque

import pytest

from kinspect.decode.filters import ExchangeFilter
from kinspect.decode.finish import JSON, RECORD, SUMMARY
from kinspect.decode.parallel import WorkerDied, run_outputs
from kinspect.decode.pipeline import DecodeRun
from tests.conftest import PCAPS, REALDATA

CAPTURES = sorted(PCAPS.glob("*.pcap*")) + [REALDATA / "ndpi/kafka.pcapng"]


def outputs(path, jobs, mode=JSON, keep=None, monkeypatch=None):
    run = DecodeRun(path)
    return list(run_outputs(run, keep or ExchangeFilter(), mode, jobs))


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_parallel_json_is_byte_identical(path, monkeypatch):
    monkeypatch.setattr("kinspect.decode.parallel.CHUNK_RECORDS", 3)  # many chunks, many hand-overs
    assert outputs(path, 2) == outputs(path, 1)


def test_parallel_summary_and_filters(monkeypatch):
    monkeypatch.setattr("kinspect.decode.parallel.CHUNK_RECORDS", 2)
    path = PCAPS / "librdkafka-produce-consume.pcapng"
    keep = ExchangeFilter(topics=["lab-librdkafka"], errors_only=False)
    assert outputs(path, 2, SUMMARY, keep) == outputs(path, 1, SUMMARY, keep)
    assert [o for o, _ in outputs(path, 2, JSON, keep) if o is not None]


def test_text_records_are_finished_here_whatever_jobs_says(tmp_path, monkeypatch):
    """A batch too big to hold is a stream over the capture's bytes: no worker could hand it back
    (decode -j2 of a million tiny records was an internal error)."""
    from tests.hostile import inputs

    def no_workers(*args):
        raise AssertionError("text records went to worker processes")
    monkeypatch.setattr("kinspect.decode.parallel._parallel", no_workers)
    for path in (PCAPS / "librdkafka-produce-consume.pcapng", inputs.amplified_produce_v9(tmp_path)):
        here = outputs(path, 1, RECORD)
        asked = outputs(path, 2, RECORD)
        assert [(r["type"], r.get("conn"), r.get("correlation_id"), e) for r, e in asked] == \
            [(r["type"], r.get("conn"), r.get("correlation_id"), e) for r, e in here] and here


def test_lines_for_a_sink_without_a_file_descriptor_are_written_here(monkeypatch):
    """Workers write their lines themselves: to an in-memory stream they would write their own
    copies (decode under click's CliRunner lost all but the first lines when a garbage
    collection during the first record made the probe switch to workers)."""
    class Memory:
        def __init__(self):
            self.lines = []

        def write_line(self, line):
            self.lines.append(bytes(line))

        def flush(self):
            pass

    def no_workers(*args):
        raise AssertionError("lines for an in-memory sink went to worker processes")
    monkeypatch.setattr("kinspect.decode.parallel._parallel", no_workers)
    path = PCAPS / "librdkafka-produce-consume.pcapng"
    sink = Memory()
    assert all(output is None for output, _ in run_outputs(DecodeRun(path), ExchangeFilter(), JSON, 2, sink=sink))
    assert sink.lines == [line for line, _ in outputs(path, 1)] and len(sink.lines) > 50


def test_topic_names_learned_before_a_chunk_reach_it(monkeypatch):
    # Fetch v16 names topics by id only; the Metadata response before it names them.
    monkeypatch.setattr("kinspect.decode.parallel.CHUNK_RECORDS", 1)
    path = PCAPS / "librdkafka-produce-consume.pcapng"
    lines = [o for o, _ in outputs(path, 2) if o is not None and b'"api_name":"Fetch"' in o]
    assert lines and all(b'"topic":"lab-librdkafka"' in line for line in lines)


class FileSink:
    """Lines to a file: forked workers share its descriptor (and so its offset)."""

    def __init__(self, path):
        self.file = open(path, "ab")

    def write_line(self, line: bytes) -> None:
        self.file.write(line)

    def flush(self) -> None:
        self.file.flush()

    def fileno(self) -> int:
        return self.file.fileno()


def sunk(path, jobs, out_file) -> tuple[bytes, list]:
    sink = FileSink(out_file)
    results = list(run_outputs(DecodeRun(path), ExchangeFilter(), JSON, jobs, sink=sink))
    sink.file.close()
    return out_file.read_bytes(), results


@pytest.mark.parametrize("name", ["librdkafka-produce-consume.pcapng", "java-transactions.pcap",
                                  "kafka39-legacy-mtu1500.pcapng"])
def test_workers_write_their_lines_in_order(name, tmp_path, monkeypatch):
    monkeypatch.setattr("kinspect.decode.parallel.CHUNK_RECORDS", 2)  # many chunks, many turns
    one, one_results = sunk(PCAPS / name, 1, tmp_path / "one.jsonl")
    many, many_results = sunk(PCAPS / name, 3, tmp_path / "many.jsonl")
    assert one and many == one
    assert one == b"".join(o for o, _ in outputs(PCAPS / name, 1) if o is not None)
    assert all(output is None for output, _ in one_results + many_results)
    assert [e for _, e in many_results] == [e for _, e in one_results]


def test_a_failing_write_reaches_the_main_process(tmp_path, monkeypatch):
    monkeypatch.setattr("kinspect.decode.parallel.CHUNK_RECORDS", 2)

    class Broken(FileSink):
        def write_line(self, line: bytes) -> None:
            raise BrokenPipeError("reader went away")

    with pytest.raises(BrokenPipeError):
        list(run_outputs(DecodeRun(PCAPS / "librdkafka-produce-consume.pcapng"), ExchangeFilter(), JSON, 2,
                      sink=Broken(tmp_path / "x")))


# -- a worker that dies --------------------------------------------------------------------------

class Deadline:
    """Fails the test instead of hanging: SIGALRM interrupts a wait in the main thread."""

    def __init__(self, seconds: int):
        self.seconds = seconds

    def __enter__(self):
        def expired(signum, frame):
            raise TimeoutError(f"still waiting after {self.seconds} s")
        self.previous = signal.signal(signal.SIGALRM, expired)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.previous)
        return False


class DyingSink(FileSink):
    """Lines to a file; the worker writing chunk ``at`` SIGKILLs itself, having written ``part``
    of its first piece (None: before its turn, while the others wait for it)."""

    def __init__(self, path, at: int, part: float | None):
        super().__init__(path)
        self.main, self.at, self.part, self.pieces = os.getpid(), at, part, 0

    def write_line(self, line: bytes) -> None:
        self.pieces += 1
        if os.getpid() != self.main and self.pieces == self.at:
            self.file.write(line[: int(len(line) * self.part)])
            self.file.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        self.file.write(line)


def one_process_lines(name) -> list[bytes]:
    return [o for o, _ in outputs(PCAPS / name, 1) if o is not None]


def test_a_worker_killed_mid_line_leaves_whole_lines_in_a_file(tmp_path, monkeypatch):
    monkeypatch.setattr("kinspect.decode.parallel.CHUNK_RECORDS", 2)
    monkeypatch.setattr("kinspect.decode.parallel.PIECE_BYTES", 1)  # a piece per line: some lines get out
    name = "librdkafka-produce-consume.pcapng"
    sink = DyingSink(tmp_path / "out.jsonl", at=5, part=0.5)
    with Deadline(60), pytest.raises(WorkerDied) as died:
        list(run_outputs(DecodeRun(PCAPS / name), ExchangeFilter(), JSON, 2, sink=sink))
    sink.file.close()
    assert died.value.exitcode == -signal.SIGKILL and not died.value.cut
    assert "killed by signal 9, SIGKILL (out of memory?)" in str(died.value)
    assert f"(pid {died.value.pid})" in str(died.value) and died.value.pid != os.getpid()
    written = (tmp_path / "out.jsonl").read_bytes()
    lines = written.splitlines(keepends=True)
    assert written.endswith(b"\n") and len(lines) >= 2  # the half line was taken back
    assert lines == one_process_lines(name)[: len(lines)]


def test_a_worker_killed_before_its_turn_stops_the_others_waiting_for_it(tmp_path, monkeypatch):
    monkeypatch.setattr("kinspect.decode.parallel.CHUNK_RECORDS", 2)
    name = "librdkafka-produce-consume.pcapng"
    sink = DyingSink(tmp_path / "out.jsonl", at=3, part=0.0)
    with Deadline(60), pytest.raises(WorkerDied) as died:
        list(run_outputs(DecodeRun(PCAPS / name), ExchangeFilter(), JSON, 3, sink=sink))
    sink.file.close()
    assert died.value.exitcode == -signal.SIGKILL and not died.value.cut
    written = (tmp_path / "out.jsonl").read_bytes()
    assert written == b"".join(one_process_lines(name))[: len(written)] and written.endswith(b"\n")
    assert not multiprocessing.active_children()  # every worker stopped and joined


def test_a_worker_killed_mid_line_on_a_pipe_is_reported_as_cut(monkeypatch):
    monkeypatch.setattr("kinspect.decode.parallel.CHUNK_RECORDS", 2)
    read_end, write_end = os.pipe()

    def drain():
        while os.read(read_end, 1 << 16):
            pass

    reader = threading.Thread(target=drain)
    sink = DyingSink(os.devnull, at=2, part=0.5)
    sink.file = os.fdopen(write_end, "wb")
    reader.start()
    with Deadline(60), pytest.raises(WorkerDied) as died:
        list(run_outputs(DecodeRun(PCAPS / "librdkafka-produce-consume.pcapng"), ExchangeFilter(), JSON, 2,
                      sink=sink))
    sink.file.close()
    reader.join(10)
    os.close(read_end)
    assert died.value.cut  # a pipe can't take back what went out


def test_a_worker_stopped_by_another_signal_is_named(tmp_path):
    class Signalled(DyingSink):
        def write_line(self, line: bytes) -> None:
            if os.getpid() != self.main:
                os.kill(os.getpid(), signal.SIGUSR1)

    sink = Signalled(tmp_path / "out.jsonl", at=1, part=None)
    with Deadline(60), pytest.raises(WorkerDied) as died:
        list(run_outputs(DecodeRun(PCAPS / "librdkafka-produce-consume.pcapng"), ExchangeFilter(), JSON, 2,
                      sink=sink))
    assert "killed by signal 10, SIGUSR1" in str(died.value) and "memory" not in str(died.value)


# -- the default: one process until the measured work says workers pay ------------------------

class Switch:
    """Stands in for Probe.pays: says yes at its ``at``-th look."""

    def __init__(self, at: int):
        self.at, self.looks = at, 0

    def __call__(self, rest, free_cpus):
        self.looks += 1
        return self.looks >= self.at


@pytest.mark.parametrize("name", ["librdkafka-produce-consume.pcapng", "java-transactions.pcap"])
@pytest.mark.parametrize("mode", [JSON, SUMMARY])
def test_switching_to_workers_midway_changes_nothing(name, mode, tmp_path, monkeypatch):
    monkeypatch.setattr("kinspect.decode.parallel.CHUNK_RECORDS", 2)
    monkeypatch.setattr("kinspect.decode.parallel.Probe.FIRST_LOOK", 0.0)
    monkeypatch.setattr("kinspect.decode.parallel.Probe.LOOK_EVERY", 0.0)
    switch = Switch(at=5)
    monkeypatch.setattr("kinspect.decode.parallel.Probe.pays", lambda probe, rest, free: switch(rest, free))
    started = []
    monkeypatch.setattr("kinspect.decode.parallel._parallel", _counting(started))
    assert outputs(PCAPS / name, None, mode) == outputs(PCAPS / name, 1, mode)
    assert switch.looks == 5 and started == [1]  # switched at the 5th record, then workers
    switch.looks = 0
    one, _ = sunk(PCAPS / name, 1, tmp_path / "one.jsonl")
    auto, results = sunk(PCAPS / name, None, tmp_path / "auto.jsonl")
    assert auto == one and all(output is None for output, _ in results)


def _counting(started: list):
    from kinspect.decode import parallel
    real = parallel._parallel

    def counted(*args):
        started.append(1)
        yield from real(*args)
    return counted


def test_small_captures_stay_in_one_process(monkeypatch):
    started = []
    monkeypatch.setattr("kinspect.decode.parallel._parallel", _counting(started))
    monkeypatch.setattr("kinspect.decode.parallel.Probe.FIRST_LOOK", 0.0)
    path = PCAPS / "librdkafka-produce-consume.pcapng"
    assert outputs(path, None) == outputs(path, 1) and not started


def test_the_probe_weighs_the_rest_against_the_cost_of_starting():
    from kinspect.decode.parallel import Probe
    probe = Probe(size=1000 << 20, workers=2)
    probe.read_s, probe.finish_s, probe.done = 0.02, 0.08, 10 << 20   # 1% read: 99 more to come
    assert probe.rest() == pytest.approx(99)
    assert probe.pays(probe.rest(), free_cpus=2.0)
    assert not probe.pays(probe.rest(), free_cpus=1.0)       # the other CPU is taken: no gain
    assert not probe.pays(0.5, free_cpus=2.0)                # too little left to pay the start
    probe.read_s, probe.finish_s = 0.09, 0.01                # reading is the work: it stays here
    assert not probe.pays(99, free_cpus=2.0)
    unknown = Probe(size=None, workers=2)
    unknown.done = 1
    assert unknown.rest() == 1.0                             # stdin: as much again as read so far


def test_free_cpus_count_what_the_rest_of_the_machine_uses(monkeypatch):
    from kinspect.decode import parallel
    clock = iter([0.0, 1.0])
    machine = iter([100.0, 101.5])  # 1.5 CPU-seconds busy in that second
    monkeypatch.setattr(parallel, "_machine_busy", lambda: next(machine))
    monkeypatch.setattr(parallel.time, "process_time", lambda: next(clock))
    monkeypatch.setattr(parallel, "_cpus", lambda: 2)
    probe = parallel.Probe(size=None, workers=2)
    # this process used 1.0 of the 1.5: the others 0.5, so 1.5 CPUs are free
    assert probe.free_cpus(probe.started + 1.0) == pytest.approx(1.5)


# -- the ring the payloads go through -----------------------------------------------------------

def _chunk(*sizes):
    return [{"_raw": [bytes([n % 251]) * n, 0, None if n % 2 else b"r" * n, 0, False]} for n in sizes]


def test_ring_regions_follow_in_order_wrap_and_free_as_results_come_back():
    from kinspect.decode.parallel import _Ring

    def put(ring, *sizes):  # odd sizes: requests without a response
        chunk = _chunk(*sizes)
        return ring.put(chunk, _Ring.payload_bytes(chunk))[0]

    ring = _Ring(100)
    first = put(ring, 21, 29)
    assert first == (0, 50) and ring.fits(50) and not ring.fits(51)
    second = put(ring, 25, 25)
    assert second == (50, 100) and not ring.fits(1)
    ring.release(first)                        # [50, 100) in use: [0, 50) free, less one byte
    assert ring.fits(49) and not ring.fits(50)
    third = put(ring, 49)
    assert third == (0, 49) and not ring.fits(1)
    ring.release(second)                       # [0, 49) in use
    assert ring.fits(51) and not ring.fits(52)
    fourth = put(ring, 51)
    assert fourth == (49, 100)
    ring.release(third)
    ring.release(fourth)
    assert ring.regions == deque() and ring.head == 0 and ring.fits(100)
    assert ring.fits(101)                      # larger than the ring: through the pipe, no wait
    assert put(ring, 101) is None


def test_ring_hands_the_worker_the_same_bytes():
    from kinspect.decode.parallel import _Ring

    ring = _Ring(1000)
    chunk = _chunk(3, 8, 0, 13)
    before = [list(r["_raw"]) for r in chunk]
    region, placed = ring.put(chunk, _Ring.payload_bytes(chunk))
    assert region == (0, 3 + 8 + 8 + 13) and all(r["_raw"][0] is None for r in chunk if r["_raw"][0] is not None)
    _Ring.take(ring.buf, chunk, placed)
    assert [r["_raw"] for r in chunk] == before


@pytest.mark.parametrize("ring_bytes", [1, 4096, 65536])
def test_a_small_ring_wraps_waits_and_falls_back_to_the_pipe_with_the_same_output(ring_bytes, monkeypatch):
    monkeypatch.setattr("kinspect.decode.parallel.CHUNK_RECORDS", 3)
    monkeypatch.setattr("kinspect.decode.parallel.RING_BYTES", ring_bytes)
    path = PCAPS / "librdkafka-produce-consume.pcapng"
    assert outputs(path, 2) == outputs(path, 1)
