"""The relay's copy of its bytes for the decoder, over a pipe to another process.

The relay writes each chunk to its peer first, then hands a copy to the ``Tap``, which gathers
copies into one write on the pipe: at once past FLUSH_BYTES, else FLUSH_AFTER later, so that the
decoder never wakes inside a request's round trip at low load. When the pipe's backlog
passes ``limit`` bytes the decoder has fallen behind: chunks are skipped (counted per direction)
and the next chunk that fits is preceded by a gap of that many bytes, which the Kafka session
reports as a notice and resynchronises after. The relay never waits for the decoder.

``PipeSource`` is the other end: a StreamSource (capture/stream.py) reading the pipe. When the relay
stops, the decoder's backlog has until --drain-timeout's end: then the relay drops what it still
queues (``PipeWriter.abort``, counted) and sends the decoder SIGUSR1 (``stop_now``), after which
``PipeSource`` decodes nothing more, counts what is left in the pipe (``left``) and ends, so that
the decoder finishes with what it has.

Records on the pipe: kind (u8), connection id (u32), time (f64), length (u32), then ``length``
bytes (the data; the missing byte count of a gap is the length field, with no bytes following).
"""

from __future__ import annotations

import fcntl
import itertools
import os
import select
import signal
import socket
import struct
import time
from collections import deque
from typing import Iterator

from kinspect.capture.stream import TICK, StreamData, StreamEnd, StreamGap, StreamOpen

HEADER = struct.Struct("<BIdI")
OPEN, CLIENT, SERVER, CLIENT_GAP, SERVER_GAP, CLIENT_END, SERVER_END = range(7)
GAP = {CLIENT: CLIENT_GAP, SERVER: SERVER_GAP}
END = {CLIENT: CLIENT_END, SERVER: SERVER_END}
STOP_SIGNAL = signal.SIGUSR1  # the relay to the decoder: finish now with what you have
DEFAULT_LIMIT = 64 << 20   # bytes waiting for the decoder before it skips
FLUSH_BYTES = 256 << 10    # gathered copies written to the pipe at once
FLUSH_AFTER = 0.002        # seconds fewer copies wait for more
TICK_EVERY = 0.25          # seconds without input between the source's ticks


class PipeWriter:
    """The relay's end of the pipe, non-blocking, on the event loop. asyncio's own write-pipe
    transport keeps its backlog in one bytearray and deletes each written piece from its front,
    moving the whole backlog every 64 KB (tens of MB at a time when the decoder is behind, which
    cost the relay a CPU); here the backlog is a deque of pieces, written with writev."""

    PIPE_SIZE = 1 << 20  # asked of the kernel (F_SETPIPE_SZ); fewer wake-ups of both processes

    def __init__(self, fd: int, loop):
        os.set_blocking(fd, False)
        try:
            fcntl.fcntl(fd, 1031, self.PIPE_SIZE)  # F_SETPIPE_SZ (Linux)
        except OSError:
            pass
        self.fd, self.loop = fd, loop
        self.queue: deque = deque()
        self.size = 0
        self.closing = False
        self.closed = loop.create_future()

    def get_write_buffer_size(self) -> int:
        return self.size

    def write(self, data: bytes) -> None:
        if self.closed.done():
            return
        if self.queue:
            self.queue.append(data)
            self.size += len(data)
            return
        try:
            n = os.write(self.fd, data)
        except BlockingIOError:
            n = 0
        except OSError:  # the decoder is gone
            self._finish()
            return
        if n < len(data):
            self.queue.append(memoryview(data)[n:])
            self.size += len(data) - n
            self.loop.add_writer(self.fd, self._drain)

    def _drain(self) -> None:
        queue = self.queue
        try:
            n = os.writev(self.fd, list(itertools.islice(queue, 0, 256)))
        except BlockingIOError:
            return
        except OSError:
            self._finish()
            return
        self.size -= n
        while n:
            head = queue[0]
            if len(head) <= n:
                n -= len(head)
                queue.popleft()
            else:
                queue[0] = memoryview(head)[n:]
                n = 0
        if not queue:
            self.loop.remove_writer(self.fd)
            if self.closing:
                self._finish()

    def close(self) -> None:
        """Close once the backlog is written (``closed`` is then done)."""
        self.closing = True
        if not self.queue:
            self._finish()

    def abort(self) -> int:
        """Close now, the backlog dropped (the relay stopped on an error, or the decoder's time is
        up); returns how many bytes were dropped."""
        dropped = self.size
        self._finish()
        return dropped

    def _finish(self) -> None:
        if self.closed.done():
            return
        self.loop.remove_writer(self.fd)
        self.queue.clear()
        self.size = 0
        os.close(self.fd)
        self.closed.set_result(None)


def _endpoint(host: str, port: int) -> bytes:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    ip = socket.inet_pton(family, host.split("%")[0])
    return struct.pack("<B", len(ip)) + ip + struct.pack("<H", port)


class Tap:
    """Relay side. ``transport``: a PipeWriter (or any object with write(), close() and
    get_write_buffer_size()); ``call_later``: the loop's."""

    def __init__(self, transport, call_later, limit: int = DEFAULT_LIMIT):
        self.transport = transport
        self.call_later = call_later
        self.limit = limit
        self.pieces: list = []
        self.queued = 0
        self.timer = None   # the pending flush's handle
        self.soon = False   # it runs on the loop's next turn (FLUSH_BYTES gathered)
        self.skipped: dict[tuple[int, int], int] = {}  # (connection, direction) -> bytes not yet told
        self.skipped_bytes = 0     # in all
        self.skipped_chunks = 0
        self.dropped = 0           # bytes queued for the decoder when its time was up (run.py), dropped
        self.closed = False

    def _put(self, piece: bytes) -> None:
        self.pieces.append(piece)
        self.queued += len(piece)
        if self.queued >= FLUSH_BYTES:
            if not self.soon:
                self._schedule(0)
        elif self.timer is None:
            self._schedule(FLUSH_AFTER)

    def _schedule(self, delay: float) -> None:
        self._cancel()
        self.timer = self.call_later(delay, self.flush)
        self.soon = delay == 0

    def _cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer, self.soon = None, False

    def flush(self) -> None:
        self._cancel()
        if self.pieces and not self.closed:
            self.transport.write(b"".join(self.pieces))
        self.pieces.clear()
        self.queued = 0

    def open(self, conn: int, ts: float, client: tuple[str, int], server: tuple[str, int]) -> None:
        payload = _endpoint(*client) + _endpoint(*server)
        self._put(HEADER.pack(OPEN, conn, ts, len(payload)) + payload)

    def data(self, conn: int, direction: int, ts: float, data: bytes) -> None:
        if self.closed:
            return
        if self.queued + self.transport.get_write_buffer_size() + len(data) > self.limit:
            key = (conn, direction)
            self.skipped[key] = self.skipped.get(key, 0) + len(data)
            self.skipped_bytes += len(data)
            self.skipped_chunks += 1
            return
        if self.skipped:
            missing = self.skipped.pop((conn, direction), 0)
            if missing:
                self._put(HEADER.pack(GAP[direction], conn, ts, missing))
        self._put(HEADER.pack(direction, conn, ts, len(data)))
        self._put(data)

    def end(self, conn: int, direction: int, ts: float) -> None:
        if self.closed:
            return
        missing = self.skipped.pop((conn, direction), 0)
        if missing:
            self._put(HEADER.pack(GAP[direction], conn, ts, missing))
        self._put(HEADER.pack(END[direction], conn, ts, 0))

    def close(self) -> None:
        self.flush()
        self.closed = True
        self.transport.close()


def _flow(payload: bytes) -> tuple:
    n = payload[0]
    client_ip, (client_port,) = payload[1:1 + n], struct.unpack_from("<H", payload, 1 + n)
    at = 3 + n
    m = payload[at]
    server_ip, (server_port,) = payload[at + 1:at + 1 + m], struct.unpack_from("<H", payload, at + 1 + m)
    return (bytes(client_ip), client_port, bytes(server_ip), server_port)


_stopping = [False]  # STOP_SIGNAL came: PipeSource reads on only to count what is left


def stop_now(signum=None, frame=None) -> None:
    """STOP_SIGNAL's handler in the decoder's process (kinspect.proxy.run installs it)."""
    _stopping[0] = True


class PipeSource:
    """Decoder side: a StreamSource over the pipe's read end (a file descriptor, closed at the end)."""

    size = None
    LEFT_WAIT = 0.1  # seconds the count of what is left waits for more before it ends

    def __init__(self, fd: int, tick_every: float = TICK_EVERY):
        self.fd = fd
        self.tick_every = tick_every
        self.problems: list = []
        self.bytes_read = 0
        self.skipped = 0  # bytes the relay did not give to the decoder (the gaps' sum)
        self.left = 0     # bytes of the pipe not decoded because the decoder was told to stop

    def _count_left(self, buffered: int) -> None:
        self.left += buffered
        while True:
            ready, _, _ = select.select([self.fd], [], [], self.LEFT_WAIT)
            if not ready:
                return
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return
            self.bytes_read += len(chunk)
            self.left += len(chunk)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            os.close(self.fd)
        except OSError:
            pass

    def streams(self) -> Iterator[tuple]:
        flows: dict[int, list] = {}  # connection -> [client flow, ends seen (1 client, 2 server)]
        buf = bytearray()
        at = 0
        size = HEADER.size
        while True:
            if _stopping[0]:
                self._count_left(len(buf) - at)
                break
            ready, _, _ = select.select([self.fd], [], [], self.tick_every)
            if not ready:
                yield (time.time(), TICK)
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                break
            self.bytes_read += len(chunk)
            if at:
                del buf[:at]
                at = 0
            buf += chunk
            end = len(buf)
            while end - at >= size and not _stopping[0]:
                kind, conn, ts, length = HEADER.unpack_from(buf, at)
                if kind in (CLIENT_GAP, SERVER_GAP, CLIENT_END, SERVER_END):
                    at += size
                    entry = flows.get(conn)
                    if entry is None:
                        continue
                    flow = entry[0]
                    if kind == SERVER_GAP or kind == SERVER_END:
                        flow = (flow[2], flow[3], flow[0], flow[1])
                    if kind == CLIENT_GAP or kind == SERVER_GAP:
                        self.skipped += length
                        yield StreamGap(flow, ts, length)
                    else:
                        entry[1] |= 1 if kind == CLIENT_END else 2
                        if entry[1] == 3:
                            del flows[conn]
                        yield StreamEnd(flow, ts, "closed")
                    continue
                if end - at < size + length:
                    break
                payload = bytes(buf[at + size:at + size + length])
                at += size + length
                if kind == OPEN:
                    flow = _flow(payload)
                    flows[conn] = [flow, 0]
                    yield StreamOpen(flow, ts)
                    continue
                entry = flows.get(conn)
                if entry is None:
                    continue
                flow = entry[0]
                if kind == SERVER:
                    flow = (flow[2], flow[3], flow[0], flow[1])
                yield StreamData(flow, ts, payload)
