"""--max-records-per-byte: a unit decodes at most RECORDS_FLOOR + N records per input byte;
past it the rest of a batch (or legacy wrapper) is cut, and the problem says so and how to
raise the bound."""

from __future__ import annotations

import gzip

import pytest

from kinspect import limits
from kinspect.limits import Budget, Limits
from kinspect.records.recordset import decode_records
from kinspect.records.stream import RecordStream
from kinspect.render.jsonl import dumpb
from tests.unit.records.handmade import legacy_message
from tests.unit.records.test_stream import batch, record


@pytest.fixture
def floor_of_10(monkeypatch):
    monkeypatch.setattr(limits, "RECORDS_FLOOR", 10)


def _cut(problems) -> list:
    return [p for p in problems if p.check == "records_cut"]


def test_records_past_the_floor_and_rate_are_cut_and_said_so(floor_of_10):
    data = batch([record(i) for i in range(100)])
    budget = Budget(Limits(max_records_per_byte=1), input_bytes=25)  # 10 + 25 records
    [decoded], problems = decode_records(data, max_output=budget)
    assert [r["offset"] for r in decoded["records"]] == list(range(35))
    [cut] = _cut(problems)
    assert "records past the first 35" in cut.what and "--max-records-per-byte" in cut.what
    assert not [p for p in problems if p.check == "records_count"]  # the rest was not counted
    assert budget.decode_allowed() == 0


def test_a_cut_batch_that_streams_holds_what_was_decoded(floor_of_10):
    data = batch([record(i) for i in range(100)])
    budget = Budget(Limits(max_records_per_byte=1, eager_records=5), input_bytes=50)
    [decoded], problems = decode_records(data, max_output=budget)
    records = decoded["records"]
    assert isinstance(records, RecordStream) and len(records) == 60
    assert [r["offset"] for r in records] == list(range(60))
    assert len(_cut(problems)) == 1
    held, _ = decode_records(batch([record(i) for i in range(60)]),
                             max_output=Budget(Limits(), input_bytes=1000))
    assert dumpb(list(records)) == dumpb(held[0]["records"])


def test_the_budget_spans_batches_and_more_input_earns_more(floor_of_10):
    data = b"".join(batch([record(0), record(1), record(2)], base_offset=3 * i) for i in range(6))
    budget = Budget(Limits(max_records_per_byte=1))
    decoded, problems = decode_records(data, max_output=budget)
    assert [len(b["records"]) for b in decoded] == [3, 3, 3, 1, 0, 0]
    assert len(_cut(problems)) == 3
    budget.grant(4)
    decoded, problems = decode_records(data, max_output=budget)
    assert [len(b["records"]) for b in decoded] == [3, 1, 0, 0, 0, 0]


def test_a_legacy_wrapper_is_cut_at_the_rate_too(floor_of_10):
    inner = b"".join(legacy_message(i, 1, 0, None, b"v") for i in range(40))
    data = legacy_message(39, 1, 1, None, gzip.compress(inner))
    [decoded], problems = decode_records(data, max_output=Budget(Limits(max_records_per_byte=1)))
    assert len(decoded["records"]) == 10
    [cut] = _cut(problems)
    assert "records past the first 10" in cut.what


def test_the_default_lets_honest_data_through():
    """The densest honest batches hold about one record per compressed byte."""
    data = batch([record(i) for i in range(5000)])
    [decoded], problems = decode_records(data, max_output=Budget(Limits(), input_bytes=len(data)))
    assert len(decoded["records"]) == 5000 and not _cut(problems)
