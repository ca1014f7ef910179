"""The source seam: what every source hands the decoder (decode/pipeline.py), and nothing else.

A packet source (a capture file or stdin, capture/source.py; a live ring or child, capture/ring.py
and capture/live.py) yields packets ``(ts, linktype, data, number)`` and, when live, ticks
``(now, TICK, b"", 0)``: no packet, time passing. TCP reassembly (capture/tcp.py) turns packets
into stream events; a stream source (the proxy's tap, proxy/tap.py) yields stream events itself,
with ``StreamOpen`` for each connection and ticks ``(now, TICK)``. The TLS layer (tls/layer.py)
takes stream events and gives plaintext ones.

Events are NamedTuples told apart by type (``type(ev) is StreamData``); a direction is named by
its flow ``(src_ip, sport, dst_ip, dport)``, the reverse direction by the swapped tuple:

- ``StreamStart(flow, ts, syn)``: first sight of a direction; ``syn`` when it began with a SYN.
- ``StreamOpen(flow, ts)``: a stream source's new connection; ``flow`` is its client side.
- ``StreamData(flow, ts, data)``: the next in-order bytes, each delivered once.
- ``StreamGap(flow, ts, missing)``: ``missing`` bytes the decoder will never see; the stream goes
  on after them.
- ``StreamEnd(flow, ts, reason)``: the direction is over ("fin", "rst", "capture_end", ...: see
  capture/tcp.py).
"""

from __future__ import annotations

from typing import Iterator, NamedTuple, Protocol

Flow = tuple  # (src_ip, sport, dst_ip, dport)
# The link type of a live source's tick, (now, TICK, b"", 0): no packet, time passing
TICK = -1


class StreamStart(NamedTuple):
    flow: Flow
    ts: float
    syn: bool


class StreamOpen(NamedTuple):
    """A stream source's new connection: ``flow`` is its client side (client → server)."""
    flow: Flow
    ts: float


class StreamData(NamedTuple):
    flow: Flow
    ts: float
    data: bytes


class StreamGap(NamedTuple):
    flow: Flow
    ts: float
    missing: int


class StreamEnd(NamedTuple):
    flow: Flow
    ts: float
    reason: str


class PacketSource(Protocol):
    """What the pipeline reads packets from: capture.source.Capture, or a live source."""

    size: int | None
    problems: list

    def packets(self) -> Iterator[tuple]: ...  # (ts, linktype, data, number), or TICK ticks
    @property
    def bytes_read(self) -> int: ...
    def __enter__(self): ...
    def __exit__(self, *exc): ...


class StreamSource(Protocol):
    """What the pipeline reads byte streams from (a proxy): ``streams()`` yields StreamOpen,
    StreamData, StreamGap (bytes not given to the decoder) and StreamEnd events, and ticks
    ``(now, TICK)``."""

    size: int | None
    problems: list

    def streams(self) -> Iterator[tuple]: ...
    @property
    def bytes_read(self) -> int: ...
    def __enter__(self): ...
    def __exit__(self, *exc): ...
