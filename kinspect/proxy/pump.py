"""Plaintext links relayed in C (kinspect/native/_relay.c), the twin of relay.py's asyncio Link.

The event loop accepts and connects as before; then both sockets go to the Pump, whose thread
relays every byte without the GIL. At ~150 µs a request, asyncio's two wake-ups per hop were most
of the proxy's added latency (tests/bench/bench_proxy.py, against socat). Python keeps all the
rest, from the pump's events, in the order the bytes went:
- DATA: a copy of what was sent on, fed to the same Requests and Responses a Link follows (for
  draining and the closing counts) and to the tap;
- HOLD: a response that may carry broker addresses, or, after a SaslHandshake v0, any response
  bytes: Responses rewrites it as for a Link, and ``release`` sends the result;
- EOF, ERROR, CLOSED: the log's reasons and the tap's ends; REFUSED: a frame past --max-held-mb.

TLS on either side stays on asyncio (the pump sees only plaintext sockets).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections import deque

from kinspect import native
from kinspect.proxy.link import Link, connected, never
from kinspect.proxy.rewrite import carries_addresses
from kinspect.proxy.tap import CLIENT, SERVER

_relay = native.relay
if _relay is not None:
    DATA, HOLD, EOF, ERROR, CLOSED = _relay.DATA, _relay.HOLD, _relay.EOF, _relay.ERROR, _relay.CLOSED
    REFUSED, DRAINED, DRAINING = _relay.REFUSED, _relay.DRAINED, _relay.DRAINING


def available() -> bool:
    return _relay is not None


class PumpedLink(Link):
    """A Link whose bytes the pump relays: the same counts, log lines and draining."""

    def __init__(self, proxy, conn: int, node, upstream, client: socket.socket):
        super().__init__(proxy, conn, node, upstream)
        self.early = None
        self.sock = client
        self.added = False
        self.fds: tuple[int, int] | None = None
        self.wants = self.responses.wants_whole
        self.responses.wants_whole = never  # DATA copies went on already: follow them only
        try:
            host, port = client.getpeername()[:2]
            self.label = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        except OSError:
            pass

    def accepted(self, side=None) -> None:
        self.proxy.links[self.conn] = self
        self.proxy.tasks.add(task := asyncio.ensure_future(self._connect()))
        task.add_done_callback(self.proxy.tasks.discard)

    async def _connect(self) -> None:
        proxy = self.proxy
        server = None
        try:
            if self.upstream is None:
                raise OSError("it left the metadata")
            host, port = self.upstream
            server = await asyncio.wait_for(connected(proxy.loop, host, port), proxy.options.connect_timeout)
        except (OSError, asyncio.TimeoutError, ValueError, OverflowError) as e:  # UnicodeError too
            reason = "timed out" if isinstance(e, asyncio.TimeoutError) else (getattr(e, "strerror", None) or str(e))
            proxy.log(f"#{self.conn} {self.label}: cannot connect to {self._target()}: {reason}; closing the client")
            self.closed_by = "proxy (broker unreachable)"
            self.sock.close()
            proxy.closed(self)
            return
        if self.draining:  # stopping before the broker answered the connect
            server.close()
            self.sock.close()
            proxy.closed(self)
            return
        for sock in (self.sock, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        proxy.tap_open(self.conn, self.sock.getpeername(), self.sock.getsockname())
        via = server.getsockname()
        proxy.log(f"#{self.conn} {self.label} -> {self._target()} from {via[0]}:{via[1]}: connected")
        self.fds = (self.sock.detach(), server.detach())  # the pump's from here
        proxy.pump.add(self.conn, *self.fds)
        self.added = True

    # -- the pump's events -----------------------------------------------------------------

    def copied(self, direction: int, ts: float, data: bytes) -> None:
        if direction == CLIENT:
            self.requests.feed(data)
            self.up += len(data)
        else:
            self.responses.feed(data)
            self.down += len(data)
        self.proxy.tap_data(self.conn, direction, data, ts)

    def counted(self, direction: int, size: int) -> None:
        """A copy past the deadline: its bytes counted, not followed, not decoded."""
        if direction == CLIENT:
            self.up += size
        else:
            self.down += size
        self.proxy.tap_dropped(direction, size)

    def hand_over(self, ts: float, data: bytes) -> None:
        self.responses.wants_whole = self.wants
        try:
            out = self.responses.feed(data)
        finally:
            self.responses.wants_whole = never
        self.proxy.pump.release(self.conn, out)
        self.down += len(out)
        if out:
            self.proxy.tap_data(self.conn, SERVER, out, ts)

    def ended_side(self, direction: int) -> None:
        bit = 1 if direction == CLIENT else 2
        if not self.ended & bit:
            self.ended |= bit
            self.proxy.tap_end(self.conn, direction)

    def broke(self, direction: int, errno: int) -> None:
        if self.closed_by is None:
            who = "client" if direction == CLIENT else "broker"
            self.closed_by = f"{who} ([Errno {errno}] {os.strerror(errno)})"

    def gone(self, not_forwarded: int) -> None:
        self.not_forwarded = not_forwarded
        for direction in (CLIENT, SERVER):
            self.ended_side(direction)
        self.responses.release()
        self.proxy.closed(self)

    # -- what the proxy asks ---------------------------------------------------------------

    def quiet(self) -> bool:
        return self.stopped_reading and super().quiet()

    def drain(self) -> None:
        """The pump stops reading the client after the request under way; what was in flight is
        marked (mark_stop) when its DRAINED or DRAINING event comes, after every earlier copy."""
        self.draining = True
        if self.added:
            self.proxy.pump.drain(self.conn)
        else:  # nothing is in flight before the broker answered the connect
            self.mark_stop()
            self.closed_by = "proxy (stopping before the broker answered the connect)"
            self.sock.close()
            self.proxy.closed(self)

    def close(self) -> None:
        if self.added:
            self.proxy.pump.close(self.conn)


SLICE_SECONDS = 0.02  # time spent on the pump's events per turn of the event loop (see Pumps.dispatch)


class Pumps:
    """The pump of a Proxy: its accepting listeners and the dispatch of its events.

    The pump queues up to 64 MiB of copies at once; following a client's tiny frames in them took
    Python 0.3-1.5 s a MiB (a busy machine), all in one callback, and SIGTERM waited 10-17 s for
    the loop to turn. They are handled for SLICE_SECONDS at a time instead (at least one event, a
    read of at most 128 KiB), one slice a turn of the loop (the pump's eventfd is not watched while
    a slice waits: it would run a second one), so that a signal, a new client or a response to
    rewrite waits no longer than that. Once the time to
    stop is past (``stop(late=True)``), what is left is only counted: its bytes were relayed, and
    are not decoded."""

    def __init__(self, proxy):
        self.proxy = proxy
        self.pump = _relay.Pump(proxy.options.max_held)
        self.pending: deque = deque()  # events taken from the pump, not yet handled
        self.watching = False
        self.scheduled = False  # the next slice is on the loop's next turn
        self.ended = False
        self.late = False
        self._watch(True)

    def _watch(self, on: bool) -> None:
        if on and not self.watching and not self.ended:
            self.proxy.loop.add_reader(self.pump.fileno(), self.dispatch)
        elif not on and self.watching:
            self.proxy.loop.remove_reader(self.pump.fileno())
        self.watching = on

    def listen(self, node, sock: socket.socket) -> "Listener":
        return Listener(self.proxy, node, sock)

    def dispatch(self) -> None:
        """Handles the pump's events, at most SLICE_BYTES of copies now; the rest on the loop's
        next turn (before any newer event: the pump's eventfd is read only by events())."""
        pending = self.pending
        if not pending:
            pending.extend(self.pump.events())
        until = time.monotonic() + SLICE_SECONDS
        while pending:
            self._handle(*pending.popleft())
            if not self.late and time.monotonic() >= until:
                break
        if pending:
            self._watch(False)
            if not self.scheduled and not self.ended:
                self.scheduled = True
                self.proxy.loop.call_soon(self._next_slice)
        else:
            self._watch(True)

    def _next_slice(self) -> None:
        self.scheduled = False
        self.dispatch()

    def _handle(self, kind, conn, direction, ts, data, n, api_key, api_version) -> None:
        proxy = self.proxy
        if kind == REFUSED:
            proxy.held.refused += 1
            proxy.held.refused_bytes += n
            proxy._not_held(n, (api_key, api_version))
            return
        link = proxy.links.get(conn)
        if link is None:
            return
        if kind == DATA:
            if self.late:
                link.counted(direction, len(data))
            else:
                link.copied(direction, ts, data)
        elif kind == HOLD:
            if self.late:  # the pump is stopped: nothing is sent any more
                link.counted(SERVER, len(data))
            else:
                link.hand_over(ts, data)
        elif kind == EOF:
            if link.closed_by is None:
                link.closed_by = "client (end of stream)" if direction == CLIENT else "broker (end of stream)"
            link.ended_side(direction)
        elif kind == ERROR:
            link.broke(direction, n)
        elif kind == DRAINED:
            link.mark_stop()
            link.stopped_reading = True
            link.not_forwarded = n
        elif kind == DRAINING:
            link.mark_stop()
        elif kind == CLOSED:
            link.gone(n)

    async def stopped(self, links: list, deadline: float) -> None:
        """Until every link in ``links`` has its state at the stop marked (or is gone)."""
        loop = self.proxy.loop
        while loop.time() < deadline:
            self.dispatch()
            if all(link.at_stop is not None or link.conn not in self.proxy.links for link in links):
                return
            await asyncio.sleep(0.001)

    def stop(self, deadline: float) -> None:
        """The pump stops; its last events are handled, those left at ``deadline`` (the loop's
        time) only counted."""
        self._watch(False)
        self.ended = True
        self.pump.stop()
        loop = self.proxy.loop
        while True:
            self.late = loop.time() >= deadline
            self.dispatch()
            if not self.pending:
                self.pending.extend(self.pump.events())
                if not self.pending:
                    return


ACCEPT_RETRY = 0.1  # seconds before accepting again after running out of descriptors


class Listener:
    """A listening socket whose connections go to the pump (asyncio's Server, as far as Proxy
    uses one)."""

    def __init__(self, proxy, node, sock: socket.socket):
        self.proxy, self.node, self.sock = proxy, node, sock
        self.retry = None
        proxy.loop.add_reader(sock.fileno(), self._ready)

    def _ready(self) -> None:
        proxy = self.proxy
        while True:
            try:
                client, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                # out of descriptors (or memory): the connection waits in the backlog, and the
                # listener, still readable, would be called again at once, for ever; it is
                # left alone a moment instead, as asyncio's own servers do
                proxy.warnings.warn(("accept", e.errno), f"cannot accept a connection: {e.strerror or e}; "
                                    f"trying again every {ACCEPT_RETRY:g} s", "failed accepts")
                proxy.loop.remove_reader(self.sock.fileno())
                self.retry = proxy.loop.call_later(ACCEPT_RETRY, self._again)
                return
            client.setblocking(False)
            proxy.next_conn += 1
            link = PumpedLink(proxy, proxy.next_conn, self.node, proxy.upstream_of(self.node), client)
            proxy.counters.connections += 1
            proxy.counters.open += 1
            proxy.idle.clear()
            link.accepted()

    def _again(self) -> None:
        self.retry = None
        if self.sock.fileno() >= 0:
            self.proxy.loop.add_reader(self.sock.fileno(), self._ready)

    def close(self) -> None:
        if self.retry is not None:
            self.retry.cancel()
            self.retry = None
        if self.sock.fileno() >= 0:
            self.proxy.loop.remove_reader(self.sock.fileno())
            self.sock.close()
