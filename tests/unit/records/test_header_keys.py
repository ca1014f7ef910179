"""Header keys that are not UTF-8: the C record loop decodes them (errors="replace") and says
where they were, so the batch stays on the fast path; the warnings are those of the Python loop,
to the byte: text, path, offset, severity, check, order, and the count of the ones cut."""

from __future__ import annotations

import zlib

import pytest
import zstandard

from kinspect import native
from kinspect.limits import Budget, Limits
from kinspect.records import batch
from kinspect.records.recordset import decode_records
from kinspect.render.jsonl import dumpb
from tests.unit.records.handmade import record, record_body, v2_batch, varint
from tests.unit.native import needs_c

GZIP, ZSTD = 1, 4
BAD = b"\xff\xfe"  # not UTF-8
REPLACED = b"\xef\xbf\xbd"  # U+FFFD written as UTF-8: valid, and what a bad byte decodes to


def header(key: bytes, value: bytes | None = b"v") -> bytes:
    return varint(len(key)) + key + (varint(-1) if value is None else varint(len(value)) + value)


def headers(*keys: bytes) -> bytes:
    return varint(len(keys)) + b"".join(header(k) for k in keys)


# one record of each kind, by name
KINDS = {
    "plain": varint(0),
    "good": headers(b"trace", "é".encode(), "日本".encode()),
    "replacement-char": headers(REPLACED, b"x" + REPLACED + b"y"),
    "bad-0": headers(BAD, b"ok"),
    "bad-2": headers(b"a", b"b", b"\x80" + REPLACED),
    "bad-0-and-2": headers(b"\xc3\x28", b"ok", b"\xed\xa0\x80"),  # truncated, then a surrogate
    "overlong": headers(b"\xc0\xaf"),
}
# a record that does not decode: its header value overruns the record
BROKEN = varint(2) + header(BAD) + varint(1) + b"k" + varint(9) + b"v"


def records(kinds: list[str]) -> tuple[bytes, int]:
    body = b"".join(record(record_body(offset_delta=i, headers=KINDS.get(kind, BROKEN)))
                    for i, kind in enumerate(kinds))
    return body, len(kinds)


def compress(codec: int, data: bytes) -> bytes:
    if codec == GZIP:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        return packer.compress(data) + packer.flush()
    return zstandard.ZstdCompressor().compress(data)


def make_batch(kinds: list[str], codec: int = 0, base_offset: int = 0) -> bytes:
    data, count = records(kinds)
    return v2_batch(data if codec == 0 else compress(codec, data), count,
                    base_offset=base_offset, attributes=codec)


MIXED = ["plain", "bad-0", "good", "bad-2", "replacement-char", "bad-0-and-2", "overlong", "plain"]
MANY = ["bad-0", "good", "bad-2"] * 9 + ["bad-0-and-2"] * 4  # past the 10 shown per check


def decode_both_ways(buf, limits: Limits | None, checks: bool) -> list[tuple]:
    """decode_records with the C record loop and with the Python one: (units as JSON, with
    streamed records read back; problems as dicts)."""
    out = []
    for fast in (batch._fast, None):
        saved, batch._fast = batch._fast, fast
        try:
            budget = Budget(limits, len(buf)) if limits is not None else Budget(Limits(), len(buf))
            units, problems = decode_records(buf, "seg", 1000, partial_ok=False, checks=checks,
                                             max_output=budget)
            units = [dict(u, records=list(u["records"])) for u in units]
            out.append((dumpb(units), [p.to_dict() for p in problems]))
        finally:
            batch._fast = saved
    return out


SETS = {
    "mixed": make_batch(MIXED),
    "mixed-gzip": make_batch(MIXED, GZIP),
    "mixed-zstd": make_batch(MIXED, ZSTD),
    "many": make_batch(MANY),
    "many-zstd": make_batch(MANY, ZSTD),
    "batches": (make_batch(MIXED) + make_batch(MANY, GZIP, 8) + make_batch(["good"], 0, 39)
                + make_batch(MANY, 0, 40)),
    "with-a-broken-record": make_batch(["bad-0", "broken", "bad-2", "good"]),
    "broken-among-many": make_batch(MANY + ["broken"] + MANY, ZSTD),
}
LIMITS = {"default": None, "eager-2": Limits(eager_records=2), "eager-7": Limits(eager_records=7),
          "eager-1": Limits(eager_records=1)}


@pytest.mark.parametrize("checks", [False, True], ids=["dump", "validate"])
@pytest.mark.parametrize("limits", LIMITS)
@pytest.mark.parametrize("name", SETS)
def test_the_c_loop_gives_the_python_loops_records_and_problems(name, limits, checks):
    data = SETS[name]
    for buf in (data, memoryview(bytearray(data))):  # bytes, and a buffer copied batch by batch
        (c_units, c_problems), (py_units, py_problems) = decode_both_ways(buf, LIMITS[limits], checks)
        assert c_units == py_units
        assert c_problems == py_problems
    warnings = [p for p in py_problems if p["severity"] == "warning" and p["check"] == "headers"]
    assert warnings, "expected header-key warnings"


def test_the_warnings_name_the_record_and_header():
    (unit,), problems = decode_records(make_batch(MIXED), "seg", 1000)
    at, where = [], 1000 + 61  # each record's length varint, where its problems point
    for i, kind in enumerate(MIXED):
        at.append(where)
        where += len(record(record_body(offset_delta=i, headers=KINDS[kind])))
    assert [(p.what, p.path, p.offset, p.severity, p.check) for p in problems] == [
        (f"header[{number}] key is not valid UTF-8", f"seg → batch[0] → records[{index}]", at[index],
         "warning", "headers") for index, number in ((1, 0), (3, 2), (5, 0), (5, 2), (6, 0))]
    keys = [[h["key"] for h in r["headers"]] for r in unit["records"]]
    assert keys[1] == ["\ufffd\ufffd", "ok"] and keys[4] == ["\ufffd", "x\ufffdy"]
    assert keys[5] == ["\ufffd(", "ok", "\ufffd\ufffd\ufffd"] and keys[6] == ["\ufffd\ufffd"]


def test_past_the_ones_shown_the_warnings_are_counted():
    (_,), problems = decode_records(make_batch(MANY, ZSTD), "seg", 0)
    shown = [p for p in problems if p.severity == "warning"]
    assert len(shown) == 11 and shown[-1].what.startswith("16 more headers problems")
    assert "(26 in all; the first 10 are shown)" in shown[-1].what


@needs_c
def test_a_batch_of_bad_keys_takes_the_fast_path(monkeypatch):
    def python_loop(*args, **kwargs):
        raise AssertionError("the Python record loop ran")

    monkeypatch.setattr(batch, "decode_py", python_loop)
    for data in (make_batch(MANY), make_batch(MANY, ZSTD)):
        for limits in (Limits(), Limits(eager_records=3)):
            units, problems = decode_records(data, max_output=Budget(limits, len(data)))
            assert len(list(units[0]["records"])) == len(MANY) and len(problems) == 11


@needs_c
def test_without_a_list_a_bad_key_is_still_irregular():
    data, _ = records(["good", "bad-2"])
    assert native.v2records.decode(data, 0, len(data), 0, 0, None) is None
    assert native.v2records.decode(data, 0, len(data), 0, 0, None, 5) is None
    found: list = []
    got, after, bad = native.v2records.decode(data, 0, len(data), 0, 0, None, 5, found, 0)
    assert (len(got), after, bad, found) == (2, len(data), 1, [])
    with pytest.raises(TypeError):
        native.v2records.decode(data, 0, len(data), 0, 0, None, 5, (), 0)


@needs_c
def test_the_c_loop_leaks_nothing():
    import tracemalloc

    data, _ = records(MANY * 4)

    def run():
        for keep in (0, 3, 1000):
            found: list = []
            native.v2records.decode(data, 0, len(data), 0, 0, None, 1000, found, keep)
        broken, _ = records(MANY + ["broken"])
        native.v2records.decode(broken, 0, len(broken), 0, 0, None, 1000, [], 5)

    run()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(300):
            run()
        grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes more after 300 runs"
