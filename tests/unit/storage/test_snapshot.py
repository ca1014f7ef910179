import struct

from kinspect.storage.snapshot import ENTRY, decode_snapshot, decrement_sequence
from tests.unit.storage.conftest import KAFKA4, KAFKAFUN, need


def _checks(problems):
    return [p.check for p in problems]


def test_real_empty_snapshot():
    snapshot, problems = decode_snapshot((KAFKAFUN / "first-1" / "00000000000000000011.snapshot")
                                         .read_bytes())
    assert problems == []
    assert snapshot == {"version": 1, "crc": 0x48674BC7, "crc_valid": True, "count": 0,
                        "producers": []}


def test_idempotent_producers_from_the_lab_broker():
    path = need(KAFKA4 / "idempotent-0" / "00000000000000000024.snapshot")
    snapshot, problems = decode_snapshot(path.read_bytes())
    assert problems == [] and snapshot["count"] == 2
    first = snapshot["producers"][0]
    assert first["producer_id"] == 3 and first["current_txn_first_offset"] is None
    assert first["batch"] == {"first_sequence": 8, "last_sequence": 11, "last_offset": 11,
                              "offset_delta": 3, "timestamp": first["last_timestamp"]}


def test_transactional_producer_without_batch_metadata():
    path = need(KAFKA4 / "__consumer_offsets-30" / "00000000000000000007.snapshot")
    snapshot, problems = decode_snapshot(path.read_bytes())
    assert problems == []
    assert snapshot["producers"] == [{"producer_id": 7, "producer_epoch": 3,
                                      "coordinator_epoch": 0, "current_txn_first_offset": None,
                                      "last_timestamp": snapshot["producers"][0]["last_timestamp"],
                                      "batch": None}]


def test_damage_is_reported():
    data = (KAFKAFUN / "__consumer_offsets-13" / "00000000000000000220.snapshot").read_bytes()
    entry = ENTRY.pack(9, 1, 5, 100, 2, 1234, -1, -1)
    grown = data[:6] + struct.pack(">i", 1) + entry
    _, problems = decode_snapshot(grown)
    assert _checks(problems) == ["crc"]  # the old CRC no longer covers the bytes
    _, problems = decode_snapshot(data[:6] + struct.pack(">i", 2) + entry)
    assert "snapshot_size" in _checks(problems)
    _, problems = decode_snapshot(b"\x00\x02" + data[2:])
    assert _checks(problems) == ["snapshot_version"]
    assert _checks(decode_snapshot(data[:5])[1]) == ["snapshot_size"]


def test_sequence_arithmetic_wraps_like_kafka():
    assert decrement_sequence(11, 3) == 8
    assert decrement_sequence(1, 3) == 2**31 - 2
