"""The Kafka session on real captures edited the way real captures go wrong: joined mid-stream,
segments lost, ports nobody announced."""

from __future__ import annotations

import subprocess

import pytest

from kinspect.pipeline import DecodeRun

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
