import struct

from kinspect.storage.index import OFFSET_ENTRY, TIME_ENTRY, check_offset_index, check_time_index
from kinspect.storage.segment import walk_segment
from tests.unit.storage.conftest import (KAFKA4, LEGACY, SEGMENT, need, oracle_batches,
                                         oracle_index, oracle_timeindex, sample_roots)

METADATA = KAFKA4 / "__cluster_metadata-0"  # 72 batches; the indexes with the most entries
LOG = METADATA / SEGMENT
INDEX = METADATA / "00000000000000000000.index"
TIMEINDEX = METADATA / "00000000000000000000.timeindex"


def _headers(log: bytes):
    return lambda: (item for kind, item, _ in walk_segment(log, decode=False) if kind == "batch")


def _offsets(buf, log, base=0):
    return list(check_offset_index(buf, base, _headers(log) if log is not None else None, "idx",
                                   None if log is None else len(log)))


def _times(buf, log, base=0):
    return list(check_time_index(buf, base, _headers(log) if log is not None else None, "tidx"))


def _checks(items):
    return [(p.check, p.severity) for _, _, problems in items for p in problems]


def _batches(log: bytes) -> list[dict]:
    return [item for kind, item, _ in walk_segment(log, decode=False)]


def _sample_indexes(suffix: str) -> list:
    return [p for root in sample_roots() for p in sorted(root.glob(f"*/*{suffix}"))]


def test_real_offset_index_points_at_batch_ends():
    entries = 0
    for path in _sample_indexes(".index"):
        log, base = path.with_suffix(".log"), int(path.stem)
        items = _offsets(need(path).read_bytes(), log.read_bytes(), base)
        assert _checks(items) == [], path
        assert [(e["offset"], e["position"]) for _, e, _ in items] == oracle_index(path), path
        by_position = {b["position"]: b["last_offset"] for b in oracle_batches(log)}
        for kind, entry, _ in items:
            assert by_position[entry["position"]] == entry["offset"] == entry["batch_last_offset"]
        entries += len(items)
    assert entries > 20


def test_real_time_index_matches_batch_max_timestamps():
    entries = 0
    for path in _sample_indexes(".timeindex"):
        log, base = path.with_suffix(".log"), int(path.stem)
        items = _times(need(path).read_bytes(), log.read_bytes(), base)
        assert _checks(items) == [], path
        assert [(e["timestamp"], e["offset"]) for _, e, _ in items] == oracle_timeindex(path), path
        by_last = {b["last_offset"]: b["timestamp"] for b in oracle_batches(log)}
        assert all(by_last[e["offset"]] == e["timestamp"] for _, e, _ in items), path
        entries += len(items)
    assert entries > 20


def test_every_sample_index_checks_clean():
    indexes = sorted(need(KAFKA4).parent.parent.glob("*/logs/*/*.index"))
    assert indexes
    for path in indexes:
        log, base = path.with_suffix(".log").read_bytes(), int(path.stem)
        assert _checks(_offsets(path.read_bytes(), log, base)) == [], path
        time_index = path.with_suffix(".timeindex").read_bytes()
        assert _checks(_times(time_index, log, base)) == [], path


def test_preallocated_zero_tail_is_reported_as_such_not_as_entries():
    log = need(LOG).read_bytes()
    index = INDEX.read_bytes() + bytes(8 * 1000)
    items = _offsets(index, log)
    assert [kind for kind, _, _ in items].count("entry") == len(oracle_index(INDEX))
    tail = items[-1]
    assert tail[0] == "zero_tail" and tail[1]["entries"] == 1000 and tail[1]["all_zero"]
    assert _checks(items) == [("index_preallocated", "info")]
    time_items = _times(TIMEINDEX.read_bytes() + bytes(12 * 50), log)
    assert time_items[-1][0] == "zero_tail" and time_items[-1][1]["entries"] == 50


def test_garbage_after_a_zero_entry_is_an_error():
    log = need(LOG).read_bytes()
    index = INDEX.read_bytes() + bytes(8) + OFFSET_ENTRY.pack(5000, 123)
    assert ("index_garbage", "error") in _checks(_offsets(index, log))


def test_entry_pointing_inside_a_batch_is_caught():
    log = need(LOG).read_bytes()
    entries = bytearray(INDEX.read_bytes())
    relative, position = OFFSET_ENTRY.unpack_from(entries, 8 * 2)
    OFFSET_ENTRY.pack_into(entries, 8 * 2, relative, position + 3)
    items = _offsets(bytes(entries), log)
    assert _checks(items) == [("index_position", "error")]
    assert items[2][2][0].offset == 8 * 2 + 4


def test_entry_inside_its_batch_is_information():
    """Brokers before 0.11 indexed the first offset of an append: lookups still land well."""
    log = need(LEGACY / "legacy-v1-gzip-0" / SEGMENT).read_bytes()
    wrapper = _batches(log)[1]  # a gzip wrapper of 4 messages
    entry = OFFSET_ENTRY.pack(wrapper["last_offset"] - 2, wrapper["position"])
    assert _checks(_offsets(entry, log)) == [("index_offset", "info")]


def test_offset_order_and_wrong_offsets():
    log = need(LOG).read_bytes()
    entries = bytearray(INDEX.read_bytes())
    first, second = OFFSET_ENTRY.unpack_from(entries, 0), OFFSET_ENTRY.unpack_from(entries, 8)
    OFFSET_ENTRY.pack_into(entries, 0, second[0], first[1])  # entry 0 claims entry 1's offset
    checks = _checks(_offsets(bytes(entries), log))
    assert ("index_offset", "error") in checks and ("index_order", "error") in checks


def test_append_of_several_batches_is_information():
    """A follower appends several batches at once: the entry has the last of them."""
    log = need(LOG).read_bytes()
    batches = _batches(log)
    entry = OFFSET_ENTRY.pack(batches[3]["last_offset"], batches[1]["position"])
    items = _offsets(entry, log)
    assert _checks(items) == [("index_offset", "info")]
    assert items[0][1]["batch_last_offset"] == batches[1]["last_offset"]


def test_partial_trailing_entry_and_no_log():
    items = _offsets(INDEX.read_bytes() + b"\x01\x02\x03", None)
    assert items[-1][0] == "trailing" and _checks(items) == [("index_size", "warning")]


def test_time_index_mismatches():
    log = need(LOG).read_bytes()
    batches = _batches(log)
    entries = TIME_ENTRY.pack(batches[5]["max_timestamp"] + 1, batches[5]["last_offset"])
    entries += TIME_ENTRY.pack(batches[4]["max_timestamp"], batches[6]["last_offset"])
    entries += TIME_ENTRY.pack(batches[9]["max_timestamp"], batches[9]["base_offset"] - 1 + 0)
    items = _times(entries, log)
    assert [[(p.check, p.severity, p.offset) for p in problems] for _, _, problems in items] == [
        [("timeindex_timestamp", "error", 0)],
        [("timeindex_order", "error", 12), ("timeindex_timestamp", "error", 12)],
        [("timeindex_timestamp", "error", 24)]]


def test_empty_index():
    assert _offsets(b"", b"") == []
    assert struct.calcsize(">ii") == OFFSET_ENTRY.size
