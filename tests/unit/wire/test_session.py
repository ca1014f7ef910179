"""The Kafka session on real captures edited the way real captures go wrong: joined mid-stream,
segments lost, ports nobody announced."""

from __future__ import annotations

import subprocess

import pytest

from kinspect.decode.pipeline import DecodeRun

NDPI = "ndpi/kafka.pcapng"


def decode(path, ports=frozenset({9092})):
    return list(DecodeRun(path, ports=ports).records())


def editcap(src, dst, *packets, keep=False):
    """Deletes the given packets (or keeps only them, with keep=True), as editcap does."""
    options = ["-r"] if keep else []
    subprocess.run(["editcap", *options, str(src), str(dst), *packets], check=True, capture_output=True)
    return dst


def exchanges(records, conn_port=None):
    return [r for r in records if r["type"] == "exchange"
            and (conn_port is None or f":{conn_port}-" in r["conn"])]


def test_stream_joined_mid_way_finds_the_first_frame(realdata, tmp_path):
    # Packets 26-41: a loopback connection whose handshake was not captured.
    mid = editcap(realdata / NDPI, tmp_path / "mid.pcapng", "26-41", keep=True)
    got = exchanges(decode(mid))
    assert [(r["api_name"], r["api_version"], r["correlation_id"]) for r in got] == [
        ("ApiVersions", 3, 3), ("InitProducerId", 4, 4), ("Metadata", 12, 5), ("Produce", 9, 6)]
    assert all(r["response"] is not None for r in got)


def test_lost_request_segment_is_a_gap_and_later_exchanges_still_pair(realdata, tmp_path):
    # Packet 30 carries InitProducerId #4; the broker's ACK shows it was sent.
    lost = editcap(realdata / NDPI, tmp_path / "lost.pcapng", "30")
    records = [r for r in decode(lost) if ":46136-" in r.get("conn", "")]
    gaps = [r for r in records if r["type"] == "notice" and r["kind"] == "gap"]
    assert gaps and gaps[0]["missing"] == 47
    orphans = [r["correlation_id"] for r in records if r["type"] == "orphan_response"]
    assert orphans == [4]
    paired = {r["correlation_id"]: r for r in exchanges(records) if r["response"] is not None}
    assert sorted(paired) == [3, 5, 6]
    assert paired[6]["api_name"] == "Produce" and paired[6]["latency_ms"] > 0


def test_unannounced_port_is_found_by_its_first_request(realdata, tmp_path):
    # Remove 9092 from the ports: everything must still be found by the request heuristic.
    told = exchanges(decode(realdata / NDPI))
    found = exchanges(decode(realdata / NDPI, ports=frozenset()))
    assert sorted((r["conn"], r["correlation_id"]) for r in found) == sorted(
        (r["conn"], r["correlation_id"]) for r in told)


def test_non_kafka_traffic_on_other_ports_is_ignored(realdata):
    # Port 9093 is not Kafka's here; with only it announced, heuristics still find 9092.
    records = decode(realdata / "go-sniffer/kafka.pcap", ports=frozenset({9093}))
    assert {r["api_name"] for r in exchanges(records)} == {"Metadata", "Produce"}


@pytest.mark.parametrize("cut", [200, 1000, 2000, 3000])
def test_truncated_capture_keeps_what_came_before(realdata, tmp_path, cut):
    data = (realdata / "go-sniffer/kafka.pcap").read_bytes()[:cut]
    path = tmp_path / "cut.pcap"
    path.write_bytes(data)
    run = DecodeRun(path)
    records = list(run.records())
    assert run.capture_problems  # the truncation is reported with its offset
    assert run.capture_problems[0].offset is not None
    for r in records:
        assert r["type"] in {"exchange", "notice", "orphan_response"}


def test_connections_held_back_for_detection_are_bounded(monkeypatch):
    from kinspect.wire import session as session_module
    from kinspect.wire.session import KafkaSession

    monkeypatch.setattr(session_module, "UNDECIDED_LIMIT", 10_000)
    s = KafkaSession()
    for port in range(100):  # not Kafka's port, and nothing that looks like a request yet
        s.data((b"\x0a\x00\x00\x01", 2000 + port, b"\x0a\x00\x00\x02", 3000), 1.0, b"\xff" * 1000)
    assert s.undecided_bytes <= 10_000 and len(s.undecided) <= 10
    assert sum(sum(p.sizes.values()) for p in s.undecided.values()) == s.undecided_bytes


def _half_open(tmp_path, count):
    from tests.hostile import inputs

    return inputs.half_open_partial(tmp_path, count=count)  # a SYN and 40 bytes of a request each


def test_notices_of_connections_closed_at_once_are_the_first_ten_of_a_kind_and_a_count(tmp_path):
    from kinspect.decode.summary import Summary

    path = _half_open(tmp_path, 1000)
    records = list(DecodeRun(path, max_connections=200).records())  # 400 directions: sweeps of 50
    notices = [r for r in records if r["type"] == "notice"]
    sweeps = [i for i, r in enumerate(notices) if r["kind"] == "expired"]
    assert len(sweeps) == (1000 - 400 + 49) // 50 and all(notices[i]["directions"] == 50 for i in sweeps)
    first = notices[:sweeps[0] + 1]  # the first sweep's: 10 shown, 40 counted, then the sweep's own
    assert [r["kind"] for r in first] == ["resync"] * 11 + ["expired"]
    assert all(r["what"] == "stream ended inside a frame (40 bytes)" and r["conn"] for r in first[:10])
    assert first[10]["more"] == 40 and first[10]["conn"] == "" and first[10]["what"].startswith(
        "40 more resync notices like the ones above, of connections closed at once when they expired "
        "(50 in all; the first 10 are shown)")
    end = notices[sweeps[-1] + 1:]  # the capture's end: 400 still open
    assert len(end) == 11 and end[10]["more"] == 390 and "still open when the capture ended" in end[10]["what"]
    totals = Summary()
    for record in records:
        totals.add(record)
    assert totals.notices == {"resync": 1000, "expired": len(sweeps)}  # the counts stay whole


def test_few_connections_closed_at_once_keep_a_notice_each(tmp_path):
    records = list(DecodeRun(_half_open(tmp_path, 10)).records())
    assert [r["conn"] for r in records] == [f"10.1.0.{i}:{1024 + i}-10.0.0.2:9092" for i in range(10)]
    assert not any("more" in r for r in records)


def test_a_half_open_connection_holds_three_objects_for_the_cyclic_gc():
    """Every object a connection holds is visited by each full GC pass: with 200k half-open
    connections these passes took half the run when each held eleven."""
    import gc

    from kinspect.capture.tcp import TcpReassembler
    from kinspect.decode.pipeline import _dispatch
    from kinspect.wire.session import KafkaSession

    reassembler, session = TcpReassembler(max_streams=1 << 20), KafkaSession()
    partial = b"\x00\x00\x03\xe8" + bytes(36)  # a 1000-byte frame's first 40 bytes

    def connect(i):
        client = bytes([10, 1, i >> 8, i & 255])
        for flags, seq, payload in ((0x02, 1000, b""), (0x18, 1001, partial)):
            for event in reassembler.segment(0.0, client, 1024 + i, b"\x0a\x00\x00\x02", 9092, seq, flags, payload):
                assert not _dispatch(session, event)

    connect(0)
    gc.collect()
    before = len(gc.get_objects())
    for i in range(1, 1001):
        connect(i)
    gc.collect()
    assert (len(gc.get_objects()) - before) / 1000 <= 3.05  # _Direction, Connection, FrameBuffer
    assert len(session.routes) == 2002


@pytest.mark.parametrize("name", ["librdkafka-produce-consume.pcapng", "kafka39-legacy.pcap", "half-open"])
def test_a_decode_run_leaves_no_reference_cycles(tmp_path, name):
    """Nothing a run holds waits for the cyclic GC to be freed (cli.GC_THRESHOLD relies on it):
    a connection's objects go when it closes, whatever the number of connections."""
    import gc

    from tests.conftest import PCAPS

    path = _half_open(tmp_path, 300) if name == "half-open" else PCAPS / name
    list(DecodeRun(str(path), max_connections=50).records())  # warm: imports, caches
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        records = list(DecodeRun(str(path), max_connections=50).records())
        del records
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()


DOCTOR = "tests/data/doctor-scenario/doctor-scenario.pcap"  # broker on 34175, recorded in the lab
DOCTOR_PORT = 34175


def _paired(records):
    return sorted((r["conn"], r["type"], r.get("api_name"), r.get("api_version"), r["correlation_id"],
                   r.get("request_frames"), r.get("response_frames"))
                  for r in records if r["type"] in ("exchange", "orphan_response"))


@pytest.mark.parametrize("first", [300, 700, 1500])
def test_connections_open_before_the_capture_on_an_unannounced_port_decode_as_with_the_port(tmp_path, first):
    """Joined mid-way, a connection can show a response first; one whose correlation id is below
    13 reads as a Produce request header. Found by the heuristic, every connection carrying
    requests decodes exactly as when its port is given: no bogus Produce from the broker's side."""
    mid = editcap(DOCTOR, tmp_path / "mid.pcap", f"{first}-100000", keep=True)
    found = [r for r in decode(mid, ports=frozenset()) if r["type"] in ("exchange", "orphan_response")]
    told = [r for r in decode(mid, ports=frozenset({DOCTOR_PORT}))
            if r["type"] in ("exchange", "orphan_response")]
    assert not [r["conn"] for r in found if r["conn"].startswith(f"127.0.0.1:{DOCTOR_PORT}-")]
    assert len(found) > 1000
    requesting = {r["conn"] for r in told if r["type"] == "exchange"}
    assert _paired(found) == _paired(r for r in told if r["conn"] in requesting)


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


CLIENT = (bytes([10, 0, 0, 1]), 40000, bytes([10, 0, 0, 2]), 7777)
SERVER = (bytes([10, 0, 0, 2]), 7777, bytes([10, 0, 0, 1]), 40000)


def _client_side(chunks, syn=False):
    """The flow a session on no known port takes for the client, fed these (side, bytes)."""
    from kinspect.wire.session import KafkaSession
    session = KafkaSession(frozenset())
    session.start(CLIENT, 0.0, syn)
    session.start(SERVER, 0.0, syn)
    for at, (side, data) in enumerate(chunks):
        session.data(CLIENT if side == "c" else SERVER, float(at), data)
        if session.routes:
            break
    return next(iter(session.routes.values())).client_flow if session.routes else None


HEARTBEAT_RESPONSE_5 = _frame((5).to_bytes(4, "big") + bytes(7))  # reads as a "Produce v5" request header
HEARTBEAT_REQUEST_6 = _frame((12).to_bytes(2, "big") + (4).to_bytes(2, "big") + (6).to_bytes(4, "big")
                             + b"\x00\x01c\x00\x02g\x00\x00\x00\x01\x02m\x01\x00")
HEARTBEAT_RESPONSE_6 = _frame((6).to_bytes(4, "big") + bytes(7))


def test_a_response_seen_first_does_not_make_the_broker_the_client():
    assert _client_side([("s", HEARTBEAT_RESPONSE_5), ("c", HEARTBEAT_REQUEST_6),
                         ("s", HEARTBEAT_RESPONSE_6)]) == CLIENT


def test_a_connection_seen_from_its_syn_is_decided_by_its_first_request():
    assert _client_side([("c", HEARTBEAT_REQUEST_6)], syn=True) == CLIENT


def test_without_a_response_the_first_request_candidate_decides_when_the_capture_ends():
    from kinspect.wire.session import KafkaSession
    session = KafkaSession(frozenset())
    session.start(CLIENT, 0.0, False)
    session.start(SERVER, 0.0, False)
    session.data(CLIENT, 1.0, HEARTBEAT_REQUEST_6)
    assert not session.routes  # waiting for its response
    out = session.finish(2.0)
    assert session.kafka_connections == 1
    assert [(r["type"], r["conn"], r["api_name"], r["correlation_id"], r["response"]) for r in out] == [
        ("exchange", "10.0.0.1:40000-10.0.0.2:7777", "Heartbeat", 6, None)]  # unanswered, from the client


@pytest.mark.parametrize("first", [1500, 3000, 3973])
def test_a_stream_joined_mid_way_pairs_every_exchange_it_holds_whole(tmp_path, first):
    """Cut where small responses to requests sent before the cut come first: the response
    direction finds its first frame boundary and every exchange whose request and response both
    lie in the cut is paired as in the whole capture (correlation id, API, frames shifted)."""
    whole = decode(DOCTOR, ports=frozenset({DOCTOR_PORT}))
    mid = editcap(DOCTOR, tmp_path / "mid.pcap", f"{first}-100000", keep=True)
    cut = decode(mid, ports=frozenset({DOCTOR_PORT}))
    shift = first - 1
    want = sorted((r["conn"], r["api_name"], r["correlation_id"], r["request_frames"][0] - shift,
                   r["response_frames"][1] - shift)
                  for r in whole if r["type"] == "exchange" and r["request_frames"][0] >= first
                  and r["response_frames"] and r["response_frames"][0] >= first)
    got = sorted((r["conn"], r["api_name"], r["correlation_id"], r["request_frames"][0], r["response_frames"][1])
                 for r in cut if r["type"] == "exchange" and r["response"] is not None)
    assert len(want) > 1500 and got == want
    # what is skipped is the tail of a frame the cut began in, never a stretch of frames
    skipped = [r for r in cut if r["type"] == "notice" and r["kind"] == "resync"]
    assert all(r["what"].startswith("no frame boundary") and r["length"] < 1500 for r in skipped)
