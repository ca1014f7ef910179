"""TCP reassembly, sans-I/O: segments in, per-direction in-order byte streams out.

Each direction of a connection is a stream named by its flow ``(src_ip, sport, dst_ip,
dport)``; the reverse direction is the swapped tuple. ``segment()`` and ``finish()`` return
lists of events (capture/stream.py), NamedTuples told apart by type (``type(ev) is StreamData``):

- ``StreamStart(flow, ts, syn)``: first sight of a direction; ``syn`` when it began with a SYN.
- ``StreamData(flow, ts, data)``: the next in-order bytes, each delivered once; ``ts`` is the
  time of the packet that completed them.
- ``StreamGap(flow, ts, missing)``: ``missing`` bytes never arrived; the stream goes on after them.
- ``StreamEnd(flow, ts, reason)``: "fin", "rst", "capture_end", "reused" when a SYN with a
  new initial sequence number replaced a stream whose end was not captured, or "expired" when
  more than ``max_streams`` directions were open and this one had been idle longest, or "idle"
  when ``expire_idle`` found it silent since before a given time (live capture).

Sequence numbers are unwrapped into absolute stream positions (0 = first payload byte), so
wraparound at 2**32 needs no special case. Out-of-order bytes wait in a per-direction buffer;
when it holds more than ``max_buffered`` bytes, or when the stream ends (RST, capture end),
the hole before them is declared a gap; so it is when all directions together hold more than
``max_held`` bytes or ``max_held_segments`` segments. A FIN waits for the bytes before it.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from operator import attrgetter

from kinspect.capture.stream import Flow, StreamData, StreamEnd, StreamGap, StreamStart

FIN, SYN, RST = 1, 2, 4
MASK = 0xFFFFFFFF
HALF = 0x80000000

_new = tuple.__new__
_LAST_TS = attrgetter("last_ts")


class _Direction:
    __slots__ = ("seq0", "next", "expect", "pending", "starts", "pending_bytes", "fin_at", "closed",
                 "last_ts")

    def __init__(self, seq0: int, ts: float) -> None:
        self.seq0 = seq0  # raw sequence number of stream position 0
        self.next = 0  # position of the next byte to deliver
        self.expect = seq0  # raw sequence number of that byte
        # position → out-of-order bytes (an empty dict is not tracked by the cyclic GC)
        self.pending: dict[int, bytes] = {}
        # the keys of pending as a heap: the first hole in O(log n); made when first needed, as
        # every object a direction holds costs each full GC collection (200k half-open streams)
        self.starts: list[int] | None = None
        self.pending_bytes = 0
        self.fin_at: int | None = None  # position of a FIN waiting for the bytes before it
        self.closed = False
        self.last_ts = ts

    def position(self, seq: int) -> int:
        """Absolute position of raw ``seq``, taken as the nearest to the next expected byte."""
        return self.next + ((seq - self.seq0 - self.next + HALF) & MASK) - HALF


class TcpReassembler:
    def __init__(self, max_buffered: int = 16 << 20, remember_closed: int = 65536,
                 max_streams: int = 100_000) -> None:
        """``max_buffered``: out-of-order bytes held per direction before a gap is declared.
        ``remember_closed``: ended directions kept so that their late retransmissions are
        ignored rather than taken for new streams; the oldest are forgotten beyond this.
        ``max_streams``: directions open at once; past it the longest idle eighth expire."""
        self.max_buffered = max_buffered
        self.max_streams = max_streams
        self._open = 0
        # out-of-order bytes and segments held across all directions, and their bounds
        self._held = self._held_segments = 0
        self.max_held = 4 * max_buffered
        self.max_held_segments = 8 * max(1024, max_buffered >> 8)
        # many tiny segments cost more memory than their bytes say: bound their number too
        self.max_pending_segments = max(1024, max_buffered >> 8)
        self.remember_closed = remember_closed
        self._streams: dict[Flow, _Direction] = {}  # the open directions
        # flow → seq0 of the directions that ended, in the order they ended: only their initial
        # sequence is kept (not the _Direction: an expiry sweep scans the open ones alone, and
        # the cyclic GC has 65k fewer objects to visit). An OrderedDict, whose oldest entry comes
        # out in O(1) where a dict's first key costs a scan over every slot deleted before it.
        self._closed: OrderedDict[Flow, int] = OrderedDict()
        self._holey: set = set()  # flows holding out-of-order bytes behind a hole
        self.sweeps = 0  # times the idle longest expired (max_streams): their ends came at once
        # the highest each bound's count has been (directions open, bytes and segments held,
        # directions remembered closed): runs of some of a capture's connections (pipeline.DecodeRun's
        # ``flows``) are one run's part while their peaks together stay within the bounds
        self.peaks = {"streams": 0, "held": 0, "held_segments": 0, "closed": 0}

    def segment(self, ts, src, sport, dst, dport, seq, flags, payload, ack=None) -> list:
        """One captured segment. ``ack`` (the raw acknowledgment number, when the ACK flag
        is set) lets a hole in the other direction be declared lost as soon as its receiver
        sends data acknowledging bytes the capture never saw, instead of at the stream's end."""
        flow = (src, sport, dst, dport)
        d = self._streams.get(flow)
        holey = self._holey
        # the common cases first, here (one call per packet): a pure ACK, or the next in-order
        # bytes of a plain stream whose reverse direction has no hole this segment may settle
        if d is not None and not flags & (SYN | FIN | RST):
            if not payload:
                d.last_ts = ts
                return []
            if (seq == d.expect and not d.pending and d.fin_at is None
                    and not (holey and ack is not None and (dst, dport, src, sport) in holey)):
                size = len(payload)
                d.next += size
                d.expect = (seq + size) & MASK
                d.last_ts = ts
                if type(payload) is not bytes:
                    payload = bytes(payload)
                return [_new(StreamData, (flow, ts, payload))]  # StreamData(flow, ts, payload), faster
        # Only a segment carrying data counts as proof: pure ACKs may overtake the late copy of
        # a segment in captures merged from several interfaces, data replies hardly can.
        if holey and ack is not None and payload:
            back = (dst, dport, src, sport)
            if back in holey:
                early = self._acked(back, ts, ack)
                return early + self._segment(ts, src, sport, dst, dport, seq, flags, payload)
        return self._segment(ts, src, sport, dst, dport, seq, flags, payload)

    def _segment(self, ts, src, sport, dst, dport, seq, flags, payload) -> list:
        """Everything but segment()'s fast path: starts, ends, holes, overlaps, retransmissions."""
        flow = (src, sport, dst, dport)
        events: list = []
        d = self._other_segment(self._streams.get(flow), events, ts, flow, seq, flags, payload)
        if d is not None:
            d.expect = (d.seq0 + d.next) & MASK
        return events

    def _other_segment(self, d, events: list, ts, flow, seq, flags, payload) -> _Direction | None:
        if d is None or (flags & SYN and d.seq0 != (seq + 1) & MASK):
            if d is None:
                ended = self._closed.get(flow)
                if ended is not None:
                    if not flags & SYN or ended == (seq + 1) & MASK:
                        # a late segment of a stream that already ended, or a late copy of its
                        # SYN (a capture of two interfaces may write one's copy of a whole
                        # connection after the other's): a new connection on the same ports
                        # has a new initial sequence
                        return None
                elif not (payload or flags & (SYN | FIN | RST)):
                    return None  # a pure ACK starts nothing
            else:
                self._end(d, flow, ts, "reused", events)  # a new connection on the same ports
            d = self._streams[flow] = _Direction((seq + 1) & MASK if flags & SYN else seq, ts)
            events.append(StreamStart(flow, ts, bool(flags & SYN)))
            self._open += 1
            if self._open > self.peaks["streams"]:
                self.peaks["streams"] = self._open
            if self._open > self.max_streams:
                self._expire(ts, events, flow)
        d.last_ts = ts
        if flags & SYN:
            seq = (seq + 1) & MASK
        if payload:
            start = d.position(seq)
            nxt = d.next
            size = len(payload)
            if start == nxt:
                d.next = nxt + size
                self._drain(d, flow, ts, [payload if type(payload) is bytes else bytes(payload)], events)
            elif start > nxt:
                self._buffer(d, flow, ts, start, payload, events)
            elif start + size > nxt:  # overlaps bytes already delivered: keep the new part
                d.next = start + size
                self._drain(d, flow, ts, [bytes(payload[nxt - start :])], events)
        if flags & RST:
            self._end(d, flow, ts, "rst", events)
            src, sport, dst, dport = flow
            back = (dst, dport, src, sport)
            reverse = self._streams.get(back)
            if reverse is not None:
                self._end(reverse, back, ts, "rst", events)
            return d
        if flags & FIN and d.fin_at is None:
            d.fin_at = d.position(seq) + len(payload)
        if d.fin_at is not None and d.fin_at <= d.next:
            self._end(d, flow, ts, "fin", events)
        return d

    def finish(self, ts=None) -> list:
        """The capture ended: declare the remaining holes and end every open stream."""
        events: list = []
        for flow, d in list(self._streams.items()):
            self._end(d, flow, d.last_ts if ts is None else ts, "capture_end", events)
        self._streams.clear()
        self._closed.clear()
        self._held = self._held_segments = 0
        return events

    def expire_idle(self, before: float, ts: float) -> list:
        """End every direction silent since before ``before`` (reason "idle"), and its reverse:
        a live capture runs for days, and connections whose end it never saw must not stay."""
        events: list = []
        streams = self._streams
        idle = [flow for flow, d in streams.items() if d.last_ts < before]
        for flow in idle:
            for f in (flow, (flow[2], flow[3], flow[0], flow[1])):
                d = streams.get(f)
                if d is not None:
                    self._end(d, f, ts, "idle", events)
        return events

    def _acked(self, flow, ts, ack: int) -> list:
        """The receiver acknowledged up to ``ack``: holes below it were lost by the capture."""
        d = self._streams.get(flow)
        events: list = []
        if d is None or not d.pending:
            self._holey.discard(flow)
            return events
        acked = d.position(ack)
        while d.pending:
            first = d.starts[0]
            if first > acked or first <= d.next:
                break
            events.append(StreamGap(flow, ts, first - d.next))
            d.next = first
            self._drain(d, flow, ts, [], events)
        d.expect = (d.seq0 + d.next) & MASK
        if not d.pending:
            self._holey.discard(flow)
        if d.fin_at is not None and d.fin_at <= d.next:
            self._end(d, flow, ts, "fin", events)
        return events

    def _buffer(self, d: _Direction, flow, ts, start: int, payload, events: list) -> None:
        self._holey.add(flow)
        held = d.pending.get(start)
        if held is None:
            if d.starts is None:
                d.starts = []
            heapq.heappush(d.starts, start)
            self._held_segments += 1
            if self._held_segments > self.peaks["held_segments"]:
                self.peaks["held_segments"] = self._held_segments
        if held is None or len(held) < len(payload):
            d.pending[start] = payload if type(payload) is bytes else bytes(payload)
            grown = len(payload) - (len(held) if held else 0)
            d.pending_bytes += grown
            self._held += grown
            if self._held > self.peaks["held"]:
                self.peaks["held"] = self._held
        if d.pending_bytes > self.max_buffered or len(d.pending) > self.max_pending_segments:
            # give up on holes until half the bound is free, so this does not recur per segment
            self._drain(d, flow, ts, [], events, self.max_buffered // 2, self.max_pending_segments // 2)
        elif self._held > self.max_held or self._held_segments > self.max_held_segments:
            # all directions together hold too much: this one gives up its holes
            self._drain(d, flow, ts, [], events, 0, 0)

    def _drain(self, d: _Direction, flow, ts, chunks: list, events: list, keep_bytes=None, keep_segments=0) -> None:
        """Deliver ``chunks`` (already counted in ``d.next``) and the buffered bytes now in
        order. With ``keep_bytes``, holes are declared gaps while more than ``keep_bytes``
        bytes or ``keep_segments`` segments stay buffered."""
        pending, starts = d.pending, d.starts
        while starts:
            start = starts[0]
            if start > d.next:
                if keep_bytes is None or (d.pending_bytes <= keep_bytes and len(pending) <= keep_segments):
                    break
                if chunks:
                    events.append(StreamData(flow, ts, b"".join(chunks)))
                    chunks = []
                events.append(StreamGap(flow, ts, start - d.next))
                d.next = start
            heapq.heappop(starts)
            data = pending.pop(start)
            d.pending_bytes -= len(data)
            self._held -= len(data)
            self._held_segments -= 1
            end = start + len(data)
            if end > d.next:
                chunks.append(data[d.next - start :] if start < d.next else data)
                d.next = end
        if chunks:
            events.append(StreamData(flow, ts, b"".join(chunks)))

    def _expire(self, ts, events: list, keep) -> None:
        """Too many directions open: end the eighth that has been idle longest (not ``keep``)."""
        self.sweeps += 1
        streams = self._streams
        count = max(1, self.max_streams // 8)
        # the count smallest (last_ts, flow) but keep's, as heapq.nsmallest would give them,
        # for a third of its time: only the times up to the (count + 1)th smallest are paired
        times = list(map(_LAST_TS, streams.values()))
        if len(times) > count + 1:
            cut = sorted(times)[count]
            idle = [(t, flow) for t, flow in zip(times, streams) if t <= cut]
        else:
            idle = list(zip(times, streams))
        idle.sort()
        for _, flow in [pair for pair in idle[:count + 1] if pair[1] != keep][:count]:
            self._end(streams[flow], flow, ts, "expired", events)

    def _end(self, d: _Direction, flow, ts, reason: str, events: list) -> None:
        if d.pending:
            self._drain(d, flow, ts, [], events, keep_bytes=0)
        if d.fin_at is not None and reason != "rst":
            if d.fin_at > d.next:  # the bytes just before the FIN never came
                events.append(StreamGap(flow, ts, d.fin_at - d.next))
                d.next = d.fin_at
            reason = "fin"
        d.closed = True
        self._open -= 1
        events.append(StreamEnd(flow, ts, reason))
        if self._streams.get(flow) is d:
            del self._streams[flow]
        closed = self._closed
        closed.pop(flow, None)
        closed[flow] = d.seq0
        if len(closed) > self.peaks["closed"]:
            self.peaks["closed"] = len(closed)
        if len(closed) > self.remember_closed:
            closed.popitem(last=False)
