"""Real clients' connections from the committed captures, as the proxy sees them: for each TCP
connection its client flow and the stream events in capture order (reassembled by kinspect's
own TCP layer), and each direction's bytes whole."""

from __future__ import annotations

from kinspect.capture.link import decoder_for
from kinspect.capture.source import open_capture
from kinspect.capture.stream import StreamData
from kinspect.capture.tcp import TcpReassembler
from tests.conftest import PCAPS


def connections(name: str, port: int = 9092) -> dict:
    """client flow -> {"events": [(direction, ts, bytes)], "client": bytes, "server": bytes};
    direction 1 is the client's (towards ``port``), 2 the broker's."""
    out: dict = {}
    reassembler = TcpReassembler()
    events = []
    with open_capture(str(PCAPS / name)) as capture:
        for ts, linktype, data, _ in capture.packets():
            segment = decoder_for(linktype)(bytes(data))
            if segment is not None:
                src, dst, sport, dport, seq, flags, payload, ack = segment
                events += reassembler.segment(ts, src, sport, dst, dport, seq, flags, payload, ack)
        events += reassembler.finish()
    for event in events:
        if type(event) is not StreamData:
            continue
        src, sport, dst, dport = event.flow
        if dport == port:
            flow, direction = event.flow, 1
        elif sport == port:
            flow, direction = (dst, dport, src, sport), 2
        else:
            continue
        conn = out.setdefault(flow, {"events": [], "client": b"", "server": b""})
        conn["events"].append((direction, event.ts, bytes(event.data)))
        conn["client" if direction == 1 else "server"] += bytes(event.data)
    return out
