"""Producer state snapshots (<offset>.snapshot): the idempotent/transactional producers of a
partition as of the file's offset, written at segment roll and clean shutdown.

    int16 version (1), uint32 CRC-32C of everything after it, int32 count, then per producer:
    int64 producer id, int16 epoch, int32 last sequence, int64 last offset, int32 offset delta,
    int64 timestamp, int32 coordinator epoch, int64 current transaction's first offset (-1: none)

A last offset of -1 means no batch metadata (a producer known only by its epoch, e.g. after a
transaction marker). first_sequence is last_sequence - offset_delta, wrapping like Kafka's.
"""

from __future__ import annotations

import struct

from kinspect.records.crc import crc32c

from kinspect.problems import ERROR, Problem

HEADER = struct.Struct(">hIi")
ENTRY = struct.Struct(">qhiqiqiq")
VERSION = 1
INT32_MAX = 2**31 - 1


def decode_snapshot(buf, path: str = "snapshot") -> tuple[dict, list[Problem]]:
    """{"version", "crc", "crc_valid", "count", "producers": [...]} and the problems found."""
    problems: list[Problem] = []
    data = bytes(buf)
    if len(data) < HEADER.size:
        problems.append(Problem(f"{len(data)} bytes are too few for a snapshot header "
                                f"({HEADER.size})", path, 0, ERROR, "snapshot_size"))
        return {"version": None, "producers": []}, problems
    version, crc, count = HEADER.unpack_from(data, 0)
    computed = crc32c(data[6:])
    snapshot = {"version": version, "crc": crc, "crc_valid": computed == crc, "count": count,
                "producers": []}
    if version != VERSION:
        problems.append(Problem(f"snapshot version {version} is unknown (Kafka writes {VERSION})",
                                path, 0, ERROR, "snapshot_version", VERSION, version))
    if computed != crc:
        problems.append(Problem(f"snapshot CRC-32C is {crc:#010x} but the bytes give "
                                f"{computed:#010x}", path, 2, ERROR, "crc", computed, crc))
    room = (len(data) - HEADER.size) // ENTRY.size
    if count < 0 or count != room or (len(data) - HEADER.size) % ENTRY.size:
        problems.append(Problem(f"count says {count} producers; {len(data) - HEADER.size} bytes "
                                f"after the header hold {room} entries of {ENTRY.size} bytes",
                                path, 6, ERROR, "snapshot_size", room, count))
    for index in range(min(max(count, 0), room)):
        snapshot["producers"].append(_producer(data, HEADER.size + index * ENTRY.size))
    return snapshot, problems


def _producer(data: bytes, at: int) -> dict:
    (producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch,
     txn_first_offset) = ENTRY.unpack_from(data, at)
    producer = {"producer_id": producer_id, "producer_epoch": epoch,
                "coordinator_epoch": coordinator_epoch,
                "current_txn_first_offset": txn_first_offset if txn_first_offset >= 0 else None,
                "last_timestamp": timestamp, "batch": None}
    if last_offset >= 0:
        producer["batch"] = {"first_sequence": decrement_sequence(last_sequence, offset_delta),
                             "last_sequence": last_sequence, "last_offset": last_offset,
                             "offset_delta": offset_delta, "timestamp": timestamp}
    return producer


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's sequence arithmetic: sequences wrap from INT32_MAX to 0."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement
