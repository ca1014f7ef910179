from collections import Counter

from kinspect.storage.checkpoints import decode_partition_metadata
from kinspect.storage.cluster_metadata import decode_metadata_record, redact_secrets, type_name
from kinspect.storage.segment import walk_segment
from tests.unit.storage.conftest import KAFKA4, SEGMENT, need
from tests.unit.storage.metadata_records import (JAAS, SALT, SERVER_KEY, STORED_KEY, config_record,
                                                 delegation_token_record, scram_record)


def _metadata(path):
    out = []
    for kind, unit, _ in walk_segment(path.read_bytes()):
        if kind == "batch" and not unit["is_control"]:
            for record in unit["records"]:
                decoded, problems = decode_metadata_record(record["value"])
                assert problems == [], (path, record["offset"], problems)
                out.append(decoded)
    return out


def test_metadata_log_and_snapshots_decode_completely():
    directory = need(KAFKA4 / "__cluster_metadata-0")
    records = _metadata(directory / SEGMENT)
    for snapshot in sorted(directory.glob("*.checkpoint")):
        records += _metadata(snapshot)
    records += _metadata(KAFKA4 / "bootstrap.checkpoint")
    types = Counter(r["type"] for r in records)
    assert {"TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD", "CONFIG_RECORD",
            "FEATURE_LEVEL_RECORD", "REGISTER_BROKER_RECORD", "REGISTER_CONTROLLER_RECORD",
            "PRODUCER_IDS_RECORD", "NO_OP_RECORD", "BEGIN_TRANSACTION_RECORD",
            "END_TRANSACTION_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD"} <= set(types)


def test_topic_ids_agree_with_partition_metadata_files():
    """TopicRecord ids in the metadata log are the ids in each partition.metadata."""
    records = _metadata(need(KAFKA4 / "__cluster_metadata-0" / SEGMENT))
    topics = {r["data"]["name"]: r["data"]["topic_id"] for r in records
              if r["type"] == "TOPIC_RECORD"}
    checked = 0
    for meta in KAFKA4.glob("*-0/partition.metadata"):
        topic = meta.parent.name.rsplit("-", 1)[0]
        if topic in topics:
            assert decode_partition_metadata(meta.read_bytes())[0]["topic_id"] == topics[topic]
            checked += 1
    assert checked >= 10


def test_partition_record_tagged_fields():
    records = _metadata(need(KAFKA4 / "__cluster_metadata-0" / SEGMENT))
    partition = next(r for r in records if r["type"] == "PARTITION_RECORD")
    assert partition["version"] >= 1 and partition["data"]["replicas"] == [1]
    assert len(partition["data"]["directories"]) == 1


def test_frame_version_unknown_types_and_versions():
    decoded, problems = decode_metadata_record(b"\x01\x0c\x00\x03ab\x00\x01\x00")
    assert problems == [] and decoded["data"] == {"name": "ab", "feature_level": 1}
    decoded, problems = decode_metadata_record(b"\x01\x63\x00\x00")
    assert decoded["type"] == "UNKNOWN(99)" and problems[0].check == "record_type"
    decoded, problems = decode_metadata_record(b"\x01\x02\x09\x00")
    assert problems[0].check == "record_version" and decoded["data"] == b"\x00"
    assert decode_metadata_record(b"\x02\x14\x00\x00")[1][0].check == "metadata_record"
    assert decode_metadata_record(None)[1][0].check == "metadata_record"
    assert decode_metadata_record(b"\x01\xff")[1][0].check == "metadata_record"


def test_type_names():
    assert type_name("RegisterBrokerRecord") == "REGISTER_BROKER_RECORD"
    assert type_name("NoOpRecord") == "NO_OP_RECORD"


# -- secrets -------------------------------------------------------------------------------------

def _decoded(value: bytes) -> dict:
    decoded, problems = decode_metadata_record(value)
    assert problems == []
    return decoded


def test_secret_config_values_are_redacted_by_name():
    for name in ("listener.name.sasl_plaintext.plain.sasl.jaas.config", "sasl.jaas.config",
                 "ssl.keystore.password", "password.encoder.secret", "ssl.keystore.key"):
        record = _decoded(config_record(name, JAAS))
        assert redact_secrets(record) is True
        assert record["data"] == {"resource_type": 4, "resource_name": "1", "name": name,
                                  "value": f"<redacted {len(JAAS)} bytes>"}
    plain = _decoded(config_record("retention.ms", "1000", resource_type=2, resource="t"))
    assert redact_secrets(plain) is False and plain["data"]["value"] == "1000"
    deleted = _decoded(config_record("ssl.key.password", None))
    assert redact_secrets(deleted) is False and deleted["data"]["value"] is None


def test_scram_credentials_lose_salt_and_keys_and_keep_user_mechanism_iterations():
    record = _decoded(scram_record(salt=b"\xff\x00" * 8))
    assert redact_secrets(record) is True
    assert record["data"] == {"name": "alice", "mechanism": 2, "salt": "<redacted 16 bytes>",
                              "stored_key": f"<redacted {len(STORED_KEY)} bytes>",
                              "server_key": f"<redacted {len(SERVER_KEY)} bytes>", "iterations": 4096}


def test_delegation_tokens_and_other_records_hold_nothing_secret():
    token = _decoded(delegation_token_record())
    before = dict(token["data"])
    assert redact_secrets(token) is False and token["data"] == before
    assert before["token_id"] == "tok-1" and before["renewers"] == ["User:bob"]
    feature = _decoded(b"\x01\x0c\x00\x03ab\x00\x01\x00")
    assert redact_secrets(feature) is False and feature["data"] == {"name": "ab", "feature_level": 1}
    unknown, _ = decode_metadata_record(b"\x01\x63\x00" + SALT)
    assert redact_secrets(unknown) is False and unknown["data"] == SALT  # an unknown type: nothing to go by
    assert redact_secrets(decode_metadata_record(None)[0]) is False


def test_an_unknown_version_of_a_secret_bearing_record_goes_whole():
    config = config_record("sasl.jaas.config", JAAS, version=7)
    record, problems = decode_metadata_record(config)
    assert problems[0].check == "record_version" and isinstance(record["data"], bytes)
    assert redact_secrets(record) is True and record["data"] == f"<redacted {len(config) - 3} bytes>"
    scram, _ = decode_metadata_record(b"\x01\x0b\x05" + SALT)
    assert redact_secrets(scram) is True and scram["data"] == f"<redacted {len(SALT)} bytes>"


def test_a_truncated_scram_record_is_redacted_as_far_as_it_decoded():
    value = scram_record()
    record, problems = decode_metadata_record(value[:-12])  # cut inside the server key
    assert problems and record["data"]["salt"] == SALT
    assert redact_secrets(record) is True and "server_key" not in record["data"]
    assert record["data"]["salt"] == f"<redacted {len(SALT)} bytes>"
    assert record["data"]["stored_key"] == f"<redacted {len(STORED_KEY)} bytes>"
