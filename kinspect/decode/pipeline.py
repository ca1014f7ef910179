"""The decode adapter: a packet source feeds link decode, TCP reassembly and the Kafka session.

This is the only place where the pieces meet; each of them is sans-I/O and knows nothing of
the others. The seam (capture/stream.py) is the packet source: a capture file or stdin
(``open_capture``), or any object with the same face (``PacketSource``), such as a live interface
(capture/live.py). All of them feed the one TCP → Kafka path below; nothing is decoded anywhere else.

The other side of the seam is the stream source (``StreamSource``): connections already split
into their two byte streams, as a proxy relays them. No link or TCP layer: its events
(``StreamOpen`` with the client's flow, then StreamData, StreamGap and StreamEnd, and ticks) feed
the same Kafka session.

What comes out, ``raw_records()``, is finished by decode/finish.py (``records()`` does it).

TLS (tls/layer.py) sits between the two on the packet path: every new direction is watched until
its first bytes say whether it is TLS; a plaintext direction then leaves ``watch`` and its events
go straight to the session, a TLS one's come out of the layer as plaintext events (and notices).
Exchanges of decrypted connections carry ``"tls": {"version", "cipher"}``. Secrets come from
``keylog`` and from a pcapng's Decryption Secrets Blocks (``capture.secrets``).

A live source also yields ticks, ``(now, TICK, b"", 0)``, when no packet came for a while: on
them the run expires requests waiting longer than ``pending_timeout`` for their response (they
go out as "no response" exchanges) and connections idle longer than ``idle_timeout``, and calls
``on_tick(now)``, so that the caller can refresh its figures or stop. Files never tick.
"""

from __future__ import annotations

import math
from typing import Callable, Iterator

from kinspect.capture.flows import flow_shard
from kinspect.capture.link import decoder_for
from kinspect.capture.pcapng import TLS_KEY_LOG
from kinspect.capture.source import CaptureError, open_capture
from kinspect.capture.stream import TICK, StreamData, StreamEnd, StreamGap, StreamOpen, StreamStart
from kinspect.capture.tcp import TcpReassembler
from kinspect.decode.finish import decoded_records
from kinspect.limits import DEFAULT_LIMITS, RECORDS_FLOOR, Budget, Limits
from kinspect.tls.keylog import KeyLog
from kinspect.tls.layer import MAX_MARKS, TlsLayer
from kinspect.wire.frames import MAX_FRAME
from kinspect.wire.session import DEFAULT_PORTS, UNDECIDED_LIMIT, KafkaSession
from kinspect.wire.topics import RecordedTopicNames, TopicNames

PROGRESS_EVERY = 4096  # packets between progress callbacks
MAX_CONNECTIONS = 20_000  # TCP connections followed at once (--max-connections)
# Notices of connections closed at once (an expiry sweep, or the capture's end) kept per kind;
# the rest are counted in one more notice, so 200k half-open connections make a few hundred
# lines, not one each (the counts in decode --summary stay whole)
NOTICES_AT_ONCE = 10
EXPIRE_EVERY = 1.0  # seconds between expiry passes over pending requests and idle connections
TLS_PATIENCE = 5.0  # seconds a live run holds a TLS connection's records while its keys may still come
OWNERS_CACHED = 1 << 16  # flows whose shard a run of some connections (``flows``) remembers
# Bytes of work a Kafka frame counts for in a gzip'ed capture's bound (capture/source.py), on top
# of its bytes: a frame costs time whatever its size (a 16-byte request is an exchange decoded
# and written, 12-24 us). Honest captures hold about one frame per 70 compressed bytes, and one
# of nothing but heartbeats one per 16 (about 60 bytes of work per compressed byte in all)
FRAME_WORK = 512
# a run of some connections (``flows``): the most its frames took of what a gzip'ed capture's bound
# left them, per million; the whole run's frames stay within it while the shards' sum does
GZIP_SHARE = "gzip work for frames (per million of what the bound left)"
PER_MILLION = 1_000_000


def _dispatch(session: KafkaSession, event) -> list:
    kind = type(event)
    if kind is StreamData:  # raw_records hands stream data to the session itself; finish() comes here
        return session.data(event.flow, event.ts, event.data)
    if kind is StreamStart:
        return session.start(event.flow, event.ts, event.syn)
    if kind is StreamGap:
        return session.gap(event.flow, event.ts, event.missing)
    return session.end(event.flow, event.ts, event.reason)


class _NoticeCap:
    """Passes the records of connections closed at once, keeping the first NOTICES_AT_ONCE
    notices of each kind and counting the rest (exchanges and responses all pass)."""

    __slots__ = ("seen", "limit", "stood_for", "dropped")

    def __init__(self, limit: int | None = NOTICES_AT_ONCE):
        self.seen: dict = {}  # kind -> notices (lines) given to ``passed``
        # kind -> how many notices they stood for: a connection's notice that counts the rest of
        # its kind (wire.exchange's NOTICES_SHOWN) stands for them all; of all, of those not passed
        self.stood_for: dict = {}
        self.dropped: dict = {}
        self.limit = limit  # None: every notice passes (and is counted in ``seen``)

    def passed(self, records: list):
        seen, stood_for = self.seen, self.stood_for
        limit = self.limit
        for record in records:
            if record["type"] == "notice":
                kind = record["kind"]
                n = seen.get(kind, 0) + 1
                seen[kind] = n
                weight = record.get("more", 1)
                stood_for[kind] = stood_for.get(kind, 0) + weight
                if limit is not None and n > limit:
                    self.dropped[kind] = self.dropped.get(kind, 0) + weight
                    continue
            yield record

    def counted(self, ts: float, which: str):
        """One notice per kind past the ones kept: how many more there were (``more``)."""
        if self.limit is None:
            return
        for kind, more in self.dropped.items():
            yield {"type": "notice", "conn": "", "time": ts, "kind": kind,
                   "what": f"{more} more {kind} notices like the ones above, of connections {which} "
                           f"({self.stood_for[kind]} in all; the first {NOTICES_AT_ONCE} are shown)",
                   "more": more}


class _MoreKeys:
    """Asked by the TLS layer when a connection's keys are missing: the secrets the capture read
    since (pcapng Decryption Secrets Blocks), and what the key-log files gained. (An object, not
    a bound method of DecodeRun: that would make a reference cycle.)"""

    __slots__ = ("keylog", "capture", "read")

    def __init__(self, keylog: KeyLog) -> None:
        self.keylog = keylog
        self.capture = None  # set when the run starts reading
        self.read = 0

    def __call__(self) -> int:
        added = 0
        secrets = getattr(self.capture, "secrets", None)
        while secrets and self.read < len(secrets):
            kind, data = secrets[self.read]
            self.read += 1
            if kind == TLS_KEY_LOG:
                added += self.keylog.add_text(data, "pcapng decryption secrets block")
        return added + self.keylog.refresh()


def _named(records: Iterator[dict], name: str) -> Iterator[dict]:
    for record in records:
        record["capture"] = name
        yield record


class CaptureUnreadable(Exception):
    """The input is not a capture, cannot be opened, or holds only unsupported link types."""


class DecodeRun:
    """One capture decoded: iterate ``records()``, then read the counters and capture problems."""

    def __init__(self, source, *, ports=DEFAULT_PORTS, heuristic: bool = True, max_frame: int = MAX_FRAME,
                 decode_bodies: bool = True, limits: Limits = DEFAULT_LIMITS,
                 max_connections: int = MAX_CONNECTIONS, show_secrets: bool = False,
                 pending_timeout: float | None = None, idle_timeout: float | None = None,
                 on_tick: Callable[[float], None] | None = None,
                 keep_record: Callable[[dict], bool] | None = None, keylog: KeyLog | None = None,
                 flows: tuple[int, int] | None = None, capture_name: str | None = None):
        """``source``: a path, ``-`` or a binary file object (opened with open_capture), or a
        PacketSource (a live one). ``pending_timeout``/``idle_timeout`` (seconds) act on ticks.
        ``keep_record(record)``: asked of every record, raw and in order (the same sequence in
        every run of one input); ``records()`` gives only those it keeps, decoding the others'
        bodies only as far as topic names need. Runs whose ``keep_record`` partition the records
        give together one run's records. ``capture_name``: every record carries it as ``capture``
        (decode of several captures names each record's).
        ``keylog``: TLS secrets (tls/keylog.py); TLS is detected and reported without it too.
        ``flows`` (shard, shards): decode only the TCP connections of that shard (capture/flows.py),
        leaving the others' packets unread where the C reader can tell them. The notices of
        connections still open at the end then all pass, counted by kind in ``end_notices``.
        Such runs' records together are one run's when kinspect.decode.shards.not_whole finds nothing
        in their ``flows_report()``s."""
        self.source = source
        self.keep_record = keep_record
        self.flows = flows if flows is not None and flows[1] > 1 else None
        self.end_notices: dict[str, int] = {}
        self.unread = 0  # with flows: packets of other shards' connections the C reader left out
        self._reassembler: TcpReassembler | None = None
        self.budget: Budget | None = None  # the finishing step's (decode/finish.py); flows_report reads it
        self.limits = limits
        self.max_connections = max_connections
        self.pending_timeout = pending_timeout
        self.idle_timeout = idle_timeout
        self.on_tick = on_tick
        self.session = KafkaSession(ports, heuristic=heuristic, max_frame=max_frame, decode_bodies=decode_bodies,
                                    show_secrets=show_secrets)
        self.topics = RecordedTopicNames() if self.flows else TopicNames()
        self.capture_name = capture_name
        self.keylog = keylog if keylog is not None else KeyLog()
        self.tls = TlsLayer(self.keylog, more_keys=_MoreKeys(self.keylog),
                            patience=TLS_PATIENCE if on_tick is not None else 0.0)
        self.capture_problems: list = []
        self.packets = 0
        self.tcp_packets = 0
        self.unsupported_links: dict[int, int] = {}
        self._capture = None
        if hasattr(source, "packets") or hasattr(source, "streams"):  # a Packet- or StreamSource, open
            self._capture, self._error = source, None
            return
        try:
            self._capture = open_capture(source, limits)
        except CaptureError as e:
            self._error = e
        except OSError as e:
            self._error = CaptureError(f"{source}: {e.strerror or e}")
        else:
            self._error = None

    def _timeouts(self, session: KafkaSession, reassembler: TcpReassembler, now: float) -> Iterator[dict]:
        """Requests waiting past pending_timeout, then connections idle past idle_timeout."""
        if self.pending_timeout is not None:
            yield from self._marked(session.expire_pending(now - self.pending_timeout, self.pending_timeout))
        if self.tls.waiting:
            yield from self._tls(session, self.tls.tick(now))
        if self.idle_timeout is not None:
            cap = _NoticeCap()
            for event in reassembler.expire_idle(now - self.idle_timeout, now):
                yield from cap.passed(self._route(session, event))
            yield from cap.counted(now, f"idle for more than {self.idle_timeout:g} s")

    def _expired_notice(self, ts: float, directions: int) -> dict:
        return {"type": "notice", "conn": "", "time": ts, "kind": "expired",
                "what": f"{directions} stream directions expired: more than {self.max_connections} "
                        f"TCP connections were open at once, so those idle longest were closed "
                        f"(their unanswered requests are reported; raise it with --max-connections)",
                "directions": directions}

    def _expiry(self, session: KafkaSession, events: list, ts: float) -> Iterator[dict]:
        """The records of a packet whose stream made the reassembler expire the idle longest:
        their notices capped per kind, then one notice for the sweep."""
        cap = _NoticeCap()
        expired = 0
        for event in events:
            if type(event) is StreamEnd and event.reason == "expired":
                expired += 1
            yield from cap.passed(self._route(session, event))
        yield from cap.counted(ts, "closed at once when they expired")
        if expired:
            yield self._expired_notice(ts, expired)

    def _tls(self, session: KafkaSession, items: list) -> list:
        """The TLS layer's events into the session; exchanges of decrypted connections marked."""
        if not items:
            return items
        marks = self.tls.marks
        out: list = []
        for item in items:
            if type(item) is dict:
                out.append(item)
                continue
            records = _dispatch(session, item)
            if records:
                for record in records:
                    if record["type"] != "notice":
                        mark = marks.get(record.get("conn"))
                        if mark is not None:
                            record["tls"] = mark
                out += records
        return out

    def _route(self, session: KafkaSession, event):
        """A stream event other than a plaintext direction's data, through the TLS layer."""
        tls = self.tls
        kind = type(event)
        if kind is StreamStart:
            tls.start(event.flow)
            return _dispatch(session, event)
        if event.flow not in tls.watch:
            return _dispatch(session, event)
        if kind is StreamData:
            return self._tls(session, tls.data(event.flow, event.ts, event.data))
        if kind is StreamGap:
            return self._tls(session, tls.gap(event.flow, event.ts, event.missing))
        return self._tls(session, tls.end(event.flow, event.ts, event.reason))

    def _marked(self, records) -> Iterator[dict]:
        marks = self.tls.marks
        for record in records:
            if marks and record["type"] != "notice":
                mark = marks.get(record.get("conn"))
                if mark is not None:
                    record["tls"] = mark
            yield record

    @property
    def tls_connections(self) -> int:
        return self.tls.connections

    @property
    def tls_undecrypted(self) -> int:
        return self.tls.undecrypted

    @property
    def size(self) -> int | None:
        return self._capture.size if self._capture is not None else None

    @property
    def kafka_connections(self) -> int:
        return self.session.kafka_connections

    def records(self, progress: Callable[[int], None] | None = None, pack_records: bool = False) -> Iterator[dict]:
        """Every output record in order, exchanges finished (decode/finish.py's decoded_records);
        ``pack_records``: regular batches may keep their records as bytes (records/packed.py),
        for a reader that needs only their count."""
        return decoded_records(self, progress, pack_records)

    def raw_records(self, progress: Callable[[int], None] | None = None) -> Iterator[dict]:
        """Output records in order; exchanges carry their bodies raw (``exchange.complete`` decodes)."""
        records = self._raw_records(progress)
        if self.capture_name is None:
            return records
        return _named(records, self.capture_name)

    def _raw_records(self, progress: Callable[[int], None] | None = None) -> Iterator[dict]:
        if self._error is not None:
            raise CaptureUnreadable(str(self._error).removeprefix(f"{self.source}: "))
        if self._capture is None:
            raise CaptureUnreadable("already read")
        capture = self._capture
        if hasattr(capture, "streams"):
            yield from self._stream_records(capture)
            return
        session = self.session
        watch = self.tls.watch
        self.tls.more_keys.capture = capture
        reassembler = self._reassembler = TcpReassembler(max_streams=2 * self.max_connections)
        if hasattr(capture, "work"):
            frames = session.frames
            capture.work = lambda: FRAME_WORK * frames[0]
            capture.work_note = f"each Kafka frame {FRAME_WORK} more"
        flows = self.flows
        if flows is not None:
            shard, shards = flows
            if hasattr(capture, "only_flows"):
                capture.only_flows(shard, shards)
            owned: dict = {}  # flow -> whether it is this shard's
            topics = self.topics
        last_number = 0
        last_ts = 0.0
        packet = session.packet  # [the number of the packet read], for frame numbers
        sweeps = 0
        packets = tcp_packets = 0
        linktype_seen, decode = None, None
        next_expiry = 0.0
        with capture:
            for ts, linktype, data, number in capture.packets():
                if linktype != linktype_seen:  # captures rarely mix link types: look up once a run
                    if linktype == TICK:  # a live source's pause: expire, then let the caller look
                        self.packets, self.tcp_packets = packets, tcp_packets
                        if ts >= next_expiry:
                            next_expiry = ts + EXPIRE_EVERY
                            yield from self._timeouts(session, reassembler, ts)
                        if self.on_tick is not None:
                            self.on_tick(ts)
                        continue
                    linktype_seen, decode = linktype, decoder_for(linktype)
                packets += 1
                if progress is not None and not packets % PROGRESS_EVERY:
                    progress(capture.bytes_read)
                segment = decode(data) if decode is not None else None
                if segment is None:
                    if decode is None:
                        self.unsupported_links[linktype] = self.unsupported_links.get(linktype, 0) + 1
                    continue
                tcp_packets += 1
                last_ts = ts
                src, dst, sport, dport, seq, flags, payload, ack = segment
                if flows is not None:
                    last_number = number
                    mine = owned.get((src, sport, dst, dport))
                    if mine is None:
                        if len(owned) >= OWNERS_CACHED:
                            owned.clear()
                        mine = owned[src, sport, dst, dport] = flow_shard(src, sport, dst, dport, shards) == shard
                    if not mine:
                        continue
                    topics.position = number
                packet[0] = number
                events = reassembler.segment(ts, src, sport, dst, dport, seq, flags, payload, ack)
                if reassembler.sweeps != sweeps:  # past --max-connections: the idle longest expired
                    sweeps = reassembler.sweeps
                    yield from self._expiry(session, events, ts)
                    continue
                for event in events:
                    # nearly every event: a plaintext direction's data, straight to the session
                    if type(event) is StreamData and event[0] not in watch:
                        out = session.data(event[0], ts, event[2])
                        if out:
                            yield from out
                    else:
                        yield from self._route(session, event)
            if flows is not None:
                skipped = self.unread = getattr(capture, "skipped", 0)
                packets += skipped
                tcp_packets += skipped
                if skipped and capture.last_skipped[0] > last_number:
                    last_ts = capture.last_skipped[1]
                topics.position = packets + 1  # after every packet: the capture's end
            cap = _NoticeCap(None if flows is not None else NOTICES_AT_ONCE)
            for event in reassembler.finish(last_ts):
                yield from cap.passed(self._route(session, event))
            yield from cap.passed(self._tls(session, self.tls.finish(last_ts)))
            yield from cap.passed(self._marked(session.finish(last_ts)))
            yield from cap.counted(last_ts, "still open when the capture ended")
            self.end_notices = dict(cap.seen)
            self.capture_problems = list(capture.problems)
        self.packets, self.tcp_packets = packets, tcp_packets
        if tcp_packets == 0 and self.unsupported_links:
            kinds = ", ".join(f"{k} ({n} packets)" for k, n in sorted(self.unsupported_links.items()))
            raise CaptureUnreadable(f"unsupported link type {kinds}: kinspect reads Ethernet, Linux SLL/SLL2, "
                                    "BSD loopback and raw IP; re-capture with tcpdump -i any, or convert")

    def flows_report(self) -> dict:
        """After a run of some connections (``flows``): what kinspect.decode.shards needs from each
        shard to tell whether their records together are one whole run's. ``peaks``: the most
        each bound shared by every connection counted here; ``limits``: the bounds (a whole
        run acts past them); ``end_notices``; topic ids learned and looked up in vain (see
        RecordedTopicNames)."""
        r, session, topics = self._reassembler, self.session, self.topics
        budget = self.budget
        # what the exchanges decompressed and decoded beyond their bytes' grants: one run's
        # budget is its allowance less all of these together (limits.Budget); none finished, none
        inflate = (self.limits.max_batch_bytes, budget.inflate_low if budget else self.limits.max_batch_bytes)
        beyond = {"decompressed bytes beyond grants": inflate,
                  "records beyond grants": (RECORDS_FLOOR, budget.decode_low if budget else RECORDS_FLOOR)}
        peaks = {"streams": 0, "held": 0, "held_segments": 0, "closed": 0} if r is None else r.peaks
        return {
            "shard": list(self.flows or (0, 1)),
            "peaks": {"directions open": peaks["streams"], "out-of-order bytes": peaks["held"],
                      "out-of-order segments": peaks["held_segments"], "directions closed": peaks["closed"],
                      "undecided bytes": session.undecided_peak, "unanswered request bytes": session.held[1],
                      "big frame bytes": session.reserved[1], "TLS connections marked": self.tls.marks_peak,
                      GZIP_SHARE: math.ceil(PER_MILLION * min(getattr(self._capture, "work_share", 0.0), 2.0)),
                      **{name: base - low for name, (base, low) in beyond.items()}},
            "limits": {"directions open": r.max_streams if r else 0, "out-of-order bytes": r.max_held if r else 0,
                       "out-of-order segments": r.max_held_segments if r else 0,
                       "directions closed": r.remember_closed if r else 0, "undecided bytes": UNDECIDED_LIMIT,
                       "unanswered request bytes": 2 * session.max_frame, "big frame bytes": 2 * session.max_frame,
                       "TLS connections marked": MAX_MARKS, **{name: base for name, (base, _) in beyond.items()},
                      GZIP_SHARE: PER_MILLION},
            "end_notices": dict(self.end_notices),
            "learned": getattr(topics, "learned", {}), "unnamed": getattr(topics, "unnamed", {}),
            "overflow": getattr(topics, "overflow", False),
        }

    def _stream_records(self, source) -> Iterator[dict]:
        """A StreamSource's events into the session: no link, no TCP."""
        session = self.session
        last_ts = 0.0
        next_expiry = 0.0
        with source:
            for event in source.streams():
                kind = type(event)
                if kind is StreamData:
                    last_ts = event.ts
                    out = session.data(event.flow, event.ts, event.data)
                    if out:
                        yield from out
                elif kind is StreamOpen:
                    session.open(event.flow, event.ts)
                elif kind is StreamGap or kind is StreamEnd:
                    yield from _dispatch(session, event)
                else:  # a tick: (now, TICK)
                    now = event[0]
                    if self.pending_timeout is not None and now >= next_expiry:
                        next_expiry = now + EXPIRE_EVERY
                        yield from session.expire_pending(now - self.pending_timeout, self.pending_timeout)
                    if self.on_tick is not None:
                        self.on_tick(now)
            yield from session.finish(last_ts)
            self.capture_problems = list(source.problems)
