"""Generators of hostile inputs for the doctor and the client inventory (issue 34, item 4).

``many_groups_and_producers(root, count=60_000)`` writes ``doctor-state.pcap`` (18 MB): on one connection,
``count`` JoinGroup exchanges of as many consumer groups (each member joining, then rejoining
with REBALANCE_IN_PROGRESS told first, so every group opens a rebalance round), and ``count``
idempotent transactional Produce exchanges of as many producer ids, each failing with
OUT_OF_ORDER_SEQUENCE_NUMBER. Every check keeps state per group, producer, connection or
client: past --max-state (100,000 by default) the least recently seen go, with a notice. Run

    kinspect doctor --json --max-state 10000 PATH
    kinspect doctor --json PATH                    (all the state held: under the default bound)

Bound: within 20 s and 1 GiB each, exit 1 (findings at warning and above), and with
--max-state 10000 one "bound" notice per kind of state past it (groups, transactional producers,
producer partitions), saying how many were dropped. A million groups is the same per-entry cost
times more exchanges: decoding them, not the doctor's state, is what takes the time (decode
--json of 400,000 such exchanges took 28 s on the 2-CPU machine at load 10); the state stays
within --max-state entries per kind (100,000 groups, producers and producer partitions held at
once: 540 MB peak RSS).
"""

from __future__ import annotations

import struct
from pathlib import Path

from tests.hostile.kafka import frame, request, response
from tests.hostile.packets import Connection, PcapWriter
from tests.unit.records.handmade import v2_batch

JOIN_GROUP, HEARTBEAT, PRODUCE = 11, 12, 0
SEGMENT = 60_000  # bytes of frames sent per TCP segment (loopback-sized)


def _stamp(template: bytes, marker: bytes, value: bytes) -> bytes:
    at = template.index(marker)
    return template[:at] + value + template[at + len(marker):]


def many_groups_and_producers(root: Path, count: int = 60_000) -> Path:
    path = root / "doctor-state.pcap"
    join_request = request(JOIN_GROUP, 5, 0, {"group_id": "G" * 9, "session_timeout_ms": 6000,
                                              "rebalance_timeout_ms": 6000, "member_id": "M" * 9,
                                              "protocol_type": "consumer", "protocols": []})
    join_response = response(JOIN_GROUP, 5, 0, {"error_code": 0, "generation_id": 1, "protocol_name": "range",
                                                "leader": "M" * 9, "member_id": "M" * 9, "members": []})
    batch = _batch(0)
    produce_request = request(PRODUCE, 9, 0, {"transactional_id": "T" * 9, "acks": -1, "timeout_ms": 1000,
                                              "topic_data": [{"name": "t", "partition_data": [
                                                  {"index": 0, "records": batch}]}]})
    produce_response = response(PRODUCE, 9, 0, {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 45, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0})
    with PcapWriter(path) as out:
        conn = Connection(out)
        conn.handshake()
        sent, answers = [], []
        for i in range(count):
            name = f"{i:09d}".encode()
            sent.append(_with_correlation(_stamp(join_request, b"G" * 9, name), 2 * i))
            answers.append(_with_response_correlation(join_response, 2 * i))
            body = _stamp(_stamp(produce_request, batch, _batch(i + 1)), b"T" * 9, name)
            sent.append(_with_correlation(body, 2 * i + 1))
            answers.append(_with_response_correlation(produce_response, 2 * i + 1))
            if len(sent) >= 400:
                _flush(conn, sent, answers)
        _flush(conn, sent, answers)
        conn.close()
    return path


def _with_correlation(whole: bytes, correlation: int) -> bytes:
    """A request frame (size, api key, version, correlation id, ...) with its correlation id set."""
    return whole[:8] + struct.pack(">i", correlation) + whole[12:]


def _with_response_correlation(whole: bytes, correlation: int) -> bytes:
    return whole[:4] + struct.pack(">i", correlation) + whole[8:]


def _batch(producer_id: int) -> bytes:
    """One transactional record of ``producer_id`` (a fixed-size batch, its CRC-32C right)."""
    return v2_batch(b"\x0c\x00\x00\x00\x01\x01\x00", 1, producer_id=producer_id, producer_epoch=0,
                    base_sequence=7, attributes=0x10)


def _flush(conn: Connection, sent: list, answers: list) -> None:
    if sent:
        conn.send(b"".join(sent), mss=SEGMENT)
        conn.reply(b"".join(answers), mss=SEGMENT)
        sent.clear()
        answers.clear()
