"""Test-local reader of Fetch v0-v11 response skeletons: just enough to find each records field.

kafka-rust bodies start at the correlation id; kafkajs fixtures start just after it.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path


def load_kafkajs(path: Path) -> bytes:
    return bytes(json.loads(path.read_text())["data"])


def fetch_record_sets(body: bytes, version: int, *, correlation_id: bool = True
                      ) -> list[tuple[str, int, int, bytes]]:
    """[(topic, partition, absolute position of the records, records bytes)]."""
    pos = 4 if correlation_id else 0
    if version >= 1:
        pos += 4  # throttle_time_ms
    if version >= 7:
        pos += 6  # error_code, session_id
    (topics,) = struct.unpack_from(">i", body, pos)
    pos += 4
    found = []
    for _ in range(topics):
        (size,) = struct.unpack_from(">h", body, pos)
        topic = body[pos + 2:pos + 2 + size].decode()
        pos += 2 + size
        (partitions,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(partitions):
            partition = struct.unpack_from(">i", body, pos)[0]
            pos += 4 + 2 + 8  # partition, error_code, high_watermark
            if version >= 4:
                pos += 8  # last_stable_offset
            if version >= 5:
                pos += 8  # log_start_offset
            if version >= 4:
                (aborted,) = struct.unpack_from(">i", body, pos)
                pos += 4 + 16 * max(aborted, 0)
            if version >= 11:
                pos += 4  # preferred_read_replica
            (size,) = struct.unpack_from(">i", body, pos)
            pos += 4
            found.append((topic, partition, pos, body[pos:pos + max(size, 0)]))
            pos += max(size, 0)
    assert pos == len(body), f"skeleton parse ended at {pos} of {len(body)}"
    return found
