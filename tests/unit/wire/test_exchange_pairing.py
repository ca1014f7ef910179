"""Pairing by correlation id, against tshark (issue 30, thin guards: two hand-built tests only).

A response carries no api key: kinspect pairs it with the request of the same correlation id on
the same connection. tshark's Kafka dissector does the same and says so per frame
(kafka.correlation_id, kafka.request_frame, kafka.response_frame): the oracle here, on the
committed captures as recorded, and on a real connection's own frames re-sent with the responses
out of order and a correlation id used again once answered.
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from kinspect.capture.link import decode_tcp
from kinspect.capture.source import open_capture
from kinspect.capture.stream import StreamData
from kinspect.capture.tcp import TcpReassembler
from kinspect.decode.pipeline import DecodeRun
from tests.conftest import PCAPS
from tests.hostile.packets import Connection, PcapWriter

FIELDS = ("frame.number", "frame.time_epoch", "tcp.srcport", "tcp.dstport", "kafka.api_key",
          "kafka.correlation_id", "kafka.request_frame")


def _tshark_frames(tshark: str, path: Path, ports) -> dict[int, dict]:
    """frame number -> what tshark dissected in it (frames with one Kafka PDU only)."""
    cmd = [tshark, "-n", "-r", str(path), "-Y", "kafka", "-T", "fields", "-E", "separator=\t",
           "-E", "occurrence=a", "-E", "aggregator=,"]
    for port in sorted(ports):
        cmd += ["-d", f"tcp.port=={port},kafka"]
    for field in FIELDS:
        cmd += ["-e", field]
    frames = {}
    for line in subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines():
        number, ts, sport, dport, key, correlation, request = (line.split("\t") + [""] * 7)[:7]
        if "," in correlation:
            continue
        frames[int(number)] = {"time": round(float(ts), 6), "sport": int(sport), "dport": int(dport),
                               "api_key": int(key) if key else None, "correlation_id": int(correlation),
                               "request_frame": int(request) if request else None}
    return frames


def _tshark_pairs(tshark: str, path: Path, ports) -> tuple[set, set]:
    """(client port, correlation id, response time) of every response tshark saw from a broker's
    ``ports``, and (client port, correlation id, api key, request time, response time) of those it paired."""
    frames = _tshark_frames(tshark, path, ports)
    responses, paired = set(), set()
    for frame in frames.values():
        if frame["sport"] not in ports:
            continue
        responses.add((frame["dport"], frame["correlation_id"], frame["time"]))
        request = frames.get(frame["request_frame"])
        if request is not None:
            paired.add((frame["dport"], frame["correlation_id"], request["api_key"], request["time"], frame["time"]))
    return responses, paired


def _broker_ports(exchanges) -> set[int]:
    return {int(e["conn"].rsplit(":", 1)[1]) for e in exchanges}


def _kinspect_pairs(path: Path) -> tuple[set, set, list]:
    responses, paired = set(), set()
    exchanges = [r for r in DecodeRun(path).records() if r["type"] == "exchange"]
    for e in exchanges:
        if e["response_time"] is None:
            continue
        port = int(e["conn"].split("-")[0].rsplit(":", 1)[1])
        responses.add((port, e["correlation_id"], round(e["response_time"], 6)))
        paired.add((port, e["correlation_id"], e["api_key"], round(e["request_time"], 6),
                    round(e["response_time"], 6)))
    return responses, paired, exchanges


@pytest.mark.parametrize("name", ["java-console-consumer.pcap", "java-transactions.pcap",
                                  "librdkafka-produce-consume.pcapng", "kafka39-legacy.pcap"])
def test_real_captures_pair_every_response_as_tshark_does(tshark, name):
    ours, our_pairs, exchanges = _kinspect_pairs(PCAPS / name)
    theirs, their_pairs = _tshark_pairs(tshark, PCAPS / name, _broker_ports(exchanges))
    assert ours == theirs and len(ours) > 10
    assert their_pairs and their_pairs <= our_pairs  # every pair tshark makes, with the same request


def _frames(stream: bytes) -> list[bytes]:
    out, at = [], 0
    while at + 4 <= len(stream):
        (size,) = struct.unpack_from(">i", stream, at)
        out.append(stream[at:at + 4 + size])
        at += 4 + size
    return out


def _connection_frames(path: Path, client_port: int) -> tuple[list[bytes], list[bytes]]:
    """The request and response frames of one connection of a real capture, as sent."""
    streams = {"client": b"", "server": b""}
    reassembler = TcpReassembler()
    with open_capture(path) as capture:
        for ts, linktype, frame, _n in capture.packets():
            src, dst, sport, dport, seq, flags, payload, _ack = decode_tcp(linktype, frame)
            for e in reassembler.segment(ts, src, sport, dst, dport, seq, flags, payload):
                if type(e) is StreamData and client_port in (e.flow[1], e.flow[3]):
                    streams["client" if e.flow[1] == client_port else "server"] += e.data
    return _frames(streams["client"]), _frames(streams["server"])


def _with_correlation_id(frame: bytes, at: int, correlation_id: int) -> bytes:
    return frame[:at] + struct.pack(">i", correlation_id) + frame[at + 4:]


def test_responses_out_of_order_and_a_correlation_id_used_again_pair_as_tshark_says(tshark, tmp_path):
    """A real consumer's connection (ApiVersions, Metadata, FindCoordinator...), its requests
    sent first, then the broker's own responses in another order; then its first request once
    more under the same correlation id, now answered, and answered again."""
    requests, responses = _connection_frames(PCAPS / "java-console-consumer.pcap", 49744)
    requests, responses = requests[:5], responses[:5]
    ids = [struct.unpack_from(">i", r, 8)[0] for r in requests]
    assert ids == [struct.unpack_from(">i", r, 4)[0] for r in responses] and len(set(ids)) == 5
    path = tmp_path / "reordered.pcap"
    with PcapWriter(path) as out:
        conn = Connection(out, client="127.0.0.1", server="127.0.0.1", sport=49744)
        conn.handshake()
        for request in requests:
            conn.send(request)
        for i in (3, 0, 4, 2, 1):
            conn.reply(responses[i])
        conn.send(requests[0])  # the first correlation id again, its first use answered
        conn.reply(responses[0])
        conn.close()
    theirs, their_pairs = _tshark_pairs(tshark, path, {9092})
    ours, our_pairs, exchanges = _kinspect_pairs(path)
    assert ours == theirs and len(ours) == 6
    # tshark links a response to the first request of its id, answered or not: the re-sent
    # request's response it gives to the first one; kinspect to the one still waiting
    again = max(ours, key=lambda pair: pair[2])
    their_again = {pair for pair in their_pairs if pair[4] == again[2]}
    assert len(their_again) == 1 and their_pairs - their_again <= our_pairs
    frames = _tshark_frames(tshark, path, {9092})
    resent = max(f["time"] for f in frames.values() if f["dport"] == 9092)
    (port, correlation_id, api_key, first_time, response_time), = their_again
    assert (port, correlation_id, api_key, resent, response_time) in our_pairs
    assert (port, correlation_id, api_key, first_time, response_time) not in our_pairs
    assert [e["correlation_id"] for e in exchanges] == [ids[i] for i in (3, 0, 4, 2, 1)] + [ids[0]]
    assert [e["api_key"] for e in exchanges] == [struct.unpack_from(">h", requests[i], 4)[0]
                                                 for i in (3, 0, 4, 2, 1, 0)]
    assert all(e["problems"] == [] and e["response"] is not None for e in exchanges)


def test_a_correlation_id_used_again_before_its_response_leaves_the_first_unanswered(tmp_path):
    requests, responses = _connection_frames(PCAPS / "java-console-consumer.pcap", 49744)
    first, second = requests[1], _with_correlation_id(requests[2], 8, struct.unpack_from(">i", requests[1], 8)[0])
    path = tmp_path / "reused.pcap"
    with PcapWriter(path) as out:
        conn = Connection(out, client="127.0.0.1", server="127.0.0.1", sport=49744)
        conn.handshake()
        conn.send(first)
        conn.send(second)
        conn.reply(_with_correlation_id(responses[2], 4, struct.unpack_from(">i", requests[1], 8)[0]))
        conn.close()
    _, _, exchanges = _kinspect_pairs(path)
    assert [(e["api_name"], e["response"] is None) for e in exchanges] == [("Metadata", True),
                                                                            ("FindCoordinator", False)]
    assert exchanges[0]["problems"][-1]["what"] == "correlation id reused before a response was seen"
