"""KRaft metadata records: the values of __cluster_metadata batches and .checkpoint snapshots.

Value: unsigned varint frame version (1), unsigned varint record type (api key), unsigned
varint record version, then the record, flexible encoding. Keys are null.

    record, problems = decode_metadata_record(value)
    record = {"type": "TOPIC_RECORD", "record_name": "TopicRecord", "api_key": 2,
              "version": 0, "data": {"name": ..., "topic_id": ...}}
    redact_secrets(record)   # in place; True when something was hidden

Secrets in metadata records: a ConfigRecord's value when its name marks it secret (kinspect.wire
.secrets' rules: a listener's sasl.jaas.config, *.password, *secret*, Kafka's other PASSWORD-type
configs; KRaft stores them in clear), and a UserScramCredentialRecord's salt, stored key and
server key (with the iterations, enough to test guessed passwords offline). A
DelegationTokenRecord holds no HMAC (the brokers derive it from the token id and their secret
key): its token id, owner and renewers stay, as on the wire.
"""

from __future__ import annotations

import re

from kinspect.problems import ERROR, WARNING, Problem
from kinspect.storage import structs
from kinspect.storage.metadata_schemas import METADATA_RECORDS
from kinspect.wire import secrets
from kinspect.wire.headers import read_uvarint

FRAME_VERSION = 1
SCRAM_SECRETS = ("salt", "stored_key", "server_key")  # UserScramCredentialRecord


def type_name(record_name: str) -> str:
    """RegisterBrokerRecord → REGISTER_BROKER_RECORD, Kafka's MetadataRecordType name."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", record_name).upper()


def decode_metadata_record(value: bytes | None) -> tuple[dict, list[Problem]]:
    problems: list[Problem] = []
    if value is None:
        problems.append(Problem("metadata record has a null value", "value", 0, ERROR,
                                "metadata_record"))
        return {"type": None, "data": None}, problems
    header = []
    pos = 0
    for name in ("frame version", "record type", "record version"):
        got = read_uvarint(value, pos, len(value))
        if got is None:
            problems.append(Problem(f"metadata record {name} is truncated or longer than 5 bytes",
                                    "value", pos, ERROR, "metadata_record"))
            return {"type": None, "data": value}, problems
        number, pos = got
        header.append(number)
    frame, api_key, version = header
    if frame != FRAME_VERSION:
        problems.append(Problem(f"metadata record frame version {frame} (Kafka writes "
                                f"{FRAME_VERSION})", "value", 0, WARNING, "metadata_record",
                                FRAME_VERSION, frame))
    entry = METADATA_RECORDS.get(api_key)
    if entry is None:
        problems.append(Problem(f"unknown metadata record type {api_key}: shown raw", "value", 0,
                                WARNING, "record_type", sorted(METADATA_RECORDS), api_key))
        return {"type": f"UNKNOWN({api_key})", "api_key": api_key, "version": version,
                "data": value[pos:]}, problems
    name = entry[0]
    record = {"type": type_name(name), "record_name": name, "api_key": api_key,
              "version": version}
    if not structs.has_version(name, version):
        problems.append(Problem(f"{name} version {version} is unknown: shown raw", "value", 0,
                                WARNING, "record_version", structs.versions(name), version))
        record["data"] = value[pos:]
        return record, problems
    record["data"], decode_problems = structs.decode_struct(name, version, value[pos:], pos,
                                                            "value")
    return record, problems + decode_problems


def redact_secrets(record: dict) -> bool:
    """Hides a decoded metadata record's secrets in place (see above); a ConfigRecord or a
    UserScramCredentialRecord of a version kinspect does not know, shown raw, goes whole.
    True when something was hidden."""
    name, data = record.get("record_name"), record.get("data")
    if name not in ("ConfigRecord", "UserScramCredentialRecord") or data is None:
        return False
    if not isinstance(data, dict):
        record["data"] = secrets.whole(data)
        return True
    if name == "ConfigRecord":
        value = data.get("value")
        secrets.config_entry(data)
        return data.get("value") is not value
    hidden = False
    for key in SCRAM_SECRETS:
        if data.get(key) is not None:
            data[key] = secrets.whole(data[key])
            hidden = True
    return hidden
