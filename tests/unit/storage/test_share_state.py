import struct

from kinspect.storage.segment import walk_segment
from kinspect.storage.share_state import decode_share_state_record
from tests.unit.storage.conftest import KAFKA4, need


def test_share_group_state_written_by_the_lab_broker():
    decoded = []
    for log in sorted(need(KAFKA4).glob("__share_group_state-*/*.log")):
        for kind, unit, _ in walk_segment(log.read_bytes()):
            for record in unit["records"]:
                record, problems = decode_share_state_record(record["key"], record["value"])
                assert problems == []
                decoded.append(record)
    if not decoded:
        return
    names = {r["record_name"] for r in decoded}
    assert names <= {"ShareSnapshot", "ShareUpdate"} and "ShareSnapshot" in names
    snapshot = next(r for r in decoded if r["record_name"] == "ShareSnapshot")
    assert snapshot["key"]["group_id"] and len(snapshot["key"]["topic_id"]) == 22
    updates = [r for r in decoded if r["record_name"] == "ShareUpdate"]
    batches = [b for r in updates for b in r["value"]["state_batches"]]
    assert all(b["first_offset"] <= b["last_offset"] for b in batches)
    assert {b["delivery_state"] for b in batches} <= {0, 2, 4}


def test_update_record_from_bytes():
    key = struct.pack(">hh", 1, 1) + b"g" + bytes(range(16)) + struct.pack(">i", 3)
    value = struct.pack(">hiiq", 0, 0, 5, 10) + b"\x02" + struct.pack(">qqbh", 10, 12, 2, 1)
    value += b"\x00" + b"\x00"
    record, problems = decode_share_state_record(key, value)
    assert problems == []
    assert record["key"] == {"group_id": "g", "topic_id": "AAECAwQFBgcICQoLDA0ODw",
                             "partition": 3}
    assert record["value"] == {"snapshot_epoch": 0, "leader_epoch": 5, "start_offset": 10,
                               "state_batches": [{"first_offset": 10, "last_offset": 12,
                                                  "delivery_state": 2, "delivery_count": 1}]}
