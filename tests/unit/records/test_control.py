import struct

import pytest

from kinspect.records import decode_records
from kinspect.records.control import decode_control
from tests.unit.records.conftest import java_fixture
from tests.unit.records.handmade import reseal

KAFKA_WRITTEN = {
    "2_control_commit": {"type": "COMMIT", "key_version": 0, "version": 0,
                         "coordinator_epoch": 11},
    "2_control_abort": {"type": "ABORT", "key_version": 0, "version": 0, "coordinator_epoch": 12},
    "2_control_leader_change": {
        "type": "LEADER_CHANGE", "key_version": 0, "version": 0, "leader_id": 1,
        "voters": [{"voter_id": 1}, {"voter_id": 2}, {"voter_id": 3}],
        "granting_voters": [{"voter_id": 2}]},
    "2_control_snapshot_header": {"type": "SNAPSHOT_HEADER", "key_version": 0, "version": 0,
                                  "last_contained_log_timestamp": 1_699_999_995_000},
    "2_control_snapshot_footer": {"type": "SNAPSHOT_FOOTER", "key_version": 0, "version": 0},
    "2_control_kraft_version": {"type": "KRAFT_VERSION", "key_version": 0, "version": 0,
                                "kraft_version": 1},
    "2_control_kraft_voters": {
        "type": "KRAFT_VOTERS", "key_version": 0, "version": 0,
        "voters": [{"voter_id": 1, "voter_directory_id": "wyOEk0m7Tn-08oGZjtVgEg",
                    "endpoints": [{"name": "CONTROLLER", "host": "controller-1.example",
                                   "port": 9093}],
                    "kraft_version_feature": {"min_supported_version": 0,
                                              "max_supported_version": 1}}]},
}


@pytest.mark.parametrize("name", KAFKA_WRITTEN)
def test_kafka_written_control_batches(name):
    (batch,), problems = decode_records(java_fixture(name), checks=True, partial_ok=False)
    assert problems == []
    assert batch["is_control"] and len(batch["records"]) == 1
    assert batch["control"] == KAFKA_WRITTEN[name]
    assert batch["is_transactional"] == (name in ("2_control_commit", "2_control_abort"))


def _key(type_id: int, version: int = 0) -> bytes:
    return struct.pack(">hh", version, type_id)


@pytest.mark.parametrize("key, value, complaint", [
    (None, b"", "at least 4 bytes"),
    (b"\x00\x00\x00", b"", "at least 4 bytes"),
    (_key(9), b"", "unknown control record type 9"),
    (_key(1), None, "null value"),
    (_key(1), b"\x00\x00\x00", "malformed"),
    (_key(1), struct.pack(">hib", 0, 5, 1), "1 bytes left over"),
    (_key(1, version=-1), struct.pack(">hi", 0, 5), "negative"),
    (_key(2), struct.pack(">hi", 0, 1) + b"\x05", "malformed"),  # voters array runs out
    (_key(4), struct.pack(">h", 0) + b"\x02\x01", "malformed"),  # tagged field overruns
])
def test_malformed_control_records(key, value, complaint):
    _, complaints = decode_control(key, value)
    assert len(complaints) == 1 and complaint in complaints[0]


def test_later_end_txn_marker_versions_read_as_version_0_like_kafka():
    control, complaints = decode_control(_key(0), struct.pack(">hi", 1, 7) + b"future")
    assert complaints == [] and control["coordinator_epoch"] == 7 and control["version"] == 1


def test_leader_change_version_1_has_directory_ids():
    voter = struct.pack(">i", 4) + bytes(range(16)) + b"\x00"
    value = struct.pack(">hi", 1, 4) + b"\x02" + voter + b"\x01" + b"\x00"
    control, complaints = decode_control(_key(2), value)
    assert complaints == []
    assert control["voters"] == [{"voter_id": 4, "voter_directory_id": "AAECAwQFBgcICQoLDA0ODw"}]


def test_control_problem_reported_on_the_batch():
    data = bytearray(java_fixture("2_control_commit"))
    # the record's key is "00 00 00 01" (version 0, COMMIT): make the type 9
    index = bytes(data).index(b"\x00\x00\x00\x01", 61)
    data[index + 3] = 9
    (batch,), problems = decode_records(reseal(data))
    assert [p.check for p in problems] == ["control_record"]
    assert batch["control"]["type"] == "UNKNOWN(9)"
