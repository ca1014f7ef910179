"""Hand-built KRaft metadata record values (frame version, type, version, flexible struct) and a
__cluster_metadata segment of them, for the edge cases of secrets; real ones come from the lab
(tests/integration/test_dump_secrets_lab.py) and samples/."""

from __future__ import annotations

import struct

from tests.unit.records.handmade import record, record_body, uvarint, v2_batch

JAAS_PASSWORD = "jaas-dump-pw"
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_alice="{JAAS_PASSWORD}";')
SALT, STORED_KEY, SERVER_KEY = b"salt-secret-0123", b"stored-key-secret-4567", b"server-key-secret-89ab"


def compact(data: str | bytes | None) -> bytes:
    if data is None:
        return b"\x00"
    raw = data.encode() if isinstance(data, str) else data
    return uvarint(len(raw) + 1) + raw


def metadata_value(api_key: int, body: bytes, version: int = 0) -> bytes:
    return uvarint(1) + uvarint(api_key) + uvarint(version) + body + b"\x00"  # no tagged fields


def config_record(name: str, value: str | None, resource_type: int = 4, resource: str = "1",
                  version: int = 0) -> bytes:
    return metadata_value(4, struct.pack(">b", resource_type) + compact(resource) + compact(name)
                          + compact(value), version)


def scram_record(user: str = "alice", salt: bytes = SALT, stored_key: bytes = STORED_KEY,
                 server_key: bytes = SERVER_KEY, iterations: int = 4096) -> bytes:
    return metadata_value(11, compact(user) + struct.pack(">b", 2) + compact(salt) + compact(stored_key)
                          + compact(server_key) + struct.pack(">i", iterations))


def delegation_token_record(token_id: str = "tok-1", owner: str = "User:alice") -> bytes:
    return metadata_value(10, compact(owner) + compact(owner) + uvarint(2) + compact("User:bob")
                          + struct.pack(">qqq", 1, 2, 3) + compact(token_id))


SECRET_VALUES = [
    config_record("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS),
    config_record("log.retention.ms", "1000"),
    config_record("ssl.key.password", None),  # a deletion: no value to hide
    scram_record(),
    delegation_token_record(),
]


def metadata_segment(values: list[bytes] = SECRET_VALUES) -> bytes:
    """One batch of the values, as the controller writes them (null keys)."""
    records = b"".join(record(record_body(offset_delta=i, key=None, value=value))
                       for i, value in enumerate(values))
    return v2_batch(records, len(values))
