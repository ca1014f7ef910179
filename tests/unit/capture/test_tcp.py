import random
import subprocess

import pytest

from kinspect.capture.link import decode_tcp, format_addr
from kinspect.capture.source import open_capture
from kinspect.capture.stream import StreamData, StreamEnd, StreamGap, StreamStart
from kinspect.capture.tcp import TcpReassembler

FIN, SYN, RST, PSH, ACK = 1, 2, 4, 8, 16
CLIENT, SERVER = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
C2S = (CLIENT, 40000, SERVER, 9092)
S2C = (SERVER, 9092, CLIENT, 40000)
WRAP = 1 << 32


class Conn:
    """Drives a reassembler with hand-built segments of one connection."""

    def __init__(self, max_buffered: int = 16 << 20) -> None:
        self.r = TcpReassembler(max_buffered)
        self.ts = 0.0

    def send(self, flow, seq, payload=b"", flags=ACK | PSH, ts=None, ack=None):
        self.ts = self.ts + 1 if ts is None else ts
        src, sport, dst, dport = flow
        return self.r.segment(self.ts, src, sport, dst, dport, seq % WRAP, flags, payload,
                              None if ack is None else ack % WRAP)

    def handshake(self, client_isn=1000, server_isn=5000):
        events = self.send(C2S, client_isn, flags=SYN)
        events += self.send(S2C, server_isn, flags=SYN | ACK)
        events += self.send(C2S, client_isn + 1, flags=ACK)
        return events


def data(events, flow=C2S) -> bytes:
    return b"".join(e.data for e in events if type(e) is StreamData and e.flow == flow)


def kinds(events):
    return [type(e).__name__ for e in events]


def test_handshake_and_in_order_data():
    c = Conn()
    events = c.handshake()
    assert events == [StreamStart(C2S, 1.0, True), StreamStart(S2C, 2.0, True)]
    assert c.send(C2S, 1001, b"hello") == [StreamData(C2S, 4.0, b"hello")]
    assert c.send(C2S, 1006, b" world") == [StreamData(C2S, 5.0, b" world")]
    assert c.send(S2C, 5001, b"hi") == [StreamData(S2C, 6.0, b"hi")]


def test_pure_acks_produce_nothing():
    c = Conn()
    assert c.send(C2S, 77, flags=ACK) == []  # an unseen direction is not started by an ACK
    c.handshake()
    assert c.send(S2C, 5001, flags=ACK) == []
    assert c.send(C2S, 1001, b"x") == [StreamData(C2S, c.ts, b"x")]
    assert c.send(S2C, 5001, flags=ACK) == []


def test_syn_retransmission_starts_nothing_new():
    c = Conn()
    c.handshake()
    assert c.send(C2S, 1000, flags=SYN) == []
    assert c.send(S2C, 5000, flags=SYN | ACK) == []
    assert c.send(C2S, 1001, b"abc") == [StreamData(C2S, c.ts, b"abc")]


def test_retransmissions_and_duplicates_are_dropped():
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"abcde")
    assert c.send(C2S, 1001, b"abcde") == []
    assert c.send(C2S, 1003, b"cd") == []
    assert c.send(C2S, 1006, b"fg") == [StreamData(C2S, c.ts, b"fg")]


def test_out_of_order_waits_for_the_hole():
    c = Conn()
    c.handshake()
    assert c.send(C2S, 1006, b"fghij") == []
    assert c.send(C2S, 1011, b"klm") == []
    assert c.send(C2S, 1011, b"klm") == []  # a duplicate of a buffered segment
    events = c.send(C2S, 1001, b"abcde", ts=42.0)
    assert events == [StreamData(C2S, 42.0, b"abcdefghijklm")]  # ts of the packet that completed them


def test_overlapping_segments_deliver_each_byte_once():
    c = Conn()
    c.handshake()
    stream = b"0123456789abcdefghij"
    out = c.send(C2S, 1001, stream[0:6])
    out += c.send(C2S, 1001 + 3, stream[3:10])  # overlaps delivered bytes
    out += c.send(C2S, 1001 + 14, stream[14:18])  # buffered
    out += c.send(C2S, 1001 + 12, stream[12:20])  # overlaps and extends the buffered one
    out += c.send(C2S, 1001 + 16, stream[16:17])  # inside buffered bytes
    out += c.send(C2S, 1001 + 8, stream[8:13])  # fills the hole, overlaps both sides
    assert data(out) == stream
    assert kinds(out) == ["StreamData"] * 3


def test_sequence_wraparound():
    isn = WRAP - 3  # the first payload byte is at 2**32 - 2
    c = Conn()
    c.handshake(client_isn=isn)
    stream = bytes(range(40))
    out = c.send(C2S, isn + 1, stream[:10])  # crosses 2**32
    out += c.send(C2S, isn + 21, stream[20:30])  # out of order, after the wrap
    out += c.send(C2S, isn + 11, stream[10:20])
    out += c.send(C2S, isn + 11, stream[10:20])  # retransmission across the wrap
    out += c.send(C2S, isn + 31, stream[30:], flags=ACK | FIN)
    assert data(out) == stream
    assert out[-1] == StreamEnd(C2S, c.ts, "fin")


def test_syn_consumes_one_sequence_number():
    c = Conn()
    c.handshake(client_isn=WRAP - 1)  # SYN at 2**32 - 1, data at 0
    assert c.send(C2S, 0, b"first") == [StreamData(C2S, c.ts, b"first")]


def test_syn_with_data():
    c = Conn()
    events = c.send(C2S, 700, b"fast open", flags=SYN)
    assert events == [StreamStart(C2S, 1.0, True), StreamData(C2S, 1.0, b"fast open")]
    assert c.send(C2S, 710, b"!") == [StreamData(C2S, 2.0, b"!")]


def test_direction_first_seen_mid_stream():
    c = Conn()
    events = c.send(S2C, 123456, b"response bytes")
    assert events == [StreamStart(S2C, 1.0, False), StreamData(S2C, 1.0, b"response bytes")]
    assert c.send(S2C, 123456 - 10, b"0123456789") == []  # before where we came in
    assert c.send(S2C, 123456 + 14, b"more") == [StreamData(S2C, 3.0, b"more")]


def test_fin_ends_the_stream_and_late_segments_are_ignored():
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"abc")
    assert c.send(C2S, 1004, flags=FIN | ACK) == [StreamEnd(C2S, c.ts, "fin")]
    assert c.send(C2S, 1004, flags=FIN | ACK) == []  # retransmitted FIN
    assert c.send(C2S, 1001, b"abc") == []
    assert c.send(C2S, 1005, flags=ACK) == []


def test_fin_waits_for_the_bytes_before_it():
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"abc")
    assert c.send(C2S, 1007, b"ghi", flags=FIN | ACK) == []
    assert c.send(C2S, 1004, b"def", ts=50.0) == [StreamData(C2S, 50.0, b"defghi"), StreamEnd(C2S, 50.0, "fin")]

    c = Conn()
    c.handshake()
    assert c.send(C2S, 1004, flags=FIN | ACK) == []  # the last data segment comes after the FIN
    assert c.send(C2S, 1001, b"abc", ts=60.0) == [StreamData(C2S, 60.0, b"abc"), StreamEnd(C2S, 60.0, "fin")]


def test_fin_after_a_hole_that_never_fills():
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"abc")
    c.send(C2S, 1007, b"ghi", flags=FIN | ACK)
    assert c.r.finish(99.0) == [
        StreamGap(C2S, 99.0, 3),
        StreamData(C2S, 99.0, b"ghi"),
        StreamEnd(C2S, 99.0, "fin"),
        StreamEnd(S2C, 99.0, "capture_end"),
    ]

    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"abc")
    c.send(C2S, 1010, flags=FIN | ACK)  # 6 bytes before the FIN were never seen
    assert c.r.finish(99.0)[0:2] == [StreamGap(C2S, 99.0, 6), StreamEnd(C2S, 99.0, "fin")]


def test_rst_ends_both_directions():
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"abc")
    c.send(C2S, 1010, b"jkl")  # buffered behind a hole
    events = c.send(S2C, 5001, flags=RST | ACK, ts=7.0)
    assert events == [
        StreamEnd(S2C, 7.0, "rst"),
        StreamGap(C2S, 7.0, 6),
        StreamData(C2S, 7.0, b"jkl"),
        StreamEnd(C2S, 7.0, "rst"),
    ]
    assert c.r.finish() == []


def test_rst_to_a_closed_port():
    c = Conn()
    c.send(C2S, 1000, flags=SYN)
    events = c.send(S2C, 0, flags=RST | ACK)
    assert events == [StreamStart(S2C, 2.0, False), StreamEnd(S2C, 2.0, "rst"), StreamEnd(C2S, 2.0, "rst")]


def test_port_reuse_after_close_starts_a_new_stream():
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"first connection")
    c.send(C2S, 1017, flags=FIN | ACK)
    c.send(S2C, 5001, flags=FIN | ACK)
    events = c.send(C2S, 90000, flags=SYN)
    assert events == [StreamStart(C2S, c.ts, True)]
    assert c.send(C2S, 90001, b"second") == [StreamData(C2S, c.ts, b"second")]


def test_a_late_copy_of_a_whole_closed_connection_is_ignored():
    # dumpcap on two interfaces (lo + any) may write one interface's copy of a whole connection
    # after the other's: its SYN has the same initial sequence, so it is no new connection
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"only once")
    c.send(C2S, 1010, flags=FIN | ACK)
    c.send(S2C, 5001, flags=FIN | ACK)
    late = c.handshake()
    late += c.send(C2S, 1001, b"only once")
    late += c.send(C2S, 1010, flags=FIN | ACK)
    late += c.send(S2C, 5001, flags=FIN | ACK)
    assert late == []


def test_closed_streams_are_remembered_up_to_a_bound():
    r = TcpReassembler(remember_closed=2)
    flows = [(CLIENT, port, SERVER, 9092) for port in (1, 2, 3)]
    for flow in flows:
        r.segment(1.0, *flow, 100, SYN, b"")
        r.segment(2.0, *flow, 101, ACK | FIN, b"bye")
    assert len(r._closed) == 2 and not r._streams  # the first one is forgotten
    assert r.segment(3.0, *flows[2], 101, ACK | FIN, b"bye") == []  # remembered: a late copy
    late = r.segment(3.0, *flows[0], 101, ACK | FIN, b"bye")  # forgotten: looks like a new stream
    assert [type(e) for e in late] == [StreamStart, StreamData, StreamEnd]


def test_new_syn_on_an_open_stream_replaces_it():
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"abc")
    c.send(C2S, 1010, b"xyz")  # pending behind a hole, never filled
    events = c.send(C2S, 777777, flags=SYN, ts=30.0)
    assert events == [
        StreamGap(C2S, 30.0, 6),
        StreamData(C2S, 30.0, b"xyz"),
        StreamEnd(C2S, 30.0, "reused"),
        StreamStart(C2S, 30.0, True),
    ]


def test_gap_when_buffered_bytes_exceed_the_bound():
    c = Conn(max_buffered=100)
    c.handshake()
    out = c.send(C2S, 1001, bytes(10))
    for start in range(20, 110, 30):  # 20..50, 50..80, 80..110: 90 bytes buffered
        assert c.send(C2S, 1001 + start, bytes([start]) * 30) == []
    events = c.send(C2S, 1001 + 110, b"z" * 30, ts=77.0)  # 120 > 100
    assert events == [
        StreamGap(C2S, 77.0, 10),
        StreamData(C2S, 77.0, bytes([20]) * 30 + bytes([50]) * 30 + bytes([80]) * 30 + b"z" * 30),
    ]
    assert c.send(C2S, 1001 + 10, b"late" * 2) == []  # the hole filled too late: dropped
    assert c.send(C2S, 1001 + 140, b"on") == [StreamData(C2S, c.ts, b"on")]
    assert out == [StreamData(C2S, 4.0, bytes(10))]


def test_buffered_bytes_stay_bounded():
    c = Conn(max_buffered=1000)
    c.handshake()
    rng = random.Random(3)
    missing = 0
    for i in range(2000):
        start = 50 + i * 60 + rng.randrange(0, 40)
        events = c.send(C2S, 1001 + start, bytes(25))
        missing += sum(e.missing for e in events if type(e) is StreamGap)
        assert c.r._streams[C2S].pending_bytes <= 1000
    assert missing > 0


def test_many_tiny_buffered_segments_are_bounded_too():
    c = Conn(max_buffered=1 << 18)  # at most 1024 segments held
    c.handshake()
    out = []
    for i in range(5000):  # one byte every other position: every one is behind a hole
        out += c.send(C2S, 1001 + 1 + 2 * i, b"x")
        assert len(c.r._streams[C2S].pending) <= 1024
    out += c.r.finish()
    delivered = sum(len(e.data) for e in out if type(e) is StreamData)
    missing = sum(e.missing for e in out if type(e) is StreamGap)
    assert delivered == 5000 and missing == 5000  # every byte accounted for, once


def test_capture_end_reports_holes_and_ends_streams():
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"ab")
    c.send(C2S, 1005, b"ef")
    c.send(S2C, 5001, b"reply")
    last = c.ts
    assert c.r.finish() == [
        StreamGap(C2S, 5.0, 2),
        StreamData(C2S, 5.0, b"ef"),
        StreamEnd(C2S, 5.0, "capture_end"),
        StreamEnd(S2C, last, "capture_end"),
    ]


def test_memoryview_payload_is_delivered_as_bytes():
    c = Conn()
    c.handshake()
    out = c.send(C2S, 1004, memoryview(b"xxdef")[2:])
    out += c.send(C2S, 1001, memoryview(b"abc"))
    out += c.send(C2S, 1005, memoryview(b"efgh"))
    assert data(out) == b"abcdefgh"
    assert all(type(e.data) is bytes for e in out if type(e) is StreamData)


@pytest.mark.parametrize("seed", range(20))
def test_random_resegmentation_reorder_and_duplicates(seed):
    rng = random.Random(seed)
    stream = rng.randbytes(rng.randrange(1, 30_000))
    isn = rng.randrange(WRAP)
    segments = []
    for _ in range(3):  # the stream sent three times with different boundaries: retransmissions
        pos = 0
        while pos < len(stream):
            size = rng.randrange(1, 1500)
            segments.append((pos, stream[pos : pos + size]))
            pos += size
    rng.shuffle(segments)
    c = Conn()
    out = c.send(C2S, isn, flags=SYN)
    for pos, payload in segments:
        out += c.send(C2S, isn + 1 + pos, payload)
    out += c.send(C2S, isn + 1 + len(stream), flags=FIN | ACK)
    assert data(out) == stream
    assert kinds(out)[0] == "StreamStart" and out[-1].reason == "fin"
    assert "StreamGap" not in kinds(out)


def reassemble(path):
    r = TcpReassembler()
    streams, ends = {}, {}
    with open_capture(path) as capture:
        for ts, linktype, frame, _n in capture.packets():
            src, dst, sport, dport, seq, flags, payload, _ack = decode_tcp(linktype, frame)
            events = r.segment(ts, src, sport, dst, dport, seq, flags, payload)
            for e in events:
                if type(e) is StreamData:
                    streams[e.flow] += e.data
                elif type(e) is StreamStart:
                    streams.setdefault(e.flow, b"")
                elif type(e) is StreamEnd:
                    ends[e.flow] = e.reason
                else:
                    raise AssertionError(f"unexpected {e}")
    for e in r.finish():
        ends[e.flow] = e.reason
    return streams, ends


def tshark_follow(path) -> dict[tuple[str, str], bytes]:
    ids = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "tcp.stream"], capture_output=True, text=True).stdout
    args = []
    for stream in sorted({int(i) for i in ids.split()}):
        args += ["-z", f"follow,tcp,raw,{stream}"]
    out = subprocess.run(["tshark", "-r", str(path), "-q", *args], capture_output=True, text=True).stdout
    follow: dict[tuple[str, str], bytes] = {}
    nodes = []
    for line in out.splitlines():
        if line.startswith("Node "):
            nodes.append(line.split(": ")[1])
            if len(nodes) == 2:
                follow.setdefault((nodes[0], nodes[1]), b"")
                follow.setdefault((nodes[1], nodes[0]), b"")
        elif line.startswith("====="):
            nodes = [] if len(nodes) == 2 else nodes
        elif len(nodes) == 2 and line.strip():
            src, dst = (nodes[1], nodes[0]) if line.startswith("\t") else (nodes[0], nodes[1])
            follow[(src, dst)] += bytes.fromhex(line.strip())
    return follow


@pytest.mark.parametrize("name", ["ndpi/kafka.pcapng", "arkime/kafka.pcap", "go-sniffer/kafka.pcap"])
def test_real_captures_are_reassembled_like_tshark(realdata, tshark, name):
    streams, ends = reassemble(realdata / name)
    ours = {(format_addr(f[0], f[1]), format_addr(f[2], f[3])): b for f, b in streams.items() if b}
    theirs = {k: b for k, b in tshark_follow(realdata / name).items() if b}
    assert ours == theirs
    assert ours
    assert set(ends) == set(streams)


def test_ndpi_retransmissions_are_delivered_once(realdata):
    streams, ends = reassemble(realdata / "ndpi/kafka.pcapng")
    loopback = {f: b for f, b in streams.items() if f[0] == bytes([127, 0, 0, 1])}
    assert sorted(map(len, loopback.values())) == [307, 660]
    assert [ends[f] for f in loopback] == ["fin", "fin"]


@pytest.mark.parametrize("name", ["ethernet", "sll", "sll2_ns", "multi"])
def test_live_exchanges_are_reassembled_exactly(live, name):
    # the pcapng of lo + any holds every packet twice: the copies must be dropped
    streams, ends = reassemble(live.files[name])
    assert len(streams) == 4
    for _family, request, reply in live.exchanges:
        to_server = [f for f in streams if f[3] == live.port and streams[f] == request]
        to_client = [f for f in streams if f[1] == live.port and streams[f] == reply]
        assert len(to_server) == 1 and len(to_client) == 1
    assert set(ends.values()) == {"fin"}


def test_hole_acknowledged_by_the_receiver_is_declared_lost_at_once():
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"a" * 10)
    held = c.send(C2S, 1021, b"c" * 10)          # bytes 1011..1020 never captured
    assert data(held) == b""
    events = c.send(S2C, 5001, b"reply", ack=1031)  # the server has all of them
    gaps = [e for e in events if type(e) is StreamGap]
    assert [(g.flow, g.missing) for g in gaps] == [(C2S, 10)]
    assert data(events) == b"c" * 10                 # delivered now, not at the stream's end
    assert data(events, S2C) == b"reply"
    assert events.index(gaps[0]) < [i for i, e in enumerate(events) if type(e) is StreamData][0]


def test_a_pure_ack_past_the_hole_waits_for_the_late_copy():
    # In captures merged from several interfaces an ACK can come before the copy it acknowledges.
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"a" * 10)
    c.send(C2S, 1021, b"c" * 10)
    assert [e for e in c.send(S2C, 5001, ack=1031) if type(e) is StreamGap] == []
    events = c.send(C2S, 1011, b"b" * 10)
    assert data(events) == b"b" * 10 + b"c" * 10 and not [e for e in events if type(e) is StreamGap]


def test_ack_inside_the_hole_waits_for_a_retransmission():
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"a" * 10)
    c.send(C2S, 1021, b"c" * 10)
    assert [e for e in c.send(S2C, 5001, b"r", ack=1015) if type(e) is StreamGap] == []
    events = c.send(C2S, 1011, b"b" * 10)            # the retransmission fills it
    assert data(events) == b"b" * 10 + b"c" * 10
    assert not [e for e in events if type(e) is StreamGap]


def test_ack_across_sequence_wraparound():
    c = Conn()
    c.handshake(client_isn=WRAP - 15)
    c.send(C2S, WRAP - 14, b"a" * 10)
    c.send(C2S, WRAP + 6, b"c" * 10)                 # hole straddles 2**32
    events = c.send(S2C, 5001, b"r", ack=WRAP + 16)
    assert [e.missing for e in events if type(e) is StreamGap] == [10]
    assert data(events) == b"c" * 10


# -- hostile shapes: the work stays linear and the state bounded -------------------------------

def test_a_storm_of_out_of_order_bytes_is_delivered_once_in_order():
    c = Conn()
    events = c.handshake()
    n = 20_000
    for i in range(n, 0, -1):  # one byte each, last first, behind a one-byte hole
        events += c.send(C2S, 1001 + i, bytes([i % 256]))
        events += c.send(S2C, 5001 + n - i, b"y", ack=1001)  # replies acknowledging the hole
    events += c.send(C2S, 1001, b"\x00")
    assert data(events) == bytes(i % 256 for i in range(n + 1))
    assert not c.r._streams[C2S].pending and c.r._held == 0


def test_directions_past_the_bound_expire_the_longest_idle():
    r = TcpReassembler(max_streams=8)
    events = []
    for port in range(20):
        events += r.segment(float(port), CLIENT, 1000 + port, SERVER, 9092, 1, SYN, b"")
    expired = [e for e in events if type(e) is StreamEnd and e.reason == "expired"]
    assert len(expired) == 12 and expired[0].flow[1] == 1000  # the oldest go first
    assert r._open <= 8


def test_out_of_order_bytes_across_all_directions_are_bounded():
    r = TcpReassembler(max_buffered=4096)
    for port in range(100):  # each direction keeps below its own bound, together they would not
        r.segment(0.0, CLIENT, 1000 + port, SERVER, 9092, 1, SYN, b"")
        for k in range(3):
            r.segment(1.0, CLIENT, 1000 + port, SERVER, 9092, 100 + 1000 * k, ACK, b"x" * 1000)
        assert r._held <= r.max_held + r.max_buffered
    assert r._held == sum(d.pending_bytes for d in r._streams.values())


def test_expiry_takes_the_idle_longest_as_nsmallest_would_ties_by_flow():
    rng = random.Random(7)
    r = TcpReassembler(max_streams=64)
    opened = {}
    for i in range(64):  # times drawn from few values: many ties, broken by the flow
        flow = (bytes([10, 1, 0, i]), 1000 + rng.randrange(4), SERVER, 9092)
        if flow in opened:
            continue
        ts = float(rng.randrange(5))
        opened[flow] = ts
        r.segment(ts, *flow, 1, SYN, b"")
    late = (bytes([10, 2, 0, 0]), 5000, SERVER, 9092)
    while len(opened) < 64:  # fill up to the bound exactly
        late = (late[0], late[1] + 1, SERVER, 9092)
        opened[late] = 2.0
        r.segment(2.0, *late, 1, SYN, b"")
    newest = (CLIENT, 9, SERVER, 9092)
    events = r.segment(1.0, *newest, 1, SYN, b"")  # one too many: an eighth expire, never itself
    expired = [e.flow for e in events if type(e) is StreamEnd]
    assert expired == [flow for _, flow in sorted((ts, flow) for flow, ts in opened.items())[:8]]
    assert newest in r._streams and r.sweeps == 1 and r._open == 64 - 8 + 1


def test_an_open_direction_holds_no_list_until_bytes_wait_behind_a_hole():
    c = Conn()
    c.handshake()
    c.send(C2S, 1001, b"in order")
    assert c.r._streams[C2S].starts is None  # a list per direction costs every full GC pass
    c.send(C2S, 1100, b"behind a hole")
    assert c.r._streams[C2S].starts == [99]


def test_a_longer_copy_of_a_buffered_segment_keeps_its_extra_bytes():
    """Out of order, a segment is buffered; its retransmission at the same sequence number carries
    more bytes (a sender that coalesced its queue). Its extra bytes are kept."""
    c = Conn()
    c.handshake()
    assert c.send(C2S, 1006, b"fghij") == []
    assert c.send(C2S, 1006, b"fghijklmno") == []  # the same start, five bytes more
    assert c.send(C2S, 1006, b"fgh") == []  # a shorter copy takes nothing away
    assert c.send(C2S, 1021, b"uvw") == []  # further on, after another hole
    out = c.send(C2S, 1001, b"abcde", ts=42.0)
    assert out == [StreamData(C2S, 42.0, b"abcdefghijklmno")]
    out = c.send(C2S, 1016, b"pqrst", ts=43.0)
    assert out == [StreamData(C2S, 43.0, b"pqrstuvw")]
    assert c.r.finish() == [StreamEnd(C2S, 43.0, "capture_end"), StreamEnd(S2C, 2.0, "capture_end")]


def test_a_longer_copy_of_a_buffered_segment_is_reassembled_as_tshark_does(tshark, tmp_path):
    """The same segments in a capture file, with tshark's Follow TCP Stream as the oracle."""
    from tests.hostile.packets import ACK as ACK_, PSH as PSH_, Connection, PcapWriter

    stream = bytes(range(65, 91)) * 4  # 104 bytes
    path = tmp_path / "longer-copy.pcap"
    with PcapWriter(path) as out:
        conn = Connection(out)
        conn.handshake()
        conn.client_segment(40, stream[40:60])    # buffered behind a hole
        conn.client_segment(40, stream[40:90])    # its longer copy: 30 bytes more
        conn.client_segment(100, stream[100:104])  # after another hole
        conn.client_segment(0, stream[0:40])      # the first hole filled
        conn.client_segment(90, stream[90:100])   # the second
        conn.client_seq += len(stream)
        conn.server_segment(b"", ACK_)
        conn.close()
    streams, ends = reassemble(path)
    ours = {(format_addr(f[0], f[1]), format_addr(f[2], f[3])): b for f, b in streams.items() if b}
    assert ours == {("10.0.0.1:40000", "10.0.0.2:9092"): stream}
    assert {k: b for k, b in tshark_follow(path).items() if b} == ours
    assert set(ends.values()) == {"fin"}
