"""The relay → decoder pipe (proxy/tap.py) and pipeline.py's stream-source seam: real clients'
connections, fed as a proxy feeds them, decode to what decode makes of the capture; a decoder
that falls behind gets gaps of exactly the bytes it missed, and says so."""

import json
import os
import threading

from kinspect.decode.pipeline import DecodeRun
from kinspect.proxy.tap import CLIENT, SERVER, PipeSource, Tap
from kinspect.render.jsonl import dumps
from tests.conftest import PCAPS
from tests.unit.proxy.streams import connections

NAME, PORT = "librdkafka-produce-consume.pcapng", 42347


class PipeTransport:
    """The face of asyncio's write-pipe transport the Tap uses, over a blocking fd."""

    def __init__(self, fd, backlog=0):
        self.fd, self.backlog = fd, backlog

    def write(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def get_write_buffer_size(self):
        return self.backlog

    def close(self):
        os.close(self.fd)


def _ip(raw):
    return ".".join(map(str, raw))


def _feed(tap, conns, skip_conn=None):
    """Every connection through the tap in capture order; None: the decoder is behind for skip_conn."""
    order = sorted(((ts, i, flow, direction, data) for flow, conn in conns.items()
                    for i, (direction, ts, data) in enumerate(conn["events"])), key=lambda e: (e[0], e[1]))
    ids = {flow: n for n, flow in enumerate(conns, 1)}
    opened = set()
    for ts, _i, flow, direction, data in order:
        conn = ids[flow]
        if conn not in opened:
            opened.add(conn)
            tap.open(conn, ts, (_ip(flow[0]), flow[1]), (_ip(flow[2]), flow[3]))
        if conn == skip_conn and direction == SERVER:
            tap.transport.backlog = tap.limit  # the pipe is full for this one chunk
            tap.data(conn, direction, ts, data)
            tap.transport.backlog = 0
            continue
        tap.data(conn, direction, ts, data)
    for flow, conn in ids.items():
        tap.end(conn, CLIENT, 0.0)
        tap.end(conn, SERVER, 0.0)
    tap.close()


def _decode_through_pipe(conns, skip_conn=None):
    read_fd, write_fd = os.pipe()
    tap = Tap(PipeTransport(write_fd), lambda delay, f: None, limit=1 << 30)
    feeder = threading.Thread(target=lambda: (_feed(tap, conns, skip_conn), None))
    feeder.start()
    source = PipeSource(read_fd)
    run = DecodeRun(source, pending_timeout=3600)
    records = [json.loads(dumps(r)) for r in run.records()]
    feeder.join()
    return records, source, tap


def _key(r):
    """What a pipe and a capture of the same bytes must agree on: not times, and not the capture's
    frame numbers (a pipe has no packets)."""
    return {k: v for k, v in r.items() if k not in ("request_time", "response_time", "latency_ms", "time",
                                                     "request_frames", "response_frames")}


def test_streams_through_the_pipe_decode_as_the_capture_does():
    conns = connections(NAME, PORT)
    records, source, tap = _decode_through_pipe(conns)
    expected = [json.loads(dumps(r)) for r in DecodeRun(str(PCAPS / NAME)).records()]
    exchanges = [_key(r) for r in records if r["type"] == "exchange"]
    assert len(exchanges) > 30
    assert not any("request_frames" in r or "response_frames" in r for r in records)
    assert sorted(map(json.dumps, exchanges)) == sorted(json.dumps(_key(r)) for r in expected if r["type"] == "exchange")
    assert source.skipped == 0 and tap.skipped_bytes == 0


def test_a_decoder_behind_gets_a_gap_of_the_bytes_it_missed():
    conns = connections(NAME, PORT)
    victim = 2
    flow = list(conns)[victim - 1]
    first_server_chunk = next(data for direction, _, data in conns[flow]["events"] if direction == SERVER)
    records, source, tap = _decode_through_pipe(conns, skip_conn=victim)
    assert tap.skipped_bytes == source.skipped == sum(
        len(data) for direction, _, data in conns[flow]["events"] if direction == SERVER)
    assert tap.skipped_chunks == sum(1 for d, _, _ in conns[flow]["events"] if d == SERVER)
    assert len(first_server_chunk) > 0
    gaps = [r for r in records if r["type"] == "notice" and r["kind"] == "gap"]
    assert gaps and all(r["conn"].endswith(f":{PORT}") for r in gaps)
    missing = sum(int(r["what"].split()[0]) for r in gaps if r["what"].split()[0].isdigit())
    assert missing == tap.skipped_bytes
    # the other connections decode whole
    label = f"{_ip(flow[0])}:{flow[1]}-{_ip(flow[2])}:{flow[3]}"
    others = [r for r in records if r["type"] == "exchange" and r["conn"] != label]
    assert others and all(r["response"] is not None or r["api_name"] == "Produce" for r in others)


def test_the_pipe_writer_keeps_a_backlog_in_order_and_closes_after_writing_it():
    import asyncio

    from kinspect.proxy.tap import PipeWriter

    pieces = [bytes([i % 251]) * (1000 + 37 * i) for i in range(600)]  # 7.2 MB: far past the pipe's capacity
    read_fd, write_fd = os.pipe()
    received = bytearray()

    def reader():
        while chunk := os.read(read_fd, 1 << 16):
            received.extend(chunk)
        os.close(read_fd)

    async def main():
        writer = PipeWriter(write_fd, asyncio.get_running_loop())
        for piece in pieces:
            writer.write(piece)
        backlog = writer.get_write_buffer_size()
        thread = threading.Thread(target=reader)
        thread.start()
        writer.close()
        await asyncio.wait_for(writer.closed, 30)
        await asyncio.to_thread(thread.join)
        return backlog, writer.get_write_buffer_size()

    backlog, left = asyncio.run(main())
    assert backlog > 1 << 20 and left == 0
    assert bytes(received) == b"".join(pieces)


class _Written(PipeTransport):
    def __init__(self):
        super().__init__(None)
        self.writes = []

    def write(self, data):
        self.writes.append(bytes(data))

    def close(self):
        pass


class _Timers:
    """The loop's call_later, run by hand: ``fire(upto)`` runs the timers due by then."""

    def __init__(self):
        self.pending: list = []

    def call_later(self, delay, callback):
        handle = _Handle(delay, callback)
        self.pending.append(handle)
        return handle

    def fire(self, upto: float) -> None:
        due = [h for h in self.pending if h.delay <= upto and not h.cancelled]
        self.pending = [h for h in self.pending if h not in due and not h.cancelled]
        for handle in due:
            handle.callback()


class _Handle:
    def __init__(self, delay, callback):
        self.delay, self.callback, self.cancelled = delay, callback, False

    def cancel(self):
        self.cancelled = True


def test_copies_wait_a_moment_for_more_and_a_full_batch_goes_at_once():
    """The decoder must not wake inside a request's round trip: a few copies are written
    FLUSH_AFTER later, together; past FLUSH_BYTES they go on the loop's next turn."""
    from kinspect.proxy.tap import FLUSH_AFTER, FLUSH_BYTES

    timers, pipe = _Timers(), _Written()
    tap = Tap(pipe, timers.call_later)
    tap.data(1, CLIENT, 0.0, b"request")
    tap.data(1, SERVER, 0.0, b"response")
    assert [h.delay for h in timers.pending] == [FLUSH_AFTER]  # one timer for both copies
    timers.fire(FLUSH_AFTER / 4)
    assert pipe.writes == []
    timers.fire(FLUSH_AFTER)
    assert len(pipe.writes) == 1 and b"request" in pipe.writes[0] and pipe.writes[0].endswith(b"response")
    tap.data(1, CLIENT, 0.0, b"small")
    tap.data(1, CLIENT, 0.0, bytes(FLUSH_BYTES))
    assert [h.delay for h in timers.pending if not h.cancelled] == [0]
    timers.fire(0)
    assert len(pipe.writes) == 2 and pipe.writes[1].endswith(bytes(FLUSH_BYTES)) and b"small" in pipe.writes[1]
    timers.fire(FLUSH_AFTER * 2)
    assert len(pipe.writes) == 2  # the cancelled timer wrote nothing more
    tap.data(1, CLIENT, 0.0, b"last")
    tap.close()
    assert pipe.writes[-1].endswith(b"last")
    assert timers.pending and all(h.cancelled for h in timers.pending)  # close() leaves no flush behind


def test_copies_are_flushed_by_the_loops_own_timer():
    """The same with asyncio's call_later: what the relay passes in run.py."""
    import asyncio

    from kinspect.proxy.tap import FLUSH_AFTER

    async def main():
        pipe = _Written()
        tap = Tap(pipe, asyncio.get_running_loop().call_later)
        tap.data(1, CLIENT, 0.0, b"request")
        for _ in range(1000):  # however late the loop runs, the timer fires
            await asyncio.sleep(FLUSH_AFTER)
            if pipe.writes:
                break
        assert pipe.writes == [pipe.writes[0]] and pipe.writes[0].endswith(b"request")

    asyncio.run(main())


def test_told_to_stop_the_source_decodes_nothing_more_and_counts_what_is_left(monkeypatch):
    """tap.stop_now (the decoder's STOP_SIGNAL handler) after the first stream event: the source
    ends, every byte still in the pipe counted in ``left``, none of them decoded."""
    import kinspect.proxy.tap as tap_module

    monkeypatch.setattr(tap_module, "_stopping", [False])
    read_fd, write_fd = os.pipe()
    tap = Tap(PipeTransport(write_fd), lambda delay, fn: None)
    tap.open(1, 1.0, ("10.0.0.1", 40000), ("10.0.0.2", 9092))
    for i in range(8):
        tap.data(1, CLIENT, 1.0 + i, b"x" * 1000)
    tap.flush()
    os.close(write_fd)
    source = PipeSource(read_fd)
    events = []
    for event in source.streams():
        events.append(event)
        tap_module.stop_now()
    os.close(read_fd)
    assert len(events) == 1  # the open, then nothing
    header, endpoints = tap_module.HEADER.size, 2 * (1 + 4 + 2)
    assert source.left == 8 * (header + 1000) and source.bytes_read == header + endpoints + source.left


def test_aborting_the_pipe_says_how_many_bytes_it_dropped():
    import asyncio

    from kinspect.proxy.tap import PipeWriter

    async def case():
        read_fd, write_fd = os.pipe()
        writer = PipeWriter(write_fd, asyncio.get_running_loop())
        data = b"y" * (4 << 20)  # more than the pipe holds
        writer.write(data)
        queued = writer.get_write_buffer_size()
        dropped = writer.abort()
        in_pipe = 0
        while chunk := os.read(read_fd, 1 << 20):
            in_pipe += len(chunk)
        os.close(read_fd)
        return queued, dropped, in_pipe, writer.closed.done()

    queued, dropped, in_pipe, closed = asyncio.run(case())
    assert queued > 0 and dropped == queued and in_pipe + dropped == 4 << 20 and closed
