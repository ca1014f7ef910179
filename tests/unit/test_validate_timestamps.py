"""validate's max-timestamp rule: a CreateTime batch's maxTimestamp must be the largest of its
records' timestamps (issue 30, thin guards: one test only, whose records' timestamps rise, so
that "the last record's" and "the largest" could not be told apart).

The batches are written by kafka-python's own batch builder, with the largest timestamp on a
record in the middle, and by a real broker (samples/), then their maxTimestamp is edited and the
CRC made right again. The rule is checked where each record path computes the largest: records
held (validate), records kept packed by the C scan (decode --json), and a batch too big to hold,
checked chunk by chunk.
"""

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kinspect.limits import Budget, Limits
from kinspect.records import decode_records
from kinspect.records.packed import PackedRecords
from kinspect.records.stream import RecordStream
from kinspect.validate import validate_bytes, validate_file
from tests.conftest import SAMPLES
from tests.unit.records.handmade import reseal
from tests.unit.native import needs_c

T0 = 1_700_000_000_000
MAX_TIMESTAMP_AT = 35  # the field's offset in a v2 batch
STEPS = [5, 9_000, 2, 700, 1]  # the largest, T0 + 9000, is the second of five


def _batch(steps=STEPS) -> bytes:
    """A CreateTime batch as kafka-python writes it: offset deltas 0.., timestamps T0 + steps."""
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i, step in enumerate(steps):
        builder.append(i, T0 + step, f"k{i}".encode(), b"v" * (i % 4), [])
    return bytes(builder.build())


def _with_max(batch: bytes, max_timestamp: int) -> bytes:
    return reseal(batch[:MAX_TIMESTAMP_AT] + struct.pack(">q", max_timestamp) + batch[MAX_TIMESTAMP_AT + 8:])


def _validated(path):
    """validate_file's findings and its report (it yields the findings, then the report)."""
    *findings, report = validate_file(path)
    return report, findings


def _max_timestamp_findings(data: bytes):
    report, findings = validate_bytes(data, "batch.log", kind="records")
    return [(f.check, f.severity, f.position, f.expected, f.found) for f in findings]


def test_the_writer_sets_the_largest_timestamp_and_validate_agrees():
    batch = _batch()
    assert struct.unpack_from(">q", batch, MAX_TIMESTAMP_AT)[0] == T0 + 9_000  # kafka-python's own
    assert _max_timestamp_findings(batch) == []


@pytest.mark.parametrize("edited", [T0 + 1, T0 + 5, T0 + 8_999, T0 + 9_001, -1])
def test_any_other_max_timestamp_is_an_error_at_its_field(edited):
    """The last record's, the first's, just below and just above the largest, none at all."""
    assert _max_timestamp_findings(_with_max(_batch(), edited)) == [
        ("max_timestamp", "error", MAX_TIMESTAMP_AT, T0 + 9_000, edited)]


def _checks(data: bytes, budget: Budget):
    batches, problems = decode_records(data, checks=True, partial_ok=False, max_output=budget)
    return list(batches), [(p.check, p.expected, p.found) for p in problems]


@needs_c
def test_records_kept_packed_give_the_largest_too():
    budget = Budget(Limits(), input_bytes=1 << 20, pack_records=True)
    [held], problems = _checks(_batch(), budget)
    assert type(held["records"]) is PackedRecords and problems == []
    [held], problems = _checks(_with_max(_batch(), T0 + 1), Budget(Limits(), 1 << 20, pack_records=True))
    assert type(held["records"]) is PackedRecords
    assert problems == [("max_timestamp", T0 + 9_000, T0 + 1)]


def test_a_batch_checked_chunk_by_chunk_finds_the_largest_in_an_early_chunk():
    steps = [10] * 40 + [9_000] + [20] * 5_000  # the largest in the first of two chunks (4,096 each)
    budget = Budget(Limits(eager_records=50), input_bytes=1 << 20)
    [streamed], problems = _checks(_batch(steps), budget)
    assert type(streamed["records"]) is RecordStream and problems == []
    budget = Budget(Limits(eager_records=50), input_bytes=1 << 20)
    [streamed], problems = _checks(_with_max(_batch(steps), T0 + 20), budget)
    assert type(streamed["records"]) is RecordStream
    assert problems == [("max_timestamp", T0 + 9_000, T0 + 20)]


def test_a_real_brokers_segment_with_one_max_timestamp_edited(tmp_path):
    source = SAMPLES / "kafka-4.1.2" / "logs" / "codec-none-0" / "00000000000000000000.log"
    data = bytearray(source.read_bytes())
    report, findings = _validated(source)
    assert findings == [] and report.batches == 3
    (length,) = struct.unpack_from(">i", data, 8)
    second = 12 + length  # the second batch
    first_timestamp = struct.unpack_from(">q", data, second + 27)[0]
    largest = struct.unpack_from(">q", data, second + MAX_TIMESTAMP_AT)[0]
    assert largest > first_timestamp
    edited = _with_max(bytes(data[second:second + 12 + struct.unpack_from(">i", data, second + 8)[0]]),
                       first_timestamp)
    data[second:second + len(edited)] = edited
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    report, findings = _validated(path)
    assert [(f.check, f.position, f.batch, f.expected, f.found) for f in findings] == [
        ("max_timestamp", second + MAX_TIMESTAMP_AT, 1, largest, first_timestamp)]
