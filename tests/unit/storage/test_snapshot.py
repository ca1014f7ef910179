import re
import struct

from kinspect.storage.snapshot import ENTRY, decode_snapshot, decrement_sequence
from tests.unit.storage.conftest import KAFKA4, dump_lines, need, sample_roots

EMPTY_CRC = 0x48674BC7  # CRC32C of the four bytes of a count of 0: every empty snapshot has it
PRODUCER = re.compile(r"^producerId: (-?\d+) producerEpoch: (-?\d+) coordinatorEpoch: (-?\d+) "
                      r"currentTxnFirstOffset: OptionalLong(?:\.empty|\[(\d+)\]) "
                      r"lastTimestamp: (-?\d+)(?: firstSequence: (-?\d+) lastSequence: (-?\d+) "
                      r"lastOffset: (-?\d+) offsetDelta: (-?\d+) timestamp: (-?\d+))? *$")


def _checks(problems):
    return [p.check for p in problems]


def _sample_snapshots():
    return [p for root in sample_roots() for p in sorted(root.glob("*/*.snapshot"))]


def _oracle_producers(path) -> list[dict]:
    """The producer entries kafka-dump-log printed for a producer snapshot."""
    producers = []
    for line in dump_lines(path)[1:]:
        n = PRODUCER.match(line).groups()
        number = [None if v is None else int(v) for v in n]
        batch = None if n[5] is None else dict(zip(
            ("first_sequence", "last_sequence", "last_offset", "offset_delta", "timestamp"),
            number[5:]))
        producers.append({"producer_id": number[0], "producer_epoch": number[1],
                          "coordinator_epoch": number[2], "current_txn_first_offset": number[3],
                          "last_timestamp": number[4], "batch": batch})
    return producers


def test_real_empty_snapshot():
    empty = [p for p in _sample_snapshots() if _oracle_producers(p) == []]
    assert len(empty) > 10
    for path in empty:
        snapshot, problems = decode_snapshot(path.read_bytes())
        assert problems == [], path
        assert snapshot == {"version": 1, "crc": EMPTY_CRC, "crc_valid": True, "count": 0,
                            "producers": []}, path


def test_every_sample_snapshot_agrees_with_kafka_dump_log():
    snapshots = _sample_snapshots()
    assert sum(bool(_oracle_producers(p)) for p in snapshots) > 10
    for path in snapshots:
        snapshot, problems = decode_snapshot(path.read_bytes())
        assert problems == [] and snapshot["crc_valid"], path
        assert snapshot["producers"] == _oracle_producers(path), path
        assert snapshot["count"] == len(snapshot["producers"]), path


def test_idempotent_producers_from_the_lab_broker():
    path = need(KAFKA4 / "idempotent-0" / "00000000000000000024.snapshot")
    snapshot, problems = decode_snapshot(path.read_bytes())
    assert problems == [] and snapshot["count"] == 2  # the sample's two idempotent producers
    assert snapshot["producers"] == _oracle_producers(path)
    for producer in snapshot["producers"]:
        assert producer["current_txn_first_offset"] is None
        assert producer["batch"]["timestamp"] == producer["last_timestamp"]
        assert producer["batch"]["last_sequence"] - producer["batch"]["first_sequence"] == (
            producer["batch"]["offset_delta"])


def test_transactional_producer_without_batch_metadata():
    path = need(KAFKA4 / "__consumer_offsets-30" / "00000000000000000007.snapshot")
    snapshot, problems = decode_snapshot(path.read_bytes())
    assert problems == [] and snapshot["count"] == 1
    assert snapshot["producers"] == _oracle_producers(path)
    [producer] = snapshot["producers"]
    assert producer["batch"] is None and producer["current_txn_first_offset"] is None


def test_damage_is_reported():
    data = need(KAFKA4 / "codec-none-0" / "00000000000000000015.snapshot").read_bytes()
    assert decode_snapshot(data) == ({"version": 1, "crc": EMPTY_CRC, "crc_valid": True,
                                      "count": 0, "producers": []}, [])
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
