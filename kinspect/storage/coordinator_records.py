"""Records of Kafka's coordinator topics: an int16 type + key struct, an int16 version + value.

Shared by __consumer_offsets (offsets_records.py) and __transaction_state
(transaction_state.py); the type table says which key and value struct each type has.
"""

from __future__ import annotations

import struct

from kinspect.problems import ERROR, WARNING, Problem
from kinspect.storage import structs

_I16 = struct.Struct(">h")


def decode_coordinator_record(key: bytes | None, value: bytes | None, types: dict,
                              topic: str) -> tuple[dict, list[Problem]]:
    """{record_type, record_name, key, value_version, value, tombstone}.

    Unknown types and versions keep the raw bytes (key or value) with a notice; a value that
    does not decode keeps what decoded before the fault.
    """
    problems: list[Problem] = []
    out: dict = {"record_type": None, "record_name": None, "key": key, "value_version": None,
                 "value": value, "tombstone": value is None}
    if key is None or len(key) < 2:
        problems.append(Problem(f"{topic} record key must start with an int16 type, found "
                                f"{'null' if key is None else f'{len(key)} bytes'}", "key", 0,
                                ERROR, "record_key"))
        return out, problems
    record_type = out["record_type"] = _I16.unpack_from(key, 0)[0]
    entry = types.get(record_type)
    if entry is None:
        problems.append(Problem(f"unknown {topic} record type {record_type}: key and value "
                                f"shown raw", "key", 0, WARNING, "record_type", sorted(types),
                                record_type))
        return out, problems
    key_struct, key_version, value_struct = entry
    out["record_name"] = key_struct[:-3]
    out["key"], key_problems = structs.decode_struct(key_struct, key_version, key[2:], 2, "key")
    problems += key_problems
    if value is None:
        return out, problems
    if len(value) < 2:
        problems.append(Problem(f"{topic} record value must start with an int16 version, found "
                                f"{len(value)} bytes", "value", 0, ERROR, "record_value"))
        return out, problems
    version = out["value_version"] = _I16.unpack_from(value, 0)[0]
    if not structs.has_version(value_struct, version):
        problems.append(Problem(f"{value_struct} version {version} is unknown: value shown raw",
                                "value", 0, WARNING, "record_version",
                                structs.versions(value_struct), version))
        return out, problems
    out["value"], value_problems = structs.decode_struct(value_struct, version, value[2:], 2,
                                                         "value")
    problems += value_problems
    return out, problems
