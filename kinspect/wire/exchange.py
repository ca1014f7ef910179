"""One Kafka connection: frames in both directions, requests paired with responses.

A response carries neither api key nor version: it is paired by correlation id with the request
seen earlier on the same connection, which also decides the response header version and body
schema. Output records are plain dicts following DESIGN.md's JSON Lines contract.
"""

from __future__ import annotations

import functools
import struct
from collections import OrderedDict
from itertools import islice

from kinspect import native
from kinspect.limits import Budget
from kinspect.problems import ERROR, INFO, WARNING, Problem
from kinspect.wire import apis, messages, secrets
from kinspect.wire.frames import Frame, FrameBuffer
from kinspect.wire.headers import parse_request_header, parse_response_header, plausible_request, read_uvarint
from kinspect.wire.sasl import SASL_HANDSHAKE, RawSasl
from kinspect.wire.topics import TopicNames

_I32X2 = struct.Struct(">ii")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

MAX_PENDING = 100_000          # unanswered requests kept per connection
HUNT_MAX_UNPAIRED = 16 << 20   # while resynchronising, an unpaired response frame larger than this is implausible
HUNT_NEAR = 64                 # ... and so is one whose correlation id is further than this from the oldest request's
HUNT_AHEAD = 16 << 10          # how far past an unpaired frame start the hunt looks for an answer to a pending request
SHOWN_TOKEN = 200              # characters of a raw SASL token in its notice's text (the token field has it all)
# Notices of one kind a connection shows; the rest are counted, and one more notice at its close
# says how many (``"more": N``): zeros on port 9092 are a frame of size 0 every 4 bytes
NOTICES_SHOWN = 10
# the field of a notice that says how many bytes it is about, summed in the notice that counts the rest
_NOTICE_BYTES = {"gap": "missing", "resync": "length", "undecodable": "size", "sasl_token": "size",
                 "orphan_response": "response_size"}
# Responses with no request are folded the same way (a capture of one direction holds nothing
# else); the notice that counts them has this kind, and what they are in its text
ORPHAN = "orphan_response"
_FOLDED_TEXT = {ORPHAN: "responses with no request seen"}


def _problem(what: str, offset: int | None, severity: str = ERROR, side: str | None = None) -> dict:
    """A problem of the exchange itself (not of a body), in the form the bodies' problems take."""
    d = Problem(what, "", offset, severity).to_dict()
    if side is not None:
        d["side"] = side
    return d


def _problem_dicts(problems: list[Problem], side: str) -> list[dict]:
    out = []
    for p in problems:
        d = p.to_dict()
        d["side"] = side
        out.append(d)
    return out


def error_codes_py(body, out: list[int]) -> None:
    """Every non-zero error code in a decoded body, depth first (record sets are skipped).

    Exact types, and only containers recursed into: a Fetch response's walk visits each of its
    thousands of values once (isinstance and a call per number cost 0.1 s on a 322 MB capture)."""
    if type(body) is list:
        for item in body:
            if type(item) is dict or type(item) is list:
                error_codes_py(item, out)
        return
    if type(body) is not dict:
        return
    for key, value in body.items():
        kind = type(value)
        if kind is int:
            if value and type(key) is str and key.endswith("error_code"):
                out.append(value)
        elif kind is dict or (kind is list and key != "records"):
            error_codes_py(value, out)


# native/_bodies.c's error_codes: error_codes_py's codes in the same order, in C
_error_codes = native.bodies.error_codes if native.bodies is not None else error_codes_py


RAW = "_raw"  # [request payload, request body offset, response payload or None, response body offset,
              #  show secrets (else bodies are redacted, see secrets.py)]


def produce_acks(api_version: int, payload: bytes, at: int) -> int | None:
    """The acks of a Produce request, read without decoding the body (acks=0: no response comes)."""
    try:
        if api_version >= 3:  # transactional_id comes first
            if api_version >= 9:
                if payload[at] < 0x80:  # a one-byte length, as nearly always (0: no transactional id)
                    length, at = payload[at], at + 1
                else:
                    got = read_uvarint(payload, at, len(payload))
                    if got is None:
                        return None
                    length, at = got
                at += max(length - 1, 0)
            else:
                (length,) = _I16.unpack_from(payload, at)
                at += 2 + max(length, 0)
        return _I16.unpack_from(payload, at)[0]
    except (struct.error, IndexError):
        return None


def complete(exchange: dict, topics: TopicNames, budget: Budget | None = None) -> dict:
    """Decodes the bodies an exchange carries raw, in place: request, response, error codes, topic names.

    Kept apart from pairing so that it can run later or in another process; ``topics`` must have
    learned from the responses before this one (see TopicNames). ``budget`` (kinspect.limits) is
    the caller's unit of work: it is granted this exchange's bytes here; the caller decides when
    the records held so far were written out (Budget.next_unit).
    """
    raw = exchange.pop(RAW, None)
    if raw is None:
        return exchange
    api_key, api_version = exchange["api_key"], exchange["api_version"]
    problems = exchange["problems"]
    request_payload, request_at, response_payload, response_at, show_secrets = raw
    if budget is not None:
        budget.grant(len(request_payload) + (len(response_payload) if response_payload is not None else 0))
    body, found = messages.decode_body(api_key, api_version, "request", request_payload, start=request_at,
                                       budget=budget)
    if found:
        problems += _problem_dicts(found, "request")
    if response_payload is not None:
        response, found = messages.decode_body(api_key, api_version, "response", response_payload,
                                               start=response_at, budget=budget)
        if found:
            problems += _problem_dicts(found, "response")
        topics.learn(api_key, response)
        topics.annotate(response)
        exchange["response"] = response
        codes: list[int] = []
        _error_codes(response, codes)
        if codes:
            exchange["error_codes"] = list(dict.fromkeys(apis.error_name(c) for c in codes))
    if not show_secrets:
        secrets.redact(api_key, body, exchange["response"])
    topics.annotate(body)
    exchange["request"] = body
    return exchange


# (api key, version) of a known API -> (its name, its response header version): looked up once
# a run, not thrice an exchange; only known versions are kept, so it stays as small as apis' table
_KNOWN: dict[tuple[int, int], tuple[str, int]] = {}


def _known(api_key: int, api_version: int) -> tuple[str, int] | None:
    """(name, response header version) of a known API version, or None when it is not known."""
    facts = _KNOWN.get((api_key, api_version))
    if facts is None and apis.is_known(api_key, api_version):
        facts = _KNOWN[api_key, api_version] = (apis.api_name(api_key),
                                                apis.response_header_version(api_key, api_version))
    return facts


# No request waiting: shared by every connection until its first request (never written to)
_NO_PENDING: OrderedDict = OrderedDict()


@functools.lru_cache(maxsize=16)
def _request_predicate(max_frame: int):
    """Whether a request frame may start at buf[pos:end] (for resynchronising), one per max_frame."""
    def plausible(buf, pos: int, end: int):
        return plausible_request(buf, pos, end, max_frame)
    return plausible


class Connection:
    """Decodes one TCP connection known to carry Kafka. Methods return lists of output records."""

    def __init__(self, label: str, *, max_frame: int, client_syn: bool, server_syn: bool,
                 decode_bodies: bool = True, show_secrets: bool = False, held: list | None = None,
                 reserved: list | None = None, frames: list | None = None, packet: list | None = None):
        """Exchanges come out with their bodies raw (under RAW); ``complete`` decodes them,
        redacting secrets unless ``show_secrets``. ``held``: [bytes of unanswered requests],
        shared by the connections of a session, which hold at most twice max_frame of them;
        ``reserved`` likewise bounds the frames being collected (see FrameBuffer); ``frames``:
        [frames and skipped stretches framed], counted for the session's work; ``packet``: [the
        number of the packet being read] (see FrameBuffer), for the exchanges' frame numbers."""
        self.label = label
        self.frames = [0] if frames is None else frames
        self.folded: dict | None = None  # notice kind -> [notices, bytes of those not shown] (_shown)
        self.held = [0, 0] if held is None else held  # [bytes, the most there have been]
        self.max_frame = max_frame
        self.max_held = 2 * max_frame
        self.decode_bodies = decode_bodies
        self.show_secrets = show_secrets
        self.sasl: RawSasl | None = None  # after a SaslHandshake v0 (see wire/sasl.py)
        self.reserved = reserved
        self.packet = packet
        # Each object a connection holds costs every full collection of the cyclic GC (200k
        # half-open connections: half the run), so the requests' predicate is shared, and the
        # responses' buffer and the pending requests are made when first needed.
        self.requests = FrameBuffer(_request_predicate(max_frame), max_frame, not client_syn, reserved, packet)
        self._responses: FrameBuffer | None = None
        self._server_hunting = not server_syn
        # by correlation id, oldest first: an OrderedDict gives up its oldest in O(1)
        self.pending: OrderedDict[int, tuple[dict, int]] = _NO_PENDING
        self.client_flow = None  # the client side's flow, and which sides ended (1 client, 2 server):
        self.ended = 0           # KafkaSession's, which routes both flows to this connection

    @property
    def responses(self) -> FrameBuffer:
        if self._responses is None:
            self._responses = FrameBuffer(self._plausible_response, self.max_frame, self._server_hunting,
                                          self.reserved, self.packet)
        return self._responses

    # -- feeding -------------------------------------------------------------------------------

    def client_data(self, data, ts: float) -> list:
        items = self.requests.feed(data, ts)
        if not items:
            return items  # most segments end no frame
        if len(items) == 1 and type(items[0]) is Frame:  # and most that do, one
            self.frames[0] += 1
            out: list = []
            self._request(items[0], out)
            return out
        return self._frames(items, self._request)

    def server_data(self, data, ts: float) -> list:
        items = self.responses.feed(data, ts)
        if not items:
            return items
        if len(items) == 1 and type(items[0]) is Frame:
            self.frames[0] += 1
            out: list = []
            self._response(items[0], out)
            return out
        return self._frames(items, self._response)

    def client_gap(self, missing: int, ts: float) -> list:
        return self._frames(self.requests.gap(missing, ts), self._request, gap=("client", missing, ts))

    def server_gap(self, missing: int, ts: float) -> list:
        return self._frames(self.responses.gap(missing, ts), self._response, gap=("server", missing, ts))

    def close(self, ts: float) -> list:
        """Both directions are over (or the capture is): flush and report unanswered requests,
        then how many notices of each kind were only counted."""
        out = self._frames(self.requests.flush(ts), self._request)
        if self._responses is not None:
            out += self._frames(self._responses.flush(ts), self._response)
            self._responses = None  # its predicate, a bound method, made a cycle: freed now, no GC
        if self.pending:
            for exchange, _ in self.pending.values():
                exchange["problems"].append(_problem("no response seen before the connection or capture "
                                                     "ended", None, INFO))
                self.held[0] -= exchange["request_size"]
                out.append(exchange)
            self.pending.clear()
        if self.folded is not None:
            for kind, (n, size) in self.folded.items():
                if n > NOTICES_SHOWN:
                    more = n - NOTICES_SHOWN
                    what = _FOLDED_TEXT.get(kind) or f"{kind} notices"
                    notice = self._notice(ts, kind, f"{more} more {what} on this connection like the "
                                          f"ones above ({n} in all; the first {NOTICES_SHOWN} are shown)", more=more)
                    if kind in _NOTICE_BYTES:
                        notice[_NOTICE_BYTES[kind]] = size
                    out.append(notice)
            self.folded = None
        return out

    def expire(self, before: float, timeout: float) -> list:
        """Pending requests sent before ``before``, taken out with a "no response" problem."""
        out: list = []
        pending = self.pending
        while pending:
            exchange, _ = next(iter(pending.values()))  # oldest first
            if exchange["request_time"] is None or exchange["request_time"] >= before:
                break
            out.append(self._oldest())
            exchange["problems"].append(_problem(f"no response within {timeout:g} s (--pending-timeout)",
                                                 None, INFO))
        return out

    def _frames(self, items: list, handle, gap=None) -> list:
        out: list = []
        self.frames[0] += len(items)
        if gap is not None:
            side, missing, ts = gap
            if self._shown("gap", missing):
                out.append(self._notice(ts, "gap", f"{missing} bytes lost from the {side} side "
                                        "(segments missing from the capture)", missing=missing))
        for item in items:
            if type(item) is Frame:
                handle(item, out)
            elif self._shown("resync", item.length):
                what = item.reason if not item.length else f"{item.reason} ({item.length} bytes)"
                out.append(self._notice(item.ts, "resync", what, stream_offset=item.offset,
                                        length=item.length))
        return out

    def _shown(self, kind: str, size: int) -> bool:
        """Whether a notice of ``kind`` about ``size`` bytes is shown, or only counted (see NOTICES_SHOWN)."""
        folded = self.folded
        if folded is None:
            folded = self.folded = {}
        count = folded.get(kind)
        if count is None:
            folded[kind] = [1, 0]
            return True
        count[0] += 1
        if count[0] <= NOTICES_SHOWN:
            return True
        count[1] += size
        return False

    def _notice(self, ts: float, kind: str, what: str, **extra) -> dict:
        notice = {"type": "notice", "conn": self.label, "time": ts, "kind": kind, "what": what}
        notice.update(extra)
        return notice

    # -- plausibility while resynchronising ----------------------------------------------------

    def _plausible_response(self, buf, pos: int, end: int):
        if end - pos < 8:
            return None
        size, correlation_id = _I32X2.unpack_from(buf, pos)
        if size < 4 or size > self.max_frame:
            return False
        pending = self.pending
        if correlation_id in pending:
            return True
        if size > HUNT_MAX_UNPAIRED or correlation_id < 0:
            return False
        if pending and not -HUNT_NEAR <= correlation_id - next(iter(pending)) <= HUNT_NEAR:
            return False  # responses come in request order: an unpaired one answers a request near the oldest
        nxt = pos + 4 + size
        if nxt == end:
            return True  # a frame that ends where the bytes seen so far end (a segment's end)
        if nxt + 8 > end:  # undecided until its end is seen, unless an answer is seen before that
            return False if self._answer_within(buf, pos + 1, min(end, nxt)) else None
        size2, correlation_id2 = _I32X2.unpack_from(buf, nxt)
        return 4 <= size2 <= self.max_frame and (
            correlation_id2 in self.pending or 0 < correlation_id2 - correlation_id <= 64)

    def _answer_within(self, buf, lo: int, hi: int) -> bool:
        """Does a frame answering one of the oldest pending requests (its size, then its correlation
        id) start in buf[lo:hi], within HUNT_AHEAD bytes? Such a start outweighs an unpaired one
        whose end is still to come, which could otherwise hold the hunt for up to
        HUNT_MAX_UNPAIRED bytes. Found with bytes.find: the hunt asks this at every position."""
        hi = min(hi, lo + HUNT_AHEAD)
        for correlation_id in islice(self.pending, 4):
            needle = _I32.pack(correlation_id)
            at = buf.find(needle, lo + 4, hi + 4)
            while at >= 0:
                (size,) = _I32.unpack_from(buf, at - 4)
                if 4 <= size <= self.max_frame:
                    return True
                at = buf.find(needle, at + 1, hi + 4)
        return False

    # -- requests and responses ----------------------------------------------------------------

    def _request(self, frame: Frame, out: list) -> None:
        payload = frame.payload
        if self.sasl is not None:
            if self.sasl.client_frame(payload):
                if self._shown("sasl_token", frame.size):
                    out.append(self._sasl_token(frame, "client"))
                return
            if self.sasl.over:
                self.sasl = None
        header = parse_request_header(payload)
        if header is None:
            if self._shown("undecodable", frame.size):
                out.append(self._notice(frame.ts, "undecodable", "request header does not parse",
                                        stream_offset=frame.offset, size=frame.size))
            return
        api_key, api_version = header.api_key, header.api_version
        problems: list[dict] = []
        raw = None
        known = _known(api_key, api_version)
        if frame.damaged:
            problems.append(_problem(f"{frame.damaged} bytes of this request were lost from the capture: "
                                     "body not decoded", len(payload)))
        elif known is None:
            problems.append(_problem(f"unknown API key {api_key} version {api_version}: body kept "
                                     "undecoded", header.size))
        elif self.decode_bodies:
            raw = [payload, header.size, None, 0, self.show_secrets]
        if api_key == SASL_HANDSHAKE and api_version == 0 and not frame.damaged:
            self.sasl = RawSasl(header.correlation_id, payload, header.size)
        exchange = {
            "type": "exchange", "conn": self.label, "api_key": api_key,
            "api_name": known[0] if known is not None else apis.api_name(api_key), "api_version": api_version,
            "correlation_id": header.correlation_id, "client_id": header.client_id,
            "request_time": frame.first_ts, "response_time": None, "latency_ms": None,
            "request_size": frame.size + 4, "response_size": None,
            "request": None, "response": None, "error_codes": [], "problems": problems,
        }
        if frame.packet:  # a capture's: Wireshark's frame numbers of its first and last packet
            exchange["request_frames"] = [frame.first_packet, frame.packet]
        if raw is not None:
            exchange[RAW] = raw
        if api_key == 0 and raw is not None and produce_acks(api_version, payload, header.size) == 0:
            exchange["response_expected"] = False
            out.append(exchange)
            return
        previous = self._unanswered(header.correlation_id)
        if previous is not None:
            previous[0]["problems"].append(_problem("correlation id reused before a response was seen",
                                                    None, WARNING))
            out.append(previous[0])
        if self.pending is _NO_PENDING:
            self.pending = OrderedDict()
        if len(self.pending) >= MAX_PENDING:
            out.append(self._oldest())
        self.pending[header.correlation_id] = (exchange, known[1] if known is not None else
                                               apis.response_header_version(api_key, api_version))
        held = self.held
        held[0] += exchange["request_size"]
        if held[0] > held[1]:
            held[1] = held[0]
        while self.held[0] > self.max_held and len(self.pending) > 1:
            # a capture of one direction, say: the oldest go out unanswered, not into memory
            early = self._oldest()
            early["problems"].append(_problem(
                f"no response seen yet when more than {self.max_held} bytes of requests were waiting "
                f"for one (twice --max-frame): written out without it", None, INFO))
            out.append(early)

    def _oldest(self) -> dict:
        """The exchange waiting longest for its response, taken out."""
        _, (exchange, _) = self.pending.popitem(last=False)
        self.held[0] -= exchange["request_size"]
        return exchange

    def _unanswered(self, correlation_id: int):
        """The pending (exchange, response header version) of correlation_id, taken out."""
        entry = self.pending.pop(correlation_id, None)
        if entry is not None:
            self.held[0] -= entry[0]["request_size"]
        return entry

    def _response(self, frame: Frame, out: list) -> None:
        payload = frame.payload
        if self.sasl is not None and self.sasl.server_frame(payload):
            if self._shown("sasl_token", frame.size):
                out.append(self._sasl_token(frame, "server"))
            return
        if len(payload) < 4:
            if self._shown("undecodable", frame.size):
                out.append(self._notice(frame.ts, "undecodable", "response shorter than a correlation id",
                                        stream_offset=frame.offset, size=frame.size))
            return
        (correlation_id,) = _I32.unpack_from(payload)
        entry = self.pending.pop(correlation_id, None)  # _unanswered, inline
        if entry is not None:
            self.held[0] -= entry[0]["request_size"]
        else:
            if self._shown(ORPHAN, frame.size + 4):
                orphan = {"type": ORPHAN, "conn": self.label, "correlation_id": correlation_id,
                          "response_time": frame.ts, "response_size": frame.size + 4,
                          "what": "response with no request seen (the capture may have started after it)"}
                if frame.packet:
                    orphan["response_frames"] = [frame.first_packet, frame.packet]
                out.append(orphan)
            return
        exchange, header_version = entry
        exchange["response_time"] = frame.ts
        exchange["response_size"] = frame.size + 4
        if frame.packet:
            exchange["response_frames"] = [frame.first_packet, frame.packet]
        if exchange["request_time"] is not None:
            exchange["latency_ms"] = round((frame.ts - exchange["request_time"]) * 1000.0, 3)
        problems = exchange["problems"]
        if header_version == 1 and len(payload) > 4 and not payload[4]:
            parsed = (correlation_id, 5, None)  # no tagged fields: what parse_response_header gives
        else:
            parsed = parse_response_header(payload, header_version)
        if frame.damaged:
            problems.append(_problem(f"{frame.damaged} bytes of this response were lost from the capture: "
                                     "body not decoded", len(payload), side="response"))
        elif parsed is None:
            problems.append(_problem("response header does not parse", 0, side="response"))
        else:
            if self.sasl is not None:
                self.sasl.answered(correlation_id, payload, parsed[1])
            if RAW in exchange:
                raw = exchange[RAW]
                raw[2], raw[3] = payload, parsed[1]
        out.append(exchange)

    def _sasl_token(self, frame: Frame, side: str) -> dict:
        """A raw SASL token (no Kafka header) after a SaslHandshake v0, secrets redacted."""
        token = frame.payload
        if not self.show_secrets:
            token = secrets.client_token(token) if side == "client" else secrets.server_token(token)
        shown = token if isinstance(token, str) else token[:SHOWN_TOKEN].decode("utf-8", "backslashreplace")
        if len(token) > SHOWN_TOKEN:
            shown = shown[:SHOWN_TOKEN] + "…"
        mechanism = self.sasl.mechanism
        return self._notice(frame.ts, "sasl_token", f"raw SASL {mechanism} token from the {side} "
                            f"({frame.size} bytes): {shown!r}", severity=INFO, side=side,
                            mechanism=mechanism, size=frame.size, token=token)
