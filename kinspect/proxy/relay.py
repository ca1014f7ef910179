"""The relay: the proxy's listeners and the links they make (link.py on asyncio, pump.py in C),
which pass every byte between a client and a broker.

Each chunk read from one side is written to the other before anything else is done with it;
then a copy goes to the Tap (the decoder, in another process). A side whose peer's write buffer
is full stops reading until it drains (pause_writing/resume_writing), so a slow reader holds at
most one buffer per direction. When one side closes, its half-close is passed on (write_eof);
when one side breaks, its partner is closed after writing what it holds.

Draining (``Proxy.drain``, on Ctrl-C or SIGTERM): the listeners close; each client is read only to
the end of the request under way (the relay follows the frames, so it knows where that is), then
not at all, so that no new request reaches a broker; the responses to the requests forwarded come
back and pass as usual, until none is waiting or the timeout; then every link closes.

Multi-broker: the bootstrap listener relays to ``upstream``; every broker a response names gets a
listener of its own (``port_of(node id)``), opened on demand, which relays to the address the
broker gave; responses naming brokers are rewritten (rewrite.py) to point at those listeners.
At most ``max_brokers`` listen at once (a hostile Metadata response may name 100,000 brokers);
a broker past that, or whose address no client could reach, goes to clients as it came. A
Metadata response lists the brokers alive, so a broker it no longer names has its listener
closed (the connections through it go on); named again, it listens again. Repeated warnings are
folded (folded.py), and so are the listener lines of one response past NEWS_LINES.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from dataclasses import dataclass, field
from typing import Callable

from kinspect.proxy import pump
from kinspect.proxy.folded import Folded
from kinspect.proxy.frames import HeldBudget, PendingBudget
from kinspect.proxy.link import Link, Side, shown
from kinspect.proxy.rewrite import Unchanged, rewrite_response
from kinspect.proxy.tap import CLIENT

MAX_HELD = 64 << 20    # bytes of responses held whole for rewriting at once, over all connections
# --max-brokers: listeners for brokers at once. Far above any real cluster's broker count (they
# run to hundreds), far below what a hostile Metadata response can name (100,000 took the whole
# descriptor limit, 20,000, and refused every client meanwhile).
MAX_BROKERS = 1000
NEWS_LINES = 10        # listener lines (opened, closed, moved) said for one response; the rest counted


@dataclass
class Options:
    upstream: tuple[str, int]
    listen_host: str
    base_port: int
    advertised_host: str
    rewrite: bool = True
    broker_ports: dict[int, int] = field(default_factory=dict)  # --broker-map: node id -> port
    server_ssl: ssl.SSLContext | None = None    # --listen-tls
    upstream_ssl: ssl.SSLContext | None = None  # --upstream-tls
    connect_timeout: float = 10.0
    max_held: int = MAX_HELD  # --max-held-mb
    max_brokers: int = MAX_BROKERS  # --max-brokers (run() lowers it when descriptors are short)
    native: bool = True  # plaintext links relayed in C (pump.py) where it is built; False: asyncio


@dataclass
class Counters:
    connections: int = 0
    open: int = 0
    client_bytes: int = 0
    server_bytes: int = 0
    rewritten: int = 0
    unchanged: int = 0   # responses that named brokers but could not be rewritten


def reachable(host, port) -> bool:
    """Whether a client could connect to this address a broker gave: a port from 1 to 65535, a
    host name DNS could hold (at most 253 characters, labels of at most 63, IDNA-encodable, no
    NUL). Connecting to any other raised from inside getaddrinfo or connect (UnicodeError,
    OverflowError), not OSError: the link's task died with a traceback, its client left waiting."""
    if not isinstance(host, str) or not isinstance(port, int) or not 0 < port < 65536:
        return False
    if not 0 < len(host) <= 253 or "\0" in host:
        return False
    if ":" not in host and not all(0 < len(label) <= 63 for label in host.removesuffix(".").split(".")):
        return False
    if not host.isascii():
        try:
            host.encode("idna")
        except UnicodeError:
            return False
    return True


class Proxy:
    """The listeners and their links. ``tap``: a kinspect.proxy.tap.Tap, or None (no decoding);
    ``log``: where connect and close lines go."""

    def __init__(self, options: Options, tap, log: Callable[[str], None]):
        self.options = options
        self.tap = tap
        self.log = log
        self.loop: asyncio.AbstractEventLoop | None = None
        self.links: dict[int, Link] = {}
        self.tasks: set = set()
        self.servers: dict[int | None, asyncio.AbstractServer] = {}  # node id (None: bootstrap) -> server
        self.listening: dict[int, socket.socket] = {}  # node id -> its listener's socket, bound
        self.brokers: dict[int, tuple[str, int]] = {}  # node id -> the address the broker gave
        self.ports: dict[int | None, int] = {}
        self.counters = Counters()
        self.next_conn = 0
        self.warnings = Folded(log)
        self.news: list[str] | None = None  # listener lines of the response being rewritten
        self.idle = asyncio.Event()
        self.held = HeldBudget(options.max_held, self._not_held)
        self.pending = PendingBudget()  # requests followed at once, over all links
        self.pumps = None  # pump.Pumps: plaintext links relayed in C
        self.pump = None
        self.stopping = False

    # -- listeners -----------------------------------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.loop.set_exception_handler(self._loop_error)
        options = self.options
        if options.native and options.server_ssl is None and options.upstream_ssl is None:
            if pump.available():
                self.pumps = pump.Pumps(self)
                self.pump = self.pumps.pump
        await self._listen(None, self.options.base_port)

    def port_of(self, node: int) -> int:
        return self.options.broker_ports.get(node, self.options.base_port + 1 + node)

    def _bind(self, port: int) -> socket.socket:
        info = socket.getaddrinfo(self.options.listen_host or None, port, type=socket.SOCK_STREAM,
                                  flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(info[4])
            sock.listen(1024)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        return sock

    async def _listen(self, node: int | None, port: int) -> None:
        sock = self._bind(port)
        await self._serve(node, sock)

    def _wanted(self, node: int | None, sock: socket.socket) -> bool:
        """Whether ``sock`` is still the listener of ``node`` (a broker's may have been closed
        while it was being set up)."""
        return node is None or self.listening.get(node) is sock

    async def _serve(self, node: int | None, sock: socket.socket) -> None:
        if not self._wanted(node, sock):
            sock.close()
            return
        self.ports[node] = sock.getsockname()[1]
        if self.pumps is not None:
            self.servers[node] = self.pumps.listen(node, sock)
            return
        server = await self.loop.create_server(lambda: self._accept(node), sock=sock, ssl=self.options.server_ssl)
        if not self._wanted(node, sock):
            server.close()
            return
        self.servers[node] = server

    def upstream_of(self, node: int | None) -> tuple[str, int] | None:
        """Where a client accepted for ``node`` goes; None: the broker left the metadata between
        the accept and now (the link then closes the client)."""
        return self.options.upstream if node is None else self.brokers.get(node)

    def _accept(self, node: int | None) -> Side:
        self.next_conn += 1
        link = Link(self, self.next_conn, node, self.upstream_of(node))
        self.counters.connections += 1
        self.counters.open += 1
        self.idle.clear()
        return link.client

    @property
    def bootstrap_port(self) -> int:
        return self.ports[None]

    # -- rewriting -----------------------------------------------------------------------------

    def address_of(self, node: int, host: str, port: int) -> tuple[str, int]:
        """Where clients are to reach broker ``node`` (which said host:port): its listener, opened
        now if it is new (bound at once, so a client connecting next finds it); the broker's own
        address when it gets none (past --max-brokers, a port that cannot be bound, an address
        no client could reach)."""
        if self.stopping:  # no new listener: nobody is to connect any more
            return (self.options.advertised_host, self.ports[node]) if node in self.listening else (host, port)
        if not reachable(host, port):
            self.warnings.warn(("address",), f"broker {node} gave an address no client could reach "
                               f"({shown(host)}:{port}): it goes to clients unchanged, with no listener",
                               "brokers with an address no client could reach")
            return host, port
        if node in self.listening:
            known = self.brokers.get(node)
            if known != (host, port):
                self.brokers[node] = (host, port)
                self._say(f"broker {node} moved from {shown(known[0])}:{known[1]} to {shown(host)}:{port}")
            return self.options.advertised_host, self.ports[node]
        limit = self.options.max_brokers
        if len(self.listening) >= limit:
            self.warnings.warn(("max-brokers",), f"more brokers named than --max-brokers ({limit:,}) allows at "
                               f"once: broker {node} ({shown(host)}:{port}) gets no listener, and its address goes "
                               f"to clients unchanged", "brokers named past --max-brokers")
            return host, port
        wanted = self.port_of(node)
        try:
            if not 0 < wanted < 65536:
                raise OSError(f"port {wanted} out of range (set it with --broker-map {node}=PORT)")
            sock = self._bind(wanted)
        except OSError as e:
            self.warnings.warn(("listen", e.errno), f"cannot listen for broker {node} on port {wanted}: "
                               f"{getattr(e, 'strerror', None) or e}; its address goes to clients unchanged",
                               "brokers that could not be given a listener")
            return host, port
        self.brokers[node] = (host, port)
        self.listening[node] = sock
        self.ports[node] = sock.getsockname()[1]
        self._say(f"broker {node} ({shown(host)}:{port}) listens on {self.options.advertised_host}:{self.ports[node]}")
        self.tasks.add(task := asyncio.ensure_future(self._serve(node, sock)))
        task.add_done_callback(self.tasks.discard)
        return self.options.advertised_host, self.ports[node]

    def _forget(self, node: int) -> None:
        """Broker ``node`` left the metadata: its listener closes (not the links through it)."""
        self.listening.pop(node)
        server = self.servers.pop(node, None)
        if server is not None:
            server.close()
        # else its _serve is still to come, and closes it (_wanted)
        port = self.ports.pop(node, None)
        self.brokers.pop(node, None)
        through = sum(1 for link in self.links.values() if link.node == node)
        self._say(f"broker {node} left the metadata: its listener on port {port} is closed"
                  + (f" ({through} connections through it go on)" if through else ""))

    def _say(self, line: str) -> None:
        if self.news is None:
            self.log(line)
        else:
            self.news.append(line)

    def rewrite(self, api_key: int, api_version: int, frame: bytes) -> bytes:
        self.news = []
        try:
            out = rewrite_response(api_key, api_version, frame, self.address_of, self.options.max_brokers,
                                   self._listing)
        except Unchanged as e:
            self.counters.unchanged += 1
            self.warnings.warn(("rewrite", api_key, api_version),
                               f"a response (API key {api_key} v{api_version}) could not be rewritten: {e}; "
                               f"relayed unchanged (counted, warned once per API version)",
                               f"responses (API key {api_key} v{api_version}) not rewritten")
            return frame
        finally:
            news, self.news = self.news, None
            for line in news[:NEWS_LINES]:
                self.log(line)
            if len(news) > NEWS_LINES:
                self.log(f"... and {len(news) - NEWS_LINES:,} more lines like these for this response")
        if out is not frame:
            self.counters.rewritten += 1
        return out

    def _listing(self, nodes: set, count: int) -> None:
        """A Metadata response's brokers, before their addresses are asked for: the listeners of
        brokers it no longer names close first, so that new brokers find room. One naming more
        than --max-brokers is only read that far, and says nothing of who left; an empty list
        neither."""
        limit = self.options.max_brokers
        if count > limit:
            self.warnings.warn(("too-many",), f"a Metadata response named {count:,} brokers, more than "
                               f"--max-brokers ({limit:,}): the first {limit:,} were rewritten, the others went "
                               f"to clients unchanged", "Metadata responses naming more brokers than --max-brokers")
        elif nodes and not self.stopping:
            for node in [n for n in self.listening if n not in nodes]:
                self._forget(node)

    def _not_held(self, size: int, api: tuple) -> None:
        self.warnings.warn(("held", api), f"a response (API key {api[0]} v{api[1]}) of {size} bytes did not fit in "
                           f"--max-held-mb ({self.options.max_held >> 20} MiB held at once) and passed unchanged: "
                           f"any broker address in it reached the client as the broker gave it (counted, warned "
                           f"once per API version)", f"responses (API key {api[0]} v{api[1]}) not held")

    def _loop_error(self, loop, context: dict) -> None:
        """asyncio's own errors, one line each kind (its default prints a traceback each time;
        KINSPECT_DEBUG=1 shows it as well): an accept that failed for want of descriptors, which
        asyncio retries a second later, or a task that died."""
        if os.environ.get("KINSPECT_DEBUG"):
            loop.default_exception_handler(context)
        exc = context.get("exception")
        message = context.get("message") or "error"
        errno = getattr(exc, "errno", None)
        reason = f": {getattr(exc, 'strerror', None) or exc}" if exc is not None else ""
        self.warnings.warn(("loop", message, errno), f"{message}{reason}", f"'{message}' errors")


    # -- the tap -------------------------------------------------------------------------------

    def tap_open(self, conn: int, client, local) -> None:
        if self.tap is not None and client and local:
            self.tap.open(conn, time.time(), (client[0], client[1]), (local[0], local[1]))

    def tap_data(self, conn: int, direction: int, data: bytes, ts: float | None = None) -> None:
        if direction == CLIENT:
            self.counters.client_bytes += len(data)
        else:
            self.counters.server_bytes += len(data)
        if self.tap is not None:
            self.tap.data(conn, direction, time.time() if ts is None else ts, data)

    def tap_dropped(self, direction: int, size: int) -> None:
        """Bytes relayed after the deadline, never handed to the decoder (the tap is closing)."""
        if direction == CLIENT:
            self.counters.client_bytes += size
        else:
            self.counters.server_bytes += size
        if self.tap is not None:
            self.tap.dropped += size

    def tap_end(self, conn: int, direction: int) -> None:
        if self.tap is not None:
            self.tap.end(conn, direction, time.time())

    def closed(self, link: Link) -> None:
        link.responses.release()
        link.requests.release()
        if self.links.pop(link.conn, None) is None:
            return
        self.counters.open -= 1
        seconds = time.monotonic() - link.started
        self.log(f"#{link.conn} {link.label} -> {link._target()}: closed by {link.closed_by or 'proxy'} "
                 f"after {seconds:.1f} s; {link.up} bytes up, {link.down} bytes down, "
                 f"{link.requests.frames} requests")
        if not self.links:
            self.idle.set()

    # -- stopping ------------------------------------------------------------------------------

    def in_flight(self) -> int:
        return sum(link.in_flight for link in self.links.values())

    async def drain(self, timeout: float) -> Drained:
        """Stop accepting and stop reading new requests (Link.drain); wait (at most ``timeout``
        s) until no request waits for its response and no frame is half passed; close every
        link. Says what it did in two log lines, and returns it."""
        started = self.loop.time()
        self.stopping = True
        for server in self.servers.values():
            server.close()
        for node, sock in self.listening.items():
            if node not in self.servers:  # its _serve is still to come, and sees it is not wanted
                sock.close()
        self.listening.clear()
        links = list(self.links.values())
        for link in links:
            link.drain()
        deadline = started + timeout
        if self.pumps is not None:  # each link's state when the pump took its drain
            await self.pumps.stopped(links, deadline)
        stops = [link.at_stop or (0, False, link.responses.answered) for link in links]
        report = Drained(in_flight=sum(s[0] for s in stops), half_read=sum(s[1] for s in stops),
                         connections=len(links))
        self.log(f"stopping: no new connections, no new requests; draining {report.in_flight} in-flight "
                 f"requests ({report.half_read} half read) on {report.connections} connections "
                 f"(at most {timeout:g} s)")
        answered = [s[2] for s in stops]
        while self.loop.time() < deadline:
            if all(link.quiet() for link in self.links.values()):
                break
            await asyncio.sleep(0.01)
        report.cut = self.in_flight()
        report.half_cut = sum(link.requests.mid_frame for link in self.links.values())
        report.answered = sum(link.responses.answered - before for link, before in zip(links, answered))
        report.not_forwarded = sum(link.not_forwarded for link in links)
        report.seconds = self.loop.time() - started
        for link in list(self.links.values()):
            if link.closed_by is None:
                link.closed_by = "proxy (stopping)"
            link.close()
        if self.links:
            try:
                await asyncio.wait_for(self.idle.wait(), 2.0)
            except asyncio.TimeoutError:
                pass
        for task in list(self.tasks):
            task.cancel()
        if self.pumps is not None:
            self.pumps.stop(deadline)
        self.log(f"drained in {report.seconds:.1f} s: {report.answered} responses relayed, {report.cut} requests "
                 f"cut (no response within --drain-timeout), {report.half_cut} cut half read; "
                 f"{report.not_forwarded} bytes of new requests not forwarded")
        self.warnings.ended()
        return report


@dataclass
class Drained:
    """What draining did: requests waiting and half read at the stop, responses relayed after
    it, requests cut at the timeout (waiting, or half read), bytes of new requests dropped."""
    in_flight: int = 0
    half_read: int = 0
    connections: int = 0
    answered: int = 0
    cut: int = 0
    half_cut: int = 0
    not_forwarded: int = 0
    seconds: float = 0.0
