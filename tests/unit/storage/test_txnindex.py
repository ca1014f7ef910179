from kinspect.storage.segment import walk_segment
from kinspect.storage.txnindex import ENTRY, check_marker, iter_aborted
from tests.unit.storage.conftest import KAFKA4, SEGMENT, need


def _entries(buf):
    return list(iter_aborted(buf, "txn"))


def test_real_transaction_index():
    path = need(KAFKA4 / "transactions-0" / "00000000000000000000.txnindex")
    entries = _entries(path.read_bytes())
    assert [problems for _, problems in entries] == [[], []]
    assert [(e["producer_id"], e["first_offset"], e["last_offset"], e["last_stable_offset"])
            for e, _ in entries] == [(5, 4, 6, 7), (6, 10, 12, 13)]


def test_markers_are_abort_markers_in_the_log():
    directory = need(KAFKA4 / "transactions-0")
    log = (directory / SEGMENT).read_bytes()
    batches = {item["base_offset"] + item["last_offset_delta"]: item
               for kind, item, _ in walk_segment(log) if kind == "batch"}
    for entry, _ in _entries((directory / "00000000000000000000.txnindex").read_bytes()):
        unit = batches[entry["last_offset"]]
        header = {"base_offset": unit["base_offset"], "last_offset": entry["last_offset"],
                  "is_control": unit["is_control"], "producer_id": unit["producer_id"]}
        assert check_marker(entry, header, unit["control"]["type"], "w", 0) == []
        assert [p.check for p in check_marker(entry, header, "COMMIT", "w", 0)] == [
            "txnindex_marker"]
        assert check_marker(entry, None, None, "w", 0)[0].check == "txnindex_marker"


def test_bad_entries():
    entries = ENTRY.pack(1, 5, 10, 4, 3) + ENTRY.pack(0, 5, 1, 2, 3) + b"\x00" * 5
    checks = [[p.check for p in problems] for _, problems in _entries(entries)]
    assert checks == [["txnindex_version", "txnindex_entry", "txnindex_entry"],
                      ["txnindex_order"], ["txnindex_size"]]
