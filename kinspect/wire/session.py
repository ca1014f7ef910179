"""Routes per-direction TCP streams to Kafka connections.

A connection is Kafka when one side uses a Kafka port (9092 and --port), or, on any other port,
when the first bytes one side sends parse as a request header with a known key and version. The
side that sends requests is the client; the connection is labelled "client-server".

A connection seen from its SYN is decided by its first request: a Kafka client speaks first. One
already open when the capture began can show a response first, and a response whose correlation
id is below 13 reads as a Produce request header (key 0, version = the id). So there a request
candidate is confirmed by a frame of the other side that starts with its correlation id (its
response) before it decides; without one (acks=0 producers, a capture that ends first), the first
candidate decides when the connection is given up on, ends or the capture ends.
"""

from __future__ import annotations

from collections import OrderedDict

from kinspect.addresses import format_addr
from kinspect.wire.exchange import Connection
from kinspect.wire.frames import MAX_FRAME
from kinspect.wire.headers import plausible_request

DEFAULT_PORTS = frozenset({9092})
DETECT_LIMIT = 64 << 10   # bytes per direction watched before deciding a connection is not Kafka
CANDIDATES = 64           # request candidates kept per direction of an undecided connection
UNDECIDED_LIMIT = 64 << 20  # bytes held back by all undecided connections together


def _reverse(flow):
    src, sport, dst, dport = flow
    return (dst, dport, src, sport)


def _label(client_flow) -> str:
    src, sport, dst, dport = client_flow
    return f"{format_addr(src, sport)}-{format_addr(dst, dport)}"


class _Undecided:
    """Both directions of a connection on unknown ports, held back until it proves to be Kafka."""
    __slots__ = ("chunks", "sizes", "requests", "first")

    def __init__(self):
        self.chunks: list = []   # (flow, ts, data or None, missing, packet number) in arrival order
        self.sizes: dict = {}
        self.requests: dict = {}  # flow -> correlation ids of the frames that read as requests
        self.first = None         # the flow of the first such frame


class KafkaSession:
    """Sans-I/O: feed stream events, get output records (exchanges, notices) back.

    Exchanges come out with their bodies raw; ``exchange.complete`` decodes them.
    """

    def __init__(self, ports=DEFAULT_PORTS, *, heuristic: bool = True, max_frame: int = MAX_FRAME,
                 decode_bodies: bool = True, show_secrets: bool = False):
        self.ports = frozenset(ports)
        self.heuristic = heuristic
        self.max_frame = max_frame
        self.decode_bodies = decode_bodies
        self.show_secrets = show_secrets  # else secrets are redacted (wire/secrets.py)
        # flow (either direction) -> Connection; its client_flow tells the sides apart (a tuple
        # (conn, side) per flow would be two more objects per connection for the cyclic GC)
        self.routes: dict = {}
        self.undecided: OrderedDict = OrderedDict()  # frozenset of both flows -> _Undecided, oldest first
        self.ignored: set = set()    # flows decided not to be Kafka
        self.syn_seen: dict = {}     # flow -> syn flag of its StreamStart
        self.kafka_connections = 0
        # [bytes, the most there have been] of requests waiting for their responses, and of the
        # big frames being collected, on every connection
        self.held = [0, 0]
        self.reserved = [0, 0]
        self.frames = [0]  # frames (and skipped stretches) of every connection: the work they cost
        # [the number of the packet being read]: a packet reader sets it before it feeds that
        # packet's stream events; frames take it (their first and last packet), 0 when unknown
        self.packet = [0]
        self.undecided_bytes = 0  # held back by connections on other ports until they prove Kafka
        self.undecided_peak = 0

    # -- stream events -------------------------------------------------------------------------

    def start(self, flow, ts: float, syn: bool) -> list:
        out: list = []
        if syn and flow in self.routes:      # port reuse: a new connection on the same 4-tuple
            out += self._close(flow, ts)
        self.ignored.discard(flow)
        self.syn_seen[flow] = syn
        return out

    def data(self, flow, ts: float, data) -> list:
        conn = self.routes.get(flow)
        if conn is not None:
            return conn.client_data(data, ts) if flow == conn.client_flow else conn.server_data(data, ts)
        if flow in self.ignored:
            return []
        return self._detect(flow, ts, data)

    def gap(self, flow, ts: float, missing: int) -> list:
        conn = self.routes.get(flow)
        if conn is None:
            key = frozenset((flow, _reverse(flow)))
            pending = self.undecided.get(key)
            if pending is not None:
                pending.chunks.append((flow, ts, None, missing, self.packet[0]))
            return []
        return conn.client_gap(missing, ts) if flow == conn.client_flow else conn.server_gap(missing, ts)

    def end(self, flow, ts: float, reason: str) -> list:
        """A direction ended; "expired" (reassembly's bound on open streams) and "idle" (a live
        capture's idle timeout) close both."""
        self.syn_seen.pop(flow, None)
        self.ignored.discard(flow)
        conn = self.routes.get(flow)
        if conn is None:
            key = frozenset((flow, _reverse(flow)))
            pending = self.undecided.get(key)
            if pending is None:
                return []
            out = self._give_up(key, ts)  # it will never be confirmed now
            return out + self.end(flow, ts, reason) if flow in self.routes else out
        conn.ended |= 1 if flow == conn.client_flow else 2
        if conn.ended == 3 or reason == "expired" or reason == "idle":
            return self._close(flow, ts)
        return []

    def open(self, client_flow, ts: float) -> None:
        """A connection whose client side the caller knows, seen from its first byte (a proxy's
        accepted socket): no detection, no hunting for a frame start."""
        self.start(client_flow, ts, True)
        self.start(_reverse(client_flow), ts, True)
        if client_flow not in self.routes:
            self._connect(client_flow)

    def expire_pending(self, before: float, timeout: float) -> list:
        """Requests sent before ``before`` still waiting for a response, out as unanswered
        exchanges (a live capture's --pending-timeout); a response coming later is an orphan."""
        out: list = []
        seen: set = set()
        for conn in self.routes.values():
            if conn.pending and id(conn) not in seen:
                seen.add(id(conn))
                out += conn.expire(before, timeout)
        return out

    def in_flight(self) -> int:
        """Requests waiting for their response, on every connection."""
        return sum(len(conn.pending) for flow, conn in self.routes.items()
                   if flow == conn.client_flow or conn.client_flow is None)

    def finish(self, ts: float) -> list:
        out: list = []
        for key in list(self.undecided):
            out += self._give_up(key, ts)
        for flow in list(self.routes):
            if flow in self.routes:
                out += self._close(flow, ts)
        self.undecided.clear()
        self.undecided_bytes = 0
        return out

    # -- detection -----------------------------------------------------------------------------

    def _port_side(self, flow):
        """True: flow goes client→broker by port; False: broker→client; None: ports don't tell."""
        to_broker = flow[3] in self.ports
        from_broker = flow[1] in self.ports
        if to_broker != from_broker:
            return to_broker
        return None

    def _detect(self, flow, ts: float, data) -> list:
        side = self._port_side(flow)
        if side is not None:
            conn = self._connect(flow if side else _reverse(flow))
            return conn.client_data(data, ts) if side else conn.server_data(data, ts)
        key = frozenset((flow, _reverse(flow)))
        pending = self.undecided.get(key)
        if pending is None:
            if not self.heuristic:
                self.ignored.add(flow)
                self.ignored.add(_reverse(flow))
                return []
            pending = self.undecided[key] = _Undecided()
        pending.chunks.append((flow, ts, data, 0, self.packet[0]))
        pending.sizes[flow] = pending.sizes.get(flow, 0) + len(data)
        self.undecided_bytes += len(data)
        if self.undecided_bytes > self.undecided_peak:
            self.undecided_peak = self.undecided_bytes
        head = bytes(data[:64])
        if len(head) >= 8:
            answered = pending.requests.get(_reverse(flow))
            if answered and int.from_bytes(head[4:8], "big", signed=True) in answered:
                return self._decide(_reverse(flow), ts)  # a response to the other side's request
        if plausible_request(head, 0, len(head), self.max_frame):
            if self.syn_seen.get(flow):
                return self._decide(flow, ts)  # seen from its start: the first request is the client's
            ids = pending.requests.setdefault(flow, set())
            if len(ids) < CANDIDATES:
                ids.add(int.from_bytes(head[8:12], "big", signed=True))
            if pending.first is None:
                pending.first = flow
        if all(size > DETECT_LIMIT for size in pending.sizes.values()) or sum(pending.sizes.values()) > 4 * DETECT_LIMIT:
            return self._give_up(key, ts)
        out: list = []
        while self.undecided_bytes > UNDECIDED_LIMIT:  # many connections held back at once
            out += self._give_up(next(iter(self.undecided)), ts)
        return out

    def _give_up(self, key, ts: float) -> list:
        """Held back as long as it may be: decided by its first request candidate, if it had one;
        else not Kafka, its bytes dropped and its flows ignored."""
        pending = self.undecided[key]
        if pending.first is not None:
            return self._decide(pending.first, ts)
        self.undecided_bytes -= sum(self.undecided.pop(key).sizes.values())
        self.ignored.update(key)
        return []

    def _decide(self, client_flow, ts: float) -> list:
        """client_flow is Kafka's client side: build the connection and replay what was held back."""
        key = frozenset((client_flow, _reverse(client_flow)))
        pending = self.undecided.pop(key, None)
        if pending is not None:
            self.undecided_bytes -= sum(pending.sizes.values())
        self._connect(client_flow)
        out: list = []
        if pending is not None:
            packet = self.packet
            now = packet[0]
            for flow, chunk_ts, data, missing, number in pending.chunks:
                packet[0] = number  # each chunk as the packet that brought it
                if data is None:
                    out += self.gap(flow, chunk_ts, missing)
                else:
                    out += self.data(flow, chunk_ts, data)
            packet[0] = now
        return out

    def _connect(self, client_flow) -> Connection:
        server_flow = _reverse(client_flow)
        conn = Connection(_label(client_flow), max_frame=self.max_frame, held=self.held,
                          reserved=self.reserved, frames=self.frames, packet=self.packet,
                          client_syn=self.syn_seen.get(client_flow, False),
                          server_syn=self.syn_seen.get(server_flow, False),
                          decode_bodies=self.decode_bodies, show_secrets=self.show_secrets)
        # a flow that is its own reverse (same address and port on both ends) counts as the
        # server's, as it did when each flow's route said which side it was
        conn.client_flow = client_flow if client_flow != server_flow else None
        self.routes[client_flow] = self.routes[server_flow] = conn
        self.kafka_connections += 1
        return conn

    def _close(self, flow, ts: float) -> list:
        conn = self.routes.pop(flow)
        other = _reverse(flow)
        if self.routes.get(other) is conn:
            del self.routes[other]
        return conn.close(ts)
