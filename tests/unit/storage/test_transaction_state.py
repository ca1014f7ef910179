import struct

from kinspect.storage.segment import walk_segment
from kinspect.storage.transaction_state import decode_transaction_record
from tests.unit.storage.conftest import KAFKA4, need


def test_transaction_log_written_by_the_lab_broker():
    states = []
    for log in sorted(need(KAFKA4).glob("__transaction_state-*/*.log")):
        for kind, unit, _ in walk_segment(log.read_bytes()):
            for record in unit["records"]:
                decoded, problems = decode_transaction_record(record["key"], record["value"])
                assert problems == []
                states.append(decoded)
    assert {s["state"] for s in states} >= {"Empty", "Ongoing", "PrepareCommit",
                                            "CompleteCommit", "PrepareAbort", "CompleteAbort"}
    ongoing = next(s for s in states if s["state"] == "Ongoing")
    assert ongoing["key"]["transactional_id"]
    assert ongoing["value"]["transaction_partitions"][0]["partition_ids"]
    assert ongoing["value_version"] == 1 and ongoing["value"]["client_transaction_version"] == 2


def test_version_0_value_and_tombstone():
    key = struct.pack(">hh", 0, 3) + b"tid"
    value = struct.pack(">hqhib", 0, 12, 1, 60000, 4) + struct.pack(">i", -1)
    value += struct.pack(">qq", 1000, 900)
    decoded, problems = decode_transaction_record(key, value)
    assert problems == [] and decoded["state"] == "CompleteCommit"
    assert decoded["value"]["transaction_partitions"] is None
    decoded, problems = decode_transaction_record(key, None)
    assert problems == [] and decoded["tombstone"] and "state" not in decoded
