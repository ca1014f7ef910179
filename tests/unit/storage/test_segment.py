import mmap
import struct

import pytest

from kinspect.records import decode_records
from kinspect.storage.segment import find_next_batch, walk_segment
from tests.unit.storage.conftest import (KAFKA4, LEGACY, SEGMENT, TXN_SEGMENT, dump_lines, need,
                                         oracle_batches, sample_roots)


def _walk(data, **options):
    return list(walk_segment(data, "seg", **options))


def _kinds(items):
    return [(kind, item["position"]) for kind, item, _ in items]


def _starts(path) -> list[int]:
    """Where kafka-dump-log found the batches of a samples/ segment."""
    return [batch["position"] for batch in oracle_batches(path)]


def _sample_logs():
    return [log for root in sample_roots() for log in sorted(root.glob("*/*.log"))]


def test_real_segments_walk_clean_and_agree_with_the_record_set_decoder():
    logs = _sample_logs()
    assert len(logs) > 40
    for path in logs:
        data = path.read_bytes()
        items = _walk(data, checks=True)
        assert {kind for kind, _, _ in items} == {"batch"}, path
        assert [p for _, _, problems in items for p in problems if p.severity != "info"] == [], path
        reference, _ = decode_records(data, partial_ok=False, checks=True)
        assert [unit for _, unit, _ in items] == reference, path
        assert [(u["position"], u["crc"], u["crc_valid"]) for _, u, _ in items] == [
            (b["position"], b["crc"], b["crc_valid"]) for b in oracle_batches(path)], path


def test_every_sample_segment_and_snapshot_walks_clean():
    logs = sorted(need(KAFKA4).glob("*/*.log")) + sorted(need(LEGACY).glob("*/*.log"))
    logs += sorted(KAFKA4.glob("*/*.checkpoint")) + [KAFKA4 / "bootstrap.checkpoint"]
    assert len(logs) > 30
    for path in logs:
        items = _walk(path.read_bytes(), checks=True)
        assert all(kind == "batch" for kind, _, _ in items), path
        assert all(unit["crc_valid"] for _, unit, _ in items), path
        errors = [p for _, _, problems in items for p in problems if p.severity == "error"]
        assert errors == [], path


def test_headers_only_walk_matches_the_decoded_batches():
    for path in _sample_logs():
        data = path.read_bytes()
        decoded = [unit for _, unit, _ in _walk(data)]
        headers = [unit for _, unit, _ in _walk(data, decode=False)]
        assert [h["position"] for h in headers] == [u["position"] for u in decoded], path
        assert [h["last_offset"] for h in headers] == [
            u["offset"] if "offset" in u else u["base_offset"] + u["last_offset_delta"]
            for u in decoded], path
        assert [h["max_timestamp"] for h in headers if h["magic"] == 2] == [
            u["max_timestamp"] for u in decoded if u["magic"] == 2], path
        assert [(h["position"], h["size"], h["last_offset"], h["max_timestamp"])
                for h in headers] == [(b["position"], b["size"], b["last_offset"], b["timestamp"])
                                      for b in oracle_batches(path)], path


def test_mmap_and_bytes_give_the_same_walk():
    for path in _sample_logs():
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0,
                                                   access=mmap.ACCESS_READ) as m:
            mapped = _walk(m, checks=True)
            assert [unit for _, unit, _ in mapped] == [u for _, u, _ in _walk(path.read_bytes(),
                                                                              checks=True)], path
            del mapped


def test_truncation_at_every_byte_reports_the_cut_and_keeps_what_is_whole():
    data = TXN_SEGMENT.read_bytes()
    batches = oracle_batches(TXN_SEGMENT)
    starts = [b["position"] for b in batches]
    for cut in range(1, len(data)):
        items = _walk(data[:cut], checks=True)
        whole = [b["position"] for b in batches if b["position"] + b["size"] <= cut]
        assert [item["position"] for kind, item, _ in items if kind == "batch"] == whole
        tail = [item for kind, item, _ in items if kind != "batch"]
        if cut in starts:
            assert tail == []
        else:
            last_start = max(s for s in starts if s < cut)
            assert [(t["position"], t["size"], t["resumed_at"]) for t in tail] == [
                (last_start, cut - last_start, None)]


def test_garbage_in_the_middle_is_reported_and_skipped():
    data = TXN_SEGMENT.read_bytes()
    starts = _starts(TXN_SEGMENT)
    for at in starts[1:]:
        for garbage in (b"garbage!" * 10, bytes(range(256)), b"\xff" * 100, b"\x00" * 37):
            damaged = data[:at] + garbage + data[at:]
            items = _walk(damaged, checks=True)
            assert _kinds(items) == ([("batch", s) for s in starts if s < at]
                                     + [("damage", at)]
                                     + [("batch", s + len(garbage)) for s in starts if s >= at])
            damage = items[starts.index(at)][1]
            assert damage["size"] == len(garbage)
            assert damage["resumed_at"] == at + len(garbage)


def test_a_length_reaching_into_the_next_batch_makes_damage_up_to_it():
    data = bytearray(TXN_SEGMENT.read_bytes())
    starts = _starts(TXN_SEGMENT)
    length = struct.unpack_from(">i", data, starts[2] + 8)[0]
    data[starts[2] + 8:starts[2] + 12] = struct.pack(">i", length + 20)
    items = _walk(bytes(data))
    assert _kinds(items) == ([("batch", s) for s in starts[:2]] + [("damage", starts[2])]
                             + [("batch", s) for s in starts[3:]])
    assert items[2][1]["resumed_at"] == starts[3]


def test_a_short_length_keeps_the_batch_with_a_bad_crc_and_one_damaged_byte():
    data = bytearray(TXN_SEGMENT.read_bytes())
    starts = _starts(TXN_SEGMENT)
    length = struct.unpack_from(">i", data, starts[2] + 8)[0]
    data[starts[2] + 8:starts[2] + 12] = struct.pack(">i", length - 1)
    items = _walk(bytes(data))
    assert _kinds(items) == ([("batch", s) for s in starts[:3]] + [("damage", starts[3] - 1)]
                             + [("batch", s) for s in starts[3:]])
    assert not items[2][1]["crc_valid"] and items[3][1]["size"] == 1


def test_bit_flip_in_a_payload_keeps_the_batch_with_its_crc_problem():
    data = bytearray(TXN_SEGMENT.read_bytes())
    starts = _starts(TXN_SEGMENT)
    first = f"| offset: {oracle_batches(TXN_SEGMENT)[4]['base_offset']} "
    payload = next(line for line in dump_lines(TXN_SEGMENT) if line.startswith(first))
    payload = payload.split(" payload: ")[1].encode()
    data[data.index(payload, starts[4]) + len(payload) // 2] ^= 0x01  # inside a record's value
    items = _walk(bytes(data))
    assert _kinds(items) == [("batch", s) for s in starts]
    unit, problems = items[4][1], items[4][2]
    assert not unit["crc_valid"]
    assert [p.check for p in problems] == ["crc"] and problems[0].offset == starts[4] + 17


def test_zero_filled_tail_is_padding_not_batches():
    data = TXN_SEGMENT.read_bytes()
    items = _walk(data + bytes(10 << 20))
    assert _kinds(items)[-1] == ("padding", len(data))
    assert items[-1][1]["size"] == 10 << 20
    assert items[-1][2][0].severity == "info"


def test_zeros_then_batches_resume_after_the_zeros():
    data = TXN_SEGMENT.read_bytes()
    starts = _starts(TXN_SEGMENT)
    items = _walk(data[:starts[3]] + bytes(100_000) + data[starts[3]:])
    damage = [item for kind, item, _ in items if kind == "damage"]
    assert damage == [{"position": starts[3], "size": 100_000, "resumed_at": starts[3] + 100_000,
                       "what": damage[0]["what"]}]
    assert len([1 for kind, _, _ in items if kind == "batch"]) == len(starts)


def test_legacy_segment_resyncs_on_legacy_messages():
    path = need(LEGACY / "legacy-v1-none-0" / SEGMENT)
    data = path.read_bytes()
    starts = _starts(path)
    damaged = data[:starts[5]] + b"\x07" * 33 + data[starts[5]:]
    items = _walk(damaged)
    assert _kinds(items)[5] == ("damage", starts[5])
    assert len([1 for kind, _, _ in items if kind == "batch"]) == len(starts)


def test_find_next_batch_needs_a_valid_crc():
    data = TXN_SEGMENT.read_bytes()
    starts = _starts(TXN_SEGMENT)
    view = memoryview(data)
    assert find_next_batch(data, view, 1, len(data)) == starts[1]
    broken = bytearray(data)
    broken[starts[1] + 30] ^= 0xFF  # inside batch 1's CRC-covered bytes
    view = memoryview(bytes(broken))
    assert find_next_batch(bytes(broken), view, 1, len(data)) == starts[2]
    assert find_next_batch(data, memoryview(data), starts[-1] + 1, len(data)) is None


@pytest.mark.parametrize("size", [0, 1, 11, 16, 17])
def test_tiny_inputs_never_raise(size):
    data = TXN_SEGMENT.read_bytes()[:size]
    items = _walk(data)
    assert all(kind != "batch" for kind, _, _ in items)
    assert sum(item["size"] for _, item, _ in items) == size
