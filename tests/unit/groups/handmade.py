"""Hand-built __consumer_offsets records and batches, for edge cases real data lacks
(the layouts are Kafka's group-coordinator JSON definitions; real data covers the rest)."""

from __future__ import annotations

import struct

from kinspect.records.batch import CONTROL_BIT, TRANSACTIONAL_BIT
from kinspect.storage.segment import walk_segment
from tests.unit.records.handmade import record, record_body, v2_batch


def string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return struct.pack(">h", 1) + string(group) + string(topic) + struct.pack(">i", partition)


def offset_value(offset: int, metadata: str = "", timestamp: int = 1_700_000_000_000,
                 leader_epoch: int = -1) -> bytes:
    """OffsetCommitValue v3: offset, leader epoch, metadata, commit timestamp."""
    return (struct.pack(">hqi", 3, offset, leader_epoch) + string(metadata)
            + struct.pack(">q", timestamp))


def group_key(group: str) -> bytes:
    return struct.pack(">h", 2) + string(group)


def classic_value(protocol_type: str = "consumer", generation: int = 1,
                  members: list[tuple[str, str, str]] = ()) -> bytes:
    """GroupMetadataValue v0; members (member id, client id, host), empty protocol bytes."""
    out = struct.pack(">h", 0) + string(protocol_type) + struct.pack(">i", generation)
    out += string("range" if members else None) + string(members[0][0] if members else None)
    out += struct.pack(">i", len(members))
    for member_id, client_id, host in members:
        out += string(member_id) + string(client_id) + string(host) + struct.pack(">i", 10000)
        out += struct.pack(">i", 0) + struct.pack(">i", 0)  # subscription, assignment bytes
    return out


def batch(records: list[tuple[bytes | None, bytes | None]], base_offset: int, *,
          producer_id: int = -1, transactional: bool = False) -> bytes:
    body = b"".join(record(record_body(i, 0, key, value, b"\x00"))
                    for i, (key, value) in enumerate(records))
    return v2_batch(body, len(records), base_offset=base_offset, producer_id=producer_id,
                    producer_epoch=0 if producer_id >= 0 else -1,
                    attributes=TRANSACTIONAL_BIT if transactional else 0)


def marker(base_offset: int, producer_id: int, commit: bool) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    body = record(record_body(0, 0, key, value, b"\x00"))
    return v2_batch(body, 1, base_offset=base_offset, producer_id=producer_id, producer_epoch=0,
                    attributes=TRANSACTIONAL_BIT | CONTROL_BIT)


def replay_bytes(replay, data: bytes, source: str = "handmade.log"):
    for kind, item, problems in walk_segment(data, source):
        replay.problems += [p for p in problems if p.severity != "info"]
        if kind == "batch":
            replay.batch(item, source)
    return replay.finish()
