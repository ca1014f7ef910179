"""The one-call record set (records/regular.py): C's frame against frame_py, and decode_regular
against the general walk (recordset.decode_records without it) on every record set of the
committed captures, on hand-built sets that take the fast path, and on sets that must fall
back (with the Budget left exactly as it was).

The equality asked for is the whole result: every batch dict key for key and in order (packed
records through their JSON and their dicts), every problem, and the Budget's state after.
"""

from __future__ import annotations

import random

import pytest

from kinspect import native
from kinspect.decode.pipeline import DecodeRun
from kinspect.limits import DEFAULT_LIMITS, Budget, Limits
from kinspect.records import recordset, regular
from kinspect.records.packed import PackedRecords
from kinspect.wire import decoder_runtime
from tests.conftest import PCAPS
from tests.unit.native import needs_c
from tests.unit.records.handmade import record, record_body, reseal, v2_batch, varint
from tests.unit.records.test_packed import FrameSpy

STATE = ("inflate_left", "records_left", "decode_left", "inflate_low", "decode_low")
CAPTURES = sorted(p.name for p in PCAPS.glob("*.pcap*"))


def shown(result) -> tuple:
    batches, problems = result
    units = []
    for unit in batches:
        items = []
        for key, value in unit.items():
            if type(value) is PackedRecords:
                value = ("packed", value.to_json(), value.records(), value.largest_timestamp)
            items.append((key, value))
        units.append(items)
    return units, [(p.what, p.path, p.offset, p.severity, p.check, p.expected, p.found)
                   for p in problems]


def budget_state(budget: Budget) -> tuple:
    return tuple(getattr(budget, name) for name in STATE)


def both(buf, path="records", base=0, checks=True, limits=DEFAULT_LIMITS, input_bytes=None,
         partial_ok=False, decode_left=None):
    """(fast result or None, general result, budget after each, budget after the fast path's
    fallback) for one record set."""
    size = len(buf) if input_bytes is None else input_bytes
    fast_budget = fresh_budget(limits, size, decode_left)
    fast = regular.decode_regular(buf, path, base, partial_ok, checks, fast_budget)
    general_budget = fresh_budget(limits, size, decode_left)
    saved = recordset.decode_regular
    recordset.decode_regular = lambda *args: None
    try:
        general = recordset.decode_records(buf, path, base, partial_ok=partial_ok, checks=checks,
                                           max_output=general_budget)
    finally:
        recordset.decode_regular = saved
    return fast, general, fast_budget, general_budget


def fresh_budget(limits, size, decode_left) -> Budget:
    budget = Budget(limits, input_bytes=size, pack_records=True)
    if decode_left is not None:  # records this unit may still decode (what earlier sets left)
        budget.decode_left = budget.decode_low = decode_left
    return budget


def agree(buf, **kwargs) -> bool:
    """True when the fast path took the set; either way its result is the general walk's."""
    fast, general, fast_budget, general_budget = both(buf, **kwargs)
    if fast is None:
        fresh = fresh_budget(kwargs.get("limits", DEFAULT_LIMITS),
                             kwargs.get("input_bytes") or len(buf), kwargs.get("decode_left"))
        assert budget_state(fast_budget) == budget_state(fresh), "fallback left the budget changed"
        return False
    assert shown(fast) == shown(general)
    assert budget_state(fast_budget) == budget_state(general_budget)
    return True


def capture_sets(name: str) -> list[tuple]:
    """Every record set the body decoders of a capture hand to decode_records."""
    sets = []
    original = decoder_runtime.decode_records

    def spy(buf, path="records", base=0, **kwargs):
        sets.append((bytes(buf), path, base, kwargs.get("partial_ok", True)))
        return original(buf, path, base, **kwargs)

    decoder_runtime.decode_records = spy
    try:
        for _ in DecodeRun(PCAPS / name).records():
            pass
    finally:
        decoder_runtime.decode_records = original
    return sets


@needs_c
@pytest.mark.parametrize("name", CAPTURES)
def test_every_record_set_of_every_capture(monkeypatch, name):
    spy = FrameSpy()  # and frame against frame_py on every set
    monkeypatch.setattr(regular, "_frame", spy)
    taken = 0
    for data, path, base, partial_ok in capture_sets(name):
        for buf in (data, memoryview(data)):
            taken += agree(buf, path=path, base=base, partial_ok=partial_ok)
    if "legacy" not in name and "groups-describe" not in name:  # those hold no v2 batches
        assert taken, "expected record sets of regular v2 batches"


def batch_of(count: int = 3, **kwargs) -> bytes:
    """A regular batch that passes every check unless ``kwargs`` break one."""
    kwargs.setdefault("max_timestamp", 1_700_000_000_000 + 7 * max(count - 1, 0))
    return v2_batch(b"".join(record(record_body(offset_delta=i, timestamp_delta=i * 7))
                             for i in range(count)), count, **kwargs)


@needs_c
def test_regular_sets_are_taken_and_agree():
    gzip_records = b"".join(record(record_body(offset_delta=i)) for i in range(4))
    import gzip
    zipped = v2_batch(gzip.compress(gzip_records), 4, attributes=1)
    cases = [
        b"",
        batch_of(),
        batch_of(attributes=0x10, producer_id=3, producer_epoch=1, base_sequence=0),
        batch_of(last_offset_delta=1),  # below the last delta: an error
        batch_of(base_offset=100) + batch_of(base_offset=103) + batch_of(base_offset=110),
        batch_of(base_offset=5) + batch_of(base_offset=2),  # offsets going back: a warning
        batch_of(attributes=0x08, max_timestamp=1_800_000_000_000),  # LogAppendTime
        batch_of(attributes=0x08, max_timestamp=-1),  # LogAppendTime without a time: an error
        batch_of(max_timestamp=5),  # not the largest timestamp: an error
        batch_of(last_offset_delta=7),  # past the last delta: compaction's note
        batch_of(attributes=0x10, producer_id=-1),  # transactional without a producer
        batch_of(producer_id=7, producer_epoch=0, base_sequence=-1),
        batch_of(attributes=0x0180),  # reserved bits
        batch_of(0),
        zipped,
    ]
    for buf in cases:
        assert agree(buf, base=1000), buf[:70]
    good = batch_of()
    for tail in (good[:30], good[:8], b"\x00" * 8):  # cut off
        for partial_ok in (True, False):  # a Fetch response's, a Produce request's
            assert agree(good + tail, base=1000, partial_ok=partial_ok)
            assert agree(tail, base=1000, partial_ok=partial_ok)
        assert agree(good[:-1], base=1000, partial_ok=False)  # a length one byte past the end


@needs_c
def test_irregular_sets_fall_back_with_the_budget_untouched():
    good = batch_of()
    control = reseal(v2_batch(record(record_body(key=b"\x00\x00\x00\x01", value=b"\x00\x00" * 3)), 1,
                              attributes=0x30, producer_id=1, producer_epoch=0))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    bad_key = v2_batch(record(record_body(headers=varint(1) + varint(1) + b"\xff" + varint(-1))), 1)
    gapped = v2_batch(record(record_body(offset_delta=0)) + record(record_body(offset_delta=2)), 2,
                      last_offset_delta=2)
    cases = [
        good + b"\x00" * 40,  # zero padding
        good[:12] + b"\x00" * 4 + b"\x01" + good[17:],  # magic 1
        good + bytes(bad_crc),
        good + control,
        good + bad_key,
        good + gapped,
        v2_batch(record(record_body()), 5),  # records_count says 5, holds 1
        v2_batch(b"\x01\x02\x03", 1, attributes=1),  # gzip that is not gzip
        v2_batch(b"\x00" * 8, 1, attributes=6),  # an unknown codec
    ]
    for buf in cases:
        assert not agree(buf, base=64), buf[:70]


@needs_c
def test_budget_limits_send_the_set_to_the_general_walk():
    sets = batch_of(50) + batch_of(50, base_offset=50)
    few_records = Limits(eager_records=60)  # the second batch passes what may be held
    assert not agree(sets, limits=few_records)
    assert not agree(sets, decode_left=70)  # the second batch's records are cut
    assert not agree(sets, decode_left=49)  # the first's
    assert agree(sets, limits=Limits(eager_records=100_000))
    many = b"".join(batch_of(1, base_offset=i) for i in range(50))
    assert not agree(many, limits=Limits(eager_records=40))  # 10 batches held at most: streamed
    assert agree(many, limits=Limits(eager_records=400))  # 50 batches of 1 record: 250 held


@needs_c
def test_frame_holds_no_more_batches_than_asked():
    """A set of a million tiny batches never becomes a million tuples: frame stops at
    max_batches (decode_regular asks for the batches the Budget lets be held)."""
    many = batch_of(0) * 200_000  # 12.2 MB of empty batches
    got, stop = native.v2records.frame(many, 10, 25_000)
    assert len(got) == 25_000 and stop == 25_000 * len(batch_of(0))
    assert regular.frame_py(many[:stop + 500], 10, 25_000)[1] == stop
    budget = Budget(DEFAULT_LIMITS, input_bytes=len(many), pack_records=True)
    assert regular.decode_regular(many, "records", 0, True, True, budget) is None
    assert budget_state(budget) == budget_state(
        Budget(DEFAULT_LIMITS, input_bytes=len(many), pack_records=True))


@needs_c
def test_frame_against_its_twin_on_hostile_sets():
    rng = random.Random(36)
    base = batch_of(5) + batch_of(4, base_offset=5, attributes=0x08)
    for _ in range(3000):
        data = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            data[at] = rng.randrange(256)
        if rng.random() < 0.5:  # often keep the CRCs right, so the records are scanned
            first = len(batch_of(5))
            data = bytearray(reseal(data[:first]) + (reseal(data[first:]) if data[first + 16] == 2
                                                     else data[first:]))
        data = bytes(data[:rng.randrange(len(data) + 1)] if rng.random() < 0.2 else data)
        limit = rng.choice((0, 1, 4, 5, 10**6))
        most = rng.choice((0, 1, 2, 10))
        assert native.v2records.frame(data, limit, most) == regular.frame_py(data, limit, most)
    huge = bytearray(batch_of(1))
    huge[57:61] = (2**31 - 1).to_bytes(4, "big")  # a count of 2^31 - 1 for one record
    assert regular.frame_py(reseal(huge), 10, 5) == native.v2records.frame(reseal(huge), 10, 5)
    assert not agree(reseal(huge))
    lying = bytearray(batch_of(1))
    lying[8:12] = (2**31 - 1).to_bytes(4, "big")
    assert native.v2records.frame(bytes(lying), 10, 5) == regular.frame_py(bytes(lying), 10, 5) == ([], 0)
    assert agree(bytes(lying))  # a cut-off batch: its problem, as the general walk gives it


def test_frame_py_without_c():
    """The twin alone (KINSPECT_PURE_PYTHON=1 runs it too): what it gives on a known set."""
    data = batch_of(3, base_offset=40) + batch_of(2, base_offset=43, attributes=0x08,
                                                  max_timestamp=9)
    got, stop = regular.frame_py(data, 100, 10)
    assert [entry[0] for entry in got] == [0, len(batch_of(3))] and stop == len(data)
    assert got[0][1] == 40 and got[0][-1] == (3, 1_700_000_000_000 + 14)
    assert got[1][-1] == (2, None)
    assert regular.frame_py(data, 2, 10)[0][0][-1] is None  # more records than the limit
    assert regular.frame_py(data[:-1], 100, 10) == (got[:1], len(batch_of(3)))
    assert regular.frame_py(data, 100, 1) == (got[:1], len(batch_of(3)))  # batches held at most
