"""What the relay itself reads of the Kafka frames it passes: headers only.

``Requests`` follows the client's frames: each request's api key, version and correlation id go
into ``pending`` (for the responses' versions and for draining), except Produce with acks=0,
which gets no response. ``Responses`` follows the broker's frames: each is paired by correlation
id; one that may carry broker addresses (rewrite.carries_addresses) is held whole and handed to
``rewrite``, every other byte passes as it came.

SASL before KIP-152 (wire/sasl.py): after a SaslHandshake v0 that the broker accepts, the tokens
go as size-prefixed frames without a Kafka header, both ways (PLAIN's answer is an empty frame).
The handshake's response is held (it is small) for its error code, and the tokens are then
counted as tokens, neither paired nor waited for, so that the requests after them are followed
and rewritten as usual.
"""

from __future__ import annotations

import struct
from typing import Callable

from kinspect.wire.exchange import produce_acks
from kinspect.wire.headers import parse_request_header
from kinspect.wire.sasl import SASL_HANDSHAKE, RawSasl

_I32 = struct.Struct(">i")
_I32X2 = struct.Struct(">ii")
HEAD = 512          # bytes of a request read for its header (and a Produce request's acks)
PRODUCE = 0
# Requests followed at once per connection: a broker queues a few hundred (queued.max.requests),
# so past this a client floods or lies. The oldest is forgotten: its response passes as it comes.
MAX_PENDING = 1 << 16
# ... and over all connections of a proxy (PendingBudget): clients sending requests nobody answers
# (to a broker that reads them all) cost the relay 130 bytes a request, 8.5 MB per connection at
# MAX_PENDING, without any bound but the connection count (50 connections: 465 MB). Past this, a
# connection forgets its oldest. Each costs about 60 bytes (its api tuple shared: _API).
MAX_PENDING_TOTAL = 1 << 18
_API: dict = {}  # (api key, version) -> that tuple, one object for every request of that API
SASL_V0 = (SASL_HANDSHAKE, 0)  # its response is held whole: its error code starts the raw tokens


class PendingBudget:
    """The requests followed at once over every connection of a proxy."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int = MAX_PENDING_TOTAL):
        self.limit = limit
        self.used = 0


class Requests:
    __slots__ = ("pending", "head", "want", "skip", "rest", "frames", "forgotten", "sasl", "tokens", "budget")

    def __init__(self, budget: PendingBudget | None = None):
        self.budget = budget if budget is not None else PendingBudget()
        self.pending: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, api version)
        self.head = bytearray()  # the start of the frame being read
        self.want = 4            # bytes of head wanted before the next step
        self.skip = 0            # bytes of the current frame past its head, still to come
        self.rest = 0            # the same, while the head is being read
        self.frames = 0
        self.forgotten = 0       # requests dropped from pending past MAX_PENDING
        self.sasl: RawSasl | None = None  # after a SaslHandshake v0 (see the module's notes)
        self.tokens = 0          # raw SASL tokens among the frames

    @property
    def mid_frame(self) -> bool:
        return bool(self.head) or self.skip > 0

    def feed(self, data) -> None:
        pos, n = 0, len(data)
        while pos < n:
            if self.skip:
                take = min(self.skip, n - pos)
                self.skip -= take
                pos += take
                continue
            take = min(self.want - len(self.head), n - pos)
            self.head += data[pos:pos + take]
            pos += take
            if len(self.head) < self.want:
                return
            if self.want == 4:
                (size,) = _I32.unpack_from(self.head)
                if size == 0 and self.sasl is not None and self.sasl.client_frame(b""):
                    self.frames += 1  # an empty raw SASL token
                    self.tokens += 1
                    self.head.clear()
                    continue
                if size <= 0:  # not Kafka framing: stop following (the relay goes on)
                    self.head.clear()
                    self.skip = 1 << 62
                    return
                self.want = 4 + min(size, HEAD)
                self.rest = size - min(size, HEAD)
                continue
            self._request(bytes(self.head))
            self.head.clear()
            self.want = 4
            self.skip, self.rest = self.rest, 0

    def feed_to_boundary(self, data) -> int:
        """Feeds ``data`` up to the end of the frame under way (none when between frames); returns
        how many bytes were taken: the rest of ``data`` starts new requests (used while draining)."""
        pos, n = 0, len(data)
        while pos < n and self.mid_frame:
            take = min(self.skip if self.skip else self.want - len(self.head), n - pos)
            self.feed(data[pos:pos + take])
            pos += take
        return pos

    def _request(self, head: bytes) -> None:
        self.frames += 1
        sasl = self.sasl
        if sasl is not None:
            if sasl.client_frame(head[4:]):
                self.tokens += 1
                return
            if sasl.over:
                self.sasl = None
        header = parse_request_header(head, 4)
        if header is None:
            if len(head) >= 12:  # a long client id: the fixed part is enough
                api_key, api_version = struct.unpack_from(">hh", head, 4)
                (correlation_id,) = _I32.unpack_from(head, 8)
                self._pend(correlation_id, api_key, api_version)
            return
        if header.api_key == PRODUCE and produce_acks(header.api_version, head, 4 + header.size) == 0:
            return
        if header.api_key == SASL_HANDSHAKE and header.api_version == 0:
            self.sasl = RawSasl(header.correlation_id, head, 4 + header.size)
        self._pend(header.correlation_id, header.api_key, header.api_version)

    def _pend(self, correlation_id: int, api_key: int, api_version: int) -> None:
        pending = self.pending
        if correlation_id not in pending:
            budget = self.budget
            if pending and (len(pending) >= MAX_PENDING or budget.used >= budget.limit):
                del pending[next(iter(pending))]
                self.forgotten += 1
            else:
                budget.used += 1
        api = (api_key, api_version)
        pending[correlation_id] = _API.setdefault(api, api) if len(_API) < 1 << 16 else api

    def answered(self, correlation_id: int):
        """The request a response answers (its api key and version), no longer pending; None."""
        api = self.pending.pop(correlation_id, None)
        if api is not None:
            self.budget.used -= 1
        return api

    def release(self) -> None:
        """The connection is over: what it followed is given back to the budget."""
        self.budget.used -= len(self.pending)
        self.pending.clear()


class HeldBudget:
    """The bytes of responses held whole at once, over every connection of a proxy: a frame is
    held only when its whole size (known from its first 4 bytes) fits in what is left; else it
    passes as it comes, unrewritten, and ``refused`` (frames) and ``on_refused`` are told."""

    __slots__ = ("limit", "used", "refused", "refused_bytes", "on_refused")

    def __init__(self, limit: int, on_refused: Callable[[int, tuple], None] | None = None):
        self.limit = limit
        self.used = 0
        self.refused = 0
        self.refused_bytes = 0
        self.on_refused = on_refused  # (frame size, (api key, version)) -> None

    def take(self, size: int, api: tuple) -> bool:
        if self.used + size > self.limit:
            self.refused += 1
            self.refused_bytes += size
            if self.on_refused is not None:
                self.on_refused(size, api)
            return False
        self.used += size
        return True

    def give(self, size: int) -> None:
        self.used -= size


class Responses:
    """``feed(data)`` returns the bytes to send on: ``data`` itself when nothing was held, else
    the pieces joined. A broker answers a connection's requests in order, so whether a frame is
    held is decided at its first byte, from the oldest request waiting; frames that pass are
    never copied. ``held``: a HeldBudget shared by the connections (or a size in bytes, for
    this one alone); ``release()`` gives back what is held when the connection ends."""

    __slots__ = ("requests", "wants_whole", "rewrite", "budget", "reserved", "head", "want", "held", "skip",
                 "api", "frames", "tokens", "answered")

    def __init__(self, requests: Requests, wants_whole: Callable[[int, int], bool],
                 rewrite: Callable[[int, int, bytes], bytes], held: "HeldBudget | int"):
        self.requests = requests
        self.wants_whole = wants_whole  # (api key, version) -> hold the whole frame for rewrite
        self.rewrite = rewrite          # (api key, version, frame) -> frame to send
        self.budget = held if isinstance(held, HeldBudget) else HeldBudget(held)
        self.reserved = 0         # bytes of the budget taken by the frame held
        self.head = bytearray()   # the first 8 bytes (size, correlation id) of the current frame
        self.want = 8             # bytes of head: 4 (the size) for a raw SASL token
        self.held: bytearray | None = None  # the frame being held whole
        self.skip = 0             # bytes of the current frame after its head
        self.api: tuple[int, int] | None = None
        self.frames = 0
        self.tokens = 0           # raw SASL tokens among the frames
        self.answered = 0         # frames that answered a pending request

    @property
    def mid_frame(self) -> bool:
        return bool(self.head) or self.skip > 0 or self.held is not None

    def release(self) -> None:
        if self.reserved:
            self.budget.give(self.reserved)
            self.reserved = 0

    def _done(self, out: list) -> None:
        """The held frame is whole: out goes its rewritten form."""
        held, self.held = bytes(self.held), None
        self.release()
        if self.api == SASL_V0:
            sasl = self.requests.sasl
            if sasl is not None:
                (correlation_id,) = _I32.unpack_from(held, 4)
                sasl.answered(correlation_id, held[4:], 4)
            out.append(held)
        else:
            out.append(self.rewrite(*self.api, held) if self.api is not None else held)

    def feed(self, data: bytes) -> bytes:
        out: list | None = [] if self.held is not None else None
        start = 0  # where the bytes that pass as they came resume
        pos, n = 0, len(data)
        pending = self.requests.pending
        while pos < n:
            if self.skip:
                take = min(self.skip, n - pos)
                if self.held is not None:
                    self.held += data[pos:pos + take]
                pos += take
                self.skip -= take
                if not self.skip and self.held is not None:
                    self._done(out)
                    start = pos
                continue
            if not self.head:  # a frame starts: a raw SASL token, or the answer to one to rewrite?
                self.frames += 1
                sasl = self.requests.sasl
                if sasl is not None and sasl.server_frame(b""):
                    self.want = 4
                    self.api = None
                else:
                    self.want = 8
                    oldest = next(iter(pending.values()), None)
                    self.api = oldest
                    if oldest is not None and (oldest == SASL_V0 or self.wants_whole(*oldest)):
                        if out is None:
                            out = []
                        out.append(data[start:pos])
                        self.held = bytearray()
            take = min(self.want - len(self.head), n - pos)
            piece = data[pos:pos + take]
            self.head += piece
            if self.held is not None:
                self.held += piece
            pos += take
            if len(self.head) < self.want:
                break
            if self.want == 4:  # a raw SASL token: its bytes pass, nothing is paired
                (size,) = _I32.unpack_from(self.head)
                self.head.clear()
                self.tokens += 1
                self.skip = size if size >= 0 else 1 << 62
                continue
            size, correlation_id = _I32X2.unpack_from(self.head)
            self.head.clear()
            api = self.requests.answered(correlation_id)
            if api is not None:
                self.answered += 1
            if size < 4:  # not Kafka framing: pass the rest untouched
                if self.held is not None:
                    self.api = None
                    self._done(out)
                    start = pos
                self.skip = 1 << 62
                continue
            self.skip = size - 4
            if self.held is not None:
                self.api = api if api is not None else self.api
                if api is None or not self.budget.take(size + 4, self.api):  # not what was thought, or too big
                    out.append(bytes(self.held))
                    self.held = None
                    start = pos
                else:
                    self.reserved = size + 4
                    if not self.skip:
                        self._done(out)
                        start = pos
        if out is None:
            return data
        if self.held is None:
            out.append(data[start:])
        return b"".join(out)
