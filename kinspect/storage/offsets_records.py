"""__consumer_offsets records, every type: offset commits (0, 1), classic group metadata (2),
KIP-848 consumer groups (3-8, 16), share groups (9-15) and streams groups (17-23).

    record, problems = decode_offsets_record(key, value)

record: {"record_type": 1, "record_name": "OffsetCommit", "key": {"group": ..., "topic": ...,
"partition": ...}, "value_version": 3, "value": {"offset": ..., ...} or None, "tombstone": bool}.
Classic group metadata with protocol type "consumer" has its members' subscription and
assignment bytes decoded (as kafka-dump-log does); bytes that do not decode stay bytes.
Unknown types or versions: raw bytes and a warning, never an exception.
"""

from __future__ import annotations

import struct

from kinspect.problems import INFO, Problem
from kinspect.storage import structs
from kinspect.storage._record_schemas import GROUP_RECORD_TYPES
from kinspect.storage.coordinator_records import decode_coordinator_record

TOPIC = "__consumer_offsets"
GROUP_METADATA = 2
CONSUMER_PROTOCOL_TYPE = "consumer"
_I16 = struct.Struct(">h")


def decode_offsets_record(key: bytes | None, value: bytes | None) -> tuple[dict, list[Problem]]:
    record, problems = decode_coordinator_record(key, value, GROUP_RECORD_TYPES, TOPIC)
    if record["record_type"] == GROUP_METADATA and isinstance(record["value"], dict):
        _decode_consumer_protocol(record["value"], problems)
    return record, problems


def _decode_consumer_protocol(group: dict, problems: list[Problem]) -> None:
    if group.get("protocol_type") != CONSUMER_PROTOCOL_TYPE:
        return
    for index, member in enumerate(group.get("members") or ()):
        for field, name in (("subscription", "ConsumerProtocolSubscription"),
                            ("assignment", "ConsumerProtocolAssignment")):
            raw = member.get(field)
            if isinstance(raw, bytes):
                decoded = decode_consumer_protocol(name, raw)
                if decoded is None:
                    problems.append(Problem(f"member {field} is not a {name}: kept as bytes",
                                            f"value → members[{index}] → {field}", None, INFO,
                                            "consumer_protocol"))
                else:
                    member[field] = decoded


def decode_consumer_protocol(name: str, raw: bytes) -> dict | None:
    """A consumer protocol subscription or assignment (int16 version + struct), or None.

    Versions above the highest known are read as the highest, as Kafka's consumer does.
    """
    if len(raw) < 2:
        return None
    version = _I16.unpack_from(raw, 0)[0]
    known = structs.versions(name)
    if version < known[0]:
        return None
    decoded, problems = structs.decode_struct(name, min(version, known[1]), raw[2:])
    if any(p.severity == "error" for p in problems):
        return None
    return {"version": version, **decoded}
