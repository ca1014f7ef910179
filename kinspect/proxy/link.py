"""One client's link to its broker on asyncio: two protocols (``Side``) that pass every byte
between the client and the broker, following the frames both ways (frames.py) for draining and
for the responses rewritten (rewrite.py); a copy of each chunk goes to the proxy's tap.

The proxy's listeners (relay.py) make the links; pump.py's PumpedLink is the same link with its
bytes relayed in C. See relay.py for half-closes, breaks and draining.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time

from kinspect.proxy.frames import Requests, Responses
from kinspect.proxy.rewrite import carries_addresses
from kinspect.proxy.tap import CLIENT, SERVER

WRITE_HIGH = 1 << 20   # bytes buffered for a side before its peer stops being read
HOST_SHOWN = 64        # characters of a broker's host in a log line


def _peer(transport) -> str:
    info = transport.get_extra_info("peername")
    if not info:
        return "?"
    host, port = info[0], info[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Side(asyncio.Protocol):
    """One socket of a link: the client's (CLIENT) or the broker's (SERVER)."""

    def __init__(self, link: "Link", direction: int):
        self.link = link
        self.direction = direction
        self.transport = None
        self.tls = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.tls = transport.get_extra_info("sslcontext") is not None
        transport.set_write_buffer_limits(high=WRITE_HIGH)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # asyncio leaves Nagle on for accepted sockets: a small response would wait for the
            # client's delayed ACK (5 ms at p50 for a paced librdkafka producer)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.direction == CLIENT:
            # until the broker's side is connected; uvloop (0.23) still reads once after
            # connection_made, and that chunk is kept (Link.early) rather than lost
            transport.pause_reading()
            self.link.accepted(self)

    def data_received(self, data: bytes) -> None:
        self.link.received(self.direction, data)

    def eof_received(self):
        keep_open = self.link.eof(self.direction)
        # A TLS transport cannot stay half open: asyncio answers the peer's end (close_notify, or
        # the TCP end) by closing, whatever this returns, and warned of a true answer once per
        # TLS client. It closes as a break does (Link.lost: the partner writes what it holds).
        return None if self.tls else keep_open

    def pause_writing(self) -> None:
        self.link.peer_of(self.direction).pause()

    def resume_writing(self) -> None:
        self.link.peer_of(self.direction).resume()

    def pause(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.transport is not None and not self.transport.is_closing() and not (
                self.direction == CLIENT and self.link.stopped_reading):
            self.transport.resume_reading()

    def connection_lost(self, exc) -> None:
        self.link.lost(self.direction, exc)


class Link:
    """A client's connection and the proxy's connection to its broker; ``proxy`` is the
    relay.Proxy whose listener accepted it."""

    def __init__(self, proxy, conn: int, node: int | None, upstream: tuple[str, int]):
        self.proxy = proxy
        self.conn = conn
        self.node = node  # None: the bootstrap listener
        self.upstream = upstream
        self.client = Side(self, CLIENT)
        self.server = Side(self, SERVER)
        self.requests = Requests(proxy.pending)
        rewrite = proxy.options.rewrite
        self.responses = Responses(self.requests, carries_addresses if rewrite else never, proxy.rewrite, proxy.held)
        self.closed_by: str | None = None
        self.early: list | None = []  # what the client sent before its broker was connected
        self.draining = False
        self.stopped_reading = False  # draining, between two requests: the client is read no more
        self.not_forwarded = 0        # bytes of new requests received while draining, dropped
        self.at_stop: tuple | None = None  # mark_stop()
        self.ended = 0
        self.lost_sides = 0
        self.up = self.down = 0
        self.started = time.monotonic()
        self.label = "?"

    def peer_of(self, direction: int) -> Side:
        return self.server if direction == CLIENT else self.client

    def accepted(self, side: Side) -> None:
        self.label = _peer(side.transport)
        self.proxy.links[self.conn] = self
        self.proxy.tasks.add(task := asyncio.ensure_future(self._connect()))
        task.add_done_callback(self.proxy.tasks.discard)

    async def _connect(self) -> None:
        proxy = self.proxy
        options = proxy.options
        try:
            if self.upstream is None:
                raise OSError("it left the metadata")
            host, port = self.upstream
            # the TCP connect alone is timed: timing create_connection too (its transport is made a
            # few turns of the loop later) timed out connects that had succeeded while the loop
            # was busy (40 clients flooding tiny requests: 16 of them closed as "timed out")
            sock = await asyncio.wait_for(connected(proxy.loop, host, port), options.connect_timeout)
            try:
                await proxy.loop.create_connection(lambda: self.server, sock=sock, ssl=options.upstream_ssl,
                                                   server_hostname=host if options.upstream_ssl is not None else None)
            except BaseException:
                sock.close()
                raise
        except (OSError, asyncio.TimeoutError, ssl.SSLError, ValueError, OverflowError) as e:  # UnicodeError too
            reason = "timed out" if isinstance(e, asyncio.TimeoutError) else (getattr(e, "strerror", None) or str(e))
            proxy.log(f"#{self.conn} {self.label}: cannot connect to {self._target()}: {reason}; closing the client")
            self.closed_by = "proxy (broker unreachable)"
            self.client.transport.close()
            return
        if self.client.transport.is_closing():
            self.server.transport.close()
            return
        local = self.client.transport.get_extra_info("sockname")
        proxy.tap_open(self.conn, self.client.transport.get_extra_info("peername"), local)
        via = self.server.transport.get_extra_info("sockname")
        via = f" from {via[0]}:{via[1]}" if via else ""
        proxy.log(f"#{self.conn} {self.label} -> {self._target()}{via}: connected")
        early, self.early = self.early, None
        for data in early:
            self.received(CLIENT, data)
        if self.draining:
            self.stop_reading()
        self.client.resume()

    def _target(self) -> str:
        which = "bootstrap" if self.node is None else f"broker {self.node}"
        if self.upstream is None:
            return which
        host, port = self.upstream
        return f"{which} {shown(host)}:{port}"

    def received(self, direction: int, data: bytes) -> None:
        if self.early is not None and direction == CLIENT:  # not connected yet: kept (paused again)
            self.early.append(data)
            self.client.pause()
            return
        peer = self.peer_of(direction).transport
        if peer is None or peer.is_closing():  # its partner is gone: nowhere to relay to
            return
        if direction == CLIENT:
            if self.draining:
                self._last_request(peer, data)
                return
            peer.write(data)
            self.up += len(data)
            self.requests.feed(data)
        else:
            out = self.responses.feed(data)
            peer.write(out)
            self.down += len(out)
            data = out
        self.proxy.tap_data(self.conn, direction, data)

    def eof(self, direction: int):
        """A half-close: passed on; the link stays open for the other direction."""
        self.ended |= 1 if direction == CLIENT else 2
        if self.closed_by is None:
            self.closed_by = "client (end of stream)" if direction == CLIENT else "broker (end of stream)"
        self.proxy.tap_end(self.conn, direction)
        peer = self.peer_of(direction).transport
        if peer is not None and not peer.is_closing() and peer.can_write_eof():
            peer.write_eof()
        if self.ended == 3:
            return False  # both ways over: close
        return True

    def lost(self, direction: int, exc) -> None:
        bit = 1 if direction == CLIENT else 2
        if not self.ended & bit:
            self.ended |= bit
            self.proxy.tap_end(self.conn, direction)
        if self.closed_by is None:
            who = "client" if direction == CLIENT else "broker"
            self.closed_by = f"{who} ({exc})" if exc is not None else f"{who} (closed)"
        peer = self.peer_of(direction)
        self.lost_sides |= bit
        if peer.transport is not None and not peer.transport.is_closing():
            peer.transport.close()  # after writing what it holds
        peer_bit = 2 if direction == CLIENT else 1
        if self.lost_sides & peer_bit or peer.transport is None:
            if not self.ended & peer_bit:
                self.ended |= peer_bit
                self.proxy.tap_end(self.conn, 2 if direction == CLIENT else 1)
            self.proxy.closed(self)

    @property
    def in_flight(self) -> int:
        return len(self.requests.pending)

    def mark_stop(self) -> None:
        """What draining starts from: requests in flight, one half read, responses so far."""
        if self.at_stop is None:
            self.at_stop = (self.in_flight, self.requests.mid_frame, self.responses.answered)

    def quiet(self) -> bool:
        """Draining is over for this link: no request waits, no frame is half passed."""
        return not self.in_flight and not self.requests.mid_frame and not self.responses.mid_frame

    def drain(self) -> None:
        """Stop taking new requests from the client: at once if none is under way, else once it
        has come whole. A link not yet connected to its broker is closed (nothing is in flight)."""
        self.draining = True
        self.mark_stop()
        if self.server.transport is None or self.client.transport is None:
            if self.client.transport is not None and not self.client.transport.is_closing():
                self.closed_by = "proxy (stopping before the broker answered the connect)"
                self.client.transport.close()
            return
        if not self.requests.mid_frame:
            self.stop_reading()

    def stop_reading(self) -> None:
        self.stopped_reading = True
        self.client.pause()

    def _last_request(self, peer, data: bytes) -> None:
        """While draining: only the part of ``data`` that ends the request under way goes on;
        what follows starts new requests, and is dropped (counted)."""
        taken = self.requests.feed_to_boundary(data)
        if not self.requests.mid_frame:
            self.not_forwarded += len(data) - taken
            self.stop_reading()
        if taken:
            data = data[:taken] if taken < len(data) else data
            peer.write(data)
            self.up += taken
            self.proxy.tap_data(self.conn, CLIENT, data)

    def close(self) -> None:
        for side in (self.client, self.server):
            if side.transport is not None and not side.transport.is_closing():
                side.transport.close()


def _literal(host: str, port: int) -> list | None:
    """getaddrinfo's answer for an IP address, without its round trip through a thread (a turn
    of the loop or two, each of which a busy relay makes long)."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        address = (host, port) if family == socket.AF_INET else (host, port, 0, 0)
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", address)]
    return None


async def connected(loop, host: str, port: int) -> socket.socket:
    """A non-blocking socket connected to host:port (each address getaddrinfo gives, in turn)."""
    error: OSError | None = None
    addresses = _literal(host, port) or await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    for family, type_, proto, _, address in addresses:
        sock = socket.socket(family, type_, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
            return sock
        except OSError as e:
            sock.close()
            error = e
        except BaseException:
            sock.close()
            raise
    raise error or OSError(f"no address for {host}")


def never(api_key: int, api_version: int) -> bool:
    return False


def shown(host) -> str:
    """A broker's host for a log line: cut to HOST_SHOWN characters (the CLI escapes the rest)."""
    host = str(host)
    return host if len(host) <= HOST_SHOWN else f"{host[:HOST_SHOWN]}... ({len(host):,} characters)"
