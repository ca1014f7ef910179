"""Fuzz TCP reassembly (kinspect/capture/tcp.py) with segments derived from the input.

Input: one byte choosing the bounds (bits 0-1: out-of-order bytes held per direction; 2-3:
directions open at once; 4-5: ended directions remembered), then segments (formats.segments):
eight directions, four connections of two. Checks: no exception; every direction's events
are a StreamStart, its data and gaps, then a StreamEnd, and finish() ends them all; data are
non-empty bytes, gaps positive.
"""

import formats
import harness

with harness.instrumented("kinspect.capture"):
    from kinspect.capture.stream import StreamData, StreamEnd, StreamGap, StreamStart
    from kinspect.capture.tcp import TcpReassembler

MAX_BUFFERED = (64, 1024, 65536, 16 << 20)
MAX_STREAMS = (1, 3, 8, 100_000)
REMEMBER_CLOSED = (1, 4, 64, 65536)
CLIENT, SERVER = b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02"


def endpoints(flow: int) -> tuple:
    """(src, sport, dst, dport) of direction ``flow``: connection flow >> 1, bit 0 the reverse."""
    client, server = (CLIENT, 40000 + (flow >> 1)), (SERVER, 9092)
    (src, sport), (dst, dport) = (server, client) if flow & 1 else (client, server)
    return src, sport, dst, dport


def check(events: list, open_flows: set) -> None:
    for event in events:
        kind, flow = type(event), event.flow
        if kind is StreamStart:
            if flow in open_flows:
                raise harness.Finding(f"{flow} started twice without an end")
            open_flows.add(flow)
            continue
        if flow not in open_flows:
            raise harness.Finding(f"{event!r} for a direction that is not open")
        if kind is StreamData and (type(event.data) is not bytes or not event.data):
            raise harness.Finding(f"data event without bytes: {event!r}")
        if kind is StreamGap and event.missing <= 0:
            raise harness.Finding(f"gap of no bytes: {event!r}")
        if kind is StreamEnd:
            open_flows.discard(flow)


def target(data: bytes) -> None:
    cursor = formats.Cursor(data)
    config = cursor.u8()
    reassembler = TcpReassembler(MAX_BUFFERED[config & 3], REMEMBER_CLOSED[config >> 4 & 3],
                                 MAX_STREAMS[config >> 2 & 3])
    open_flows: set = set()
    ts = 0.0
    for flow, flags, seq, ack, payload in formats.segments(cursor):
        ts += 0.001
        src, sport, dst, dport = endpoints(flow)
        check(reassembler.segment(ts, src, sport, dst, dport, seq, flags, payload, ack), open_flows)
    check(reassembler.finish(ts), open_flows)
    if open_flows:
        raise harness.Finding(f"finish() left {sorted(open_flows)} open")


if __name__ == "__main__":
    harness.main(target, "tcp")
