"""Packed records (records/packed.py): C's scan and to_json against their Python twins, and the
output of decode --json and --summary the same, packed or not.

The twins: the Python records loop (batch.decode_py) says which batches qualify, and
what they hold; render/jsonl.py's pure-Python `default` turns its dicts into the JSON text
to_json must write. Evidence: every v2 batch of every committed capture, mutations of real
record payloads, and hand-built edge cases (every byte value, invalid UTF-8 of each kind,
nulls, escapes across C's 64 KiB blocks, 64-bit bounds).
"""

from __future__ import annotations

import random

import orjson
import pytest

from kinspect import native
from kinspect.limits import DEFAULT_LIMITS, Budget
from kinspect.decode.finish import JSON, SUMMARY, finish_record
from kinspect.decode.pipeline import DecodeRun
from kinspect.records.checks import check_batch
from kinspect.records.packed import PackedRecords
from kinspect.records.packed import scan as packed_scan
from kinspect.records import regular
from kinspect.records.recordset import decode_records
from kinspect.records.regular import frame_py
from kinspect.render import jsonl
from kinspect.wire.topics import TopicNames
from tests.conftest import PCAPS, REALDATA, SAMPLES
from tests.unit.native import needs_c
from tests.unit.native.test_v2records import python_twin, real_payloads, record, varint

# the C twins: CI builds them (tests/unit/native/test_v2records.py fails when they are missing);
# KINSPECT_PURE_PYTHON=1 runs without them: nothing is packed, and the tests of C itself are skipped
# (their twins: the Python records loop and render/jsonl.py's default)
scan, to_json = (native.v2records.scan, native.v2records.to_json) if native.v2records is not None else (None, None)


def twin_scan(data, pos, end, base_offset, base_timestamp, fixed, limit):
    """What scan must say, from the Python loop: (count, largest timestamp) or None."""
    records, framed, after, problems = python_twin((data, pos, end, base_offset, base_timestamp,
                                                     fixed, limit + 1))
    if problems or after < end or framed > limit:
        return None
    if [r["offset"] - base_offset for r in records] != list(range(len(records))):
        return None
    numbers = [r["offset"] for r in records] + ([r["timestamp"] for r in records] if fixed is None else [])
    if any(not -2**63 <= n < 2**63 for n in numbers):  # C leaves those to Python's integers
        return None
    largest = max((r["timestamp"] for r in records), default=None) if fixed is None else None
    return len(records), largest


def twin_json(data, pos, end, base_offset, base_timestamp, fixed) -> bytes:
    records = python_twin((data, pos, end, base_offset, base_timestamp, fixed))[0]
    return orjson.dumps(records, default=jsonl._default)


def agree(data: bytes, base_offset: int = 0, base_timestamp: int = 0, fixed=None,
          limit: int = 1 << 30) -> bool:
    """scan and to_json against the twins; whether the records qualify."""
    args = (data, 0, len(data), base_offset, base_timestamp, fixed)
    expected = twin_scan(*args, limit)
    assert scan(*args, limit) == expected, data.hex()
    if expected is not None:
        assert to_json(*args) == twin_json(*args), data.hex()
    return expected is not None


def body(offset_delta=0, timestamp_delta=0, key=b"k", value=b"v", headers=()) -> bytes:
    def sized(raw):
        return varint(-1) if raw is None else varint(len(raw)) + raw
    return record(b"\x00" + varint(timestamp_delta) + varint(offset_delta) + sized(key) + sized(value)
                  + varint(len(headers)) + b"".join(sized(k) + sized(v) for k, v in headers))


INVALID_UTF8 = [b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc3", b"\xc3\x28", b"\xe0\x80\x80",
                b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xe2\x82", b"\xf0\x8f\xbf\xbf",
                b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\xf0\x9f\x98", b"ok\xfe"]
VALID_UTF8 = [b"", b"\xc2\x80", b"\xdf\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xee\x80\x80",
              b"\xef\xbf\xbd", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", "é ∑ 😀".encode()]


@needs_c
def test_every_byte_value_and_utf8_edge():
    every_byte = bytes(range(256))
    ascii_escapes = bytes(range(128)) * 3
    values = [every_byte, ascii_escapes, *INVALID_UTF8, *VALID_UTF8, None, b"a\"b\\c/d\x7f"]
    data = b"".join(body(n, n, key=v, value=v, headers=[(b"h", v)]) for n, v in enumerate(values))
    assert agree(data, 10, 1000)
    text = to_json(data, 0, len(data), 10, 1000, None)
    assert b'{"b64":' in text and b"\\u001f" in text and b"\\b" in text and b"null" in text
    for key in INVALID_UTF8:  # a header key that is not UTF-8: not packed (decode warns about it)
        assert not agree(body(headers=[(key, b"v")]))
    for key in VALID_UTF8:
        assert agree(body(headers=[(key, b"v"), (b"second", None)]))


@needs_c
def test_long_values_cross_the_escape_blocks():
    rng = random.Random(11)
    for size in (65535, 65536, 65537, 200_003):
        value = bytes(rng.choice(b'ab"\\\n\x01\xc3\xa9') for _ in range(size))
        assert agree(body(value=value, key=value[:70_000]))
    assert agree(body(value="é".encode() * 40_000))   # multi-byte characters across a block end


@needs_c
def test_specials_at_every_position_of_the_16_and_8_byte_scans():
    """C scans 16 bytes at a time (SSE2), then 8, then one: a byte that needs a look at each
    position of a value of each length, alone, next to another one, or before a UTF-8 sequence."""
    specials = [b'"', b"\\", b"\x00", b"\x1f", b"\x7f", b"\xc3\xa9", b"\xc3", b"\xe2\x82\xac", b"\xff"]
    values = []
    for size in range(0, 41):
        plain = bytes(97 + i % 26 for i in range(size))
        for at in range(size + 1):
            for special in specials:
                values.append(plain[:at] + special + plain[at:])
                values.append(plain[:at] + special + b'"' + plain[at:] + b"\n")
    for start in range(0, len(values), 64):
        group = values[start:start + 64]
        data = b"".join(body(n, n, key=v, value=v) for n, v in enumerate(group))
        agree(data)
        for v in group:  # each alone too: an invalid one must not hide the others
            agree(body(value=v))


@needs_c
def test_offsets_timestamps_and_limits():
    data = b"".join(body(n, -n * 7) for n in range(5))
    assert scan(data, 0, len(data), 100, 1000, None, 5) == (5, 1000)
    assert scan(data, 0, len(data), 100, 1000, None, 4) is None       # more than the limit
    assert scan(data, 0, len(data), 100, 1000, 42, 5) == (5, None)    # LogAppendTime
    assert b'"timestamp":42,' in to_json(data, 0, len(data), 100, 1000, 42)
    assert agree(data, -5, -10_000) and agree(data, 2**63 - 5, -2**63 + 28) and agree(data, 0, 0, -1)
    assert not agree(data, 2**63 - 4)                                  # an offset past 64 bits
    assert not agree(data, 0, -2**63 + 27)                             # a timestamp below them
    assert not agree(b"".join(body(n, 1) for n in range(5)), 0, 2**63 - 1)
    for deltas in ([1, 2], [0, 2], [0, 0], [1, 0]):  # not 0, 1, 2, ...: checks read them
        assert not agree(b"".join(body(d) for d in deltas))
    assert scan(b"", 0, 0, 0, 0, None, 5) == (0, None) and to_json(b"", 0, 0, 0, 0, None) == b"[]"
    assert to_json(data, 0, len(data), 2**64, 0, None) is None
    window = b"junk" + data + b"junk"
    assert to_json(window, 4, 4 + len(data), 7, 9, None) == to_json(data, 0, len(data), 7, 9, None)


@pytest.fixture(scope="module")
def payloads() -> list[tuple]:
    found = real_payloads()
    assert len(found) >= 20
    return found


@needs_c
def test_real_payloads_and_their_mutations(payloads):
    rng = random.Random(20261124)
    packed = unpacked = 0
    for data, base_offset, base_timestamp, fixed in payloads:
        assert agree(data, base_offset, base_timestamp, fixed)
        for at in rng.sample(range(len(data)), min(len(data), 120)):
            for byte in (0x00, 0x22, 0x5c, 0x80, 0xff, data[at] ^ 0x01):
                changed = data[:at] + bytes((byte,)) + data[at + 1:]
                if agree(changed, base_offset, base_timestamp, fixed):
                    packed += 1
                else:
                    unpacked += 1
        for cut in rng.sample(range(len(data)), min(len(data), 40)):
            agree(data[:cut], base_offset, base_timestamp, fixed)
    assert packed > 1000 and unpacked > 500


class Spy:
    """Stands in for native.v2records.scan: checks each call against the twins."""

    def __init__(self):
        self.packed = 0

    def __call__(self, data, start, stop, base_offset, base_timestamp, fixed, limit):
        got = scan(data, start, stop, base_offset, base_timestamp, fixed, limit)
        assert got == twin_scan(data, start, stop, base_offset, base_timestamp, fixed, limit)
        if got is not None:
            assert (to_json(data, start, stop, base_offset, base_timestamp, fixed)
                    == twin_json(data, start, stop, base_offset, base_timestamp, fixed))
            self.packed += 1
        return got


class FrameSpy(Spy):
    """Stands in for native.v2records.frame (records/regular.py): checks each call against
    frame_py, and each batch it scans against the scan twins."""

    def __call__(self, data, limit, max_batches):
        got = native.v2records.frame(data, limit, max_batches)
        assert got == frame_py(data, limit, max_batches)
        data = bytes(data)  # a view of bytes too: the scan twins read bytes
        for entry in got[0]:
            pos, length, attributes, packed = entry[0], entry[2], entry[5], entry[-1]
            if packed is not None:
                fixed = entry[8] if attributes & 0x08 else None
                assert super().__call__(data, pos + 61, pos + 12 + length, entry[1], entry[7],
                                        fixed, limit) == packed
        return got


CAPTURES = sorted(p.name for p in PCAPS.glob("*.pcap*"))


def outputs(path, mode: str, pack: bool) -> list:
    run = DecodeRun(path)
    topics, keep = TopicNames(), lambda exchange: True
    found = []
    for raw in run.raw_records():
        output, error = finish_record(raw, topics, keep, mode, Budget(DEFAULT_LIMITS, pack_records=pack))
        found.append((b"".join(output) if mode == JSON else output, error))
    return found


@pytest.mark.parametrize("name", CAPTURES)
def test_decode_json_and_summary_the_same_packed_or_not(monkeypatch, name):
    """Without the C module (KINSPECT_PURE_PYTHON=1) nothing is packed, and asking changes nothing."""
    spy, frame_spy = Spy(), FrameSpy()
    if native.v2records is not None:
        monkeypatch.setattr(native.v2records, "scan", spy, raising=False)
        monkeypatch.setattr(regular, "_scan", spy)
        monkeypatch.setattr(regular, "_frame", frame_spy)
    for mode in (JSON, SUMMARY):
        assert outputs(PCAPS / name, mode, True) == outputs(PCAPS / name, mode, False)
    if native.v2records is not None and "legacy" not in name and "groups-describe" not in name:
        # those two hold no v2 batches
        assert spy.packed + frame_spy.packed, "expected packed batches in this capture"


def test_realdata_captures_the_same_packed_or_not():
    captures = sorted(p for p in REALDATA.rglob("*.pcap*") if p.stat().st_size < 5 << 20)
    assert captures
    for path in captures:
        assert outputs(path, JSON, True) == outputs(path, JSON, False), path


@needs_c
def test_packed_records_read_as_the_dicts(payloads):
    for data, base_offset, base_timestamp, fixed in payloads:
        records = native.v2records.decode(data, 0, len(data), base_offset, base_timestamp, fixed)
        packed = PackedRecords(data, 0, len(data), base_offset, base_timestamp, fixed, len(records),
                               None)
        assert list(packed) == records and len(packed) == len(records) and bool(packed) == bool(records)
        assert packed[-1] == records[-1]
        assert orjson.loads(jsonl.dumpb({"records": packed})) == orjson.loads(
            jsonl.dumpb({"records": records}))
        assert jsonl.plain({"records": packed}) == jsonl.plain({"records": records})


@needs_c
def test_checks_find_the_same_packed_or_not():
    """lastOffsetDelta and maxTimestamp told from the scan's count and largest timestamp."""
    data = b"".join(body(n, 5 - n) for n in range(4))
    for last_offset_delta in (2, 3, 9):
        for max_timestamp in (1005, 1004, 1010):
            found = []
            for records in (native.v2records.decode(data, 0, len(data), 0, 1000, None),
                            PackedRecords(data, 0, len(data), 0, 1000, None, 4, 1005)):
                problems: list = []
                check_batch({"attributes": 0, "base_offset": 0, "position": 0, "records": records,
                             "timestamp_type": "CreateTime", "last_offset_delta": last_offset_delta,
                             "max_timestamp": max_timestamp, "producer_id": -1, "producer_epoch": -1,
                             "base_sequence": -1, "is_transactional": False, "is_control": False},
                            "b", problems)
                found.append([p.to_dict() for p in problems])
            assert found[0] == found[1]
            assert bool(found[0]) == (last_offset_delta != 3 or max_timestamp != 1005)


def test_a_batch_is_packed_only_when_asked_and_never_a_control_batch():
    segment = SAMPLES / "kafka-4.1.2/logs/transactions-0/00000000000000000000.log"  # commits, aborts
    kinds = {}
    for pack in (True, False):
        batches, _ = decode_records(segment.read_bytes(), partial_ok=False, checks=True,
                                    max_output=Budget(DEFAULT_LIMITS, pack_records=pack))
        kinds[pack] = [(b["is_control"], type(b["records"])) for b in batches]
    assert (True, list) in kinds[True] and {kind for _, kind in kinds[False]} == {list}
    if native.v2records is not None:
        assert (False, PackedRecords) in kinds[True]
    else:  # the Python twins never pack: the C scan says which batches may be
        assert kinds[True] == kinds[False]


@needs_c
def test_a_view_is_scanned_where_it_lies_as_its_bytes_are(payloads):
    """validate packs a mapped segment's batches where they lie: scan over a view of a larger
    buffer says what it says over the bytes, and the packed records read the same."""
    for data, base_offset, base_timestamp, fixed in payloads:
        around = memoryview(b"\x07" * 13 + data + b"\x09" * 5)
        start, stop = 13, 13 + len(data)
        assert scan(around, start, stop, base_offset, base_timestamp, fixed, 1 << 20) == scan(
            data, 0, len(data), base_offset, base_timestamp, fixed, 1 << 20)
        from_view = packed_scan(around, start, stop, base_offset, base_timestamp, fixed, 1 << 20)
        from_bytes = packed_scan(data, 0, len(data), base_offset, base_timestamp, fixed, 1 << 20)
        assert (from_view is None) == (from_bytes is None)
        if from_view is not None:
            assert from_view.to_json() == from_bytes.to_json()
            assert list(from_view) == list(from_bytes) and len(from_view) == len(from_bytes)
    with pytest.raises(TypeError):
        scan("not bytes", 0, 0, 0, 0, None, 1)


def test_a_mapped_segments_batches_decode_as_their_bytes_do(tmp_path):
    """decode_batch on a mapped file (a view: packed in place, copied only to be decoded to
    dicts) gives what it gives on the file's bytes, packed or not."""
    import mmap

    from kinspect.storage.segment import walk_segment
    segment = SAMPLES / "kafka-4.1.2" / "logs" / "__cluster_metadata-0" / "00000000000000000000.log"
    data = segment.read_bytes()

    def walked(buf, pack: bool) -> list:
        budget = Budget(DEFAULT_LIMITS, input_bytes=len(data), pack_records=pack)
        return [orjson.loads(jsonl.dumpb({"kind": kind, "item": item,
                                          "problems": [str(p) for p in problems]}))
                for kind, item, problems in walk_segment(buf, "s", checks=True, max_output=budget)]

    with open(segment, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        try:
            for pack in (True, False):
                assert walked(view, pack) == walked(data, pack) == walked(data, not pack)
        finally:
            view.release()
