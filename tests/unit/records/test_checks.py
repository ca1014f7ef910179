import gzip
import random
import struct

import pytest
import zstandard

from kinspect.problems import ProblemCap
from kinspect.records import decode_records
from kinspect.records.checks import _offset_delta_order
from tests.conftest import SAMPLES
from tests.unit.records.conftest import (KAFKA_RUST, KAFKAJS_FETCH, java_fixture, kafka_rust_fetch,
                                         kafkajs_fetch)
from tests.unit.records.handmade import legacy_message, record, record_body, reseal, v2_batch

T0 = 1_700_000_000_000


def _checked(data: bytes, base: int = 0) -> list[tuple]:
    _, problems = decode_records(data, base=base, checks=True, partial_ok=False)
    return [(p.check, p.severity, p.offset) for p in problems]


def _edit(name: str, offset: int, fmt: str, value) -> bytes:
    data = bytearray(java_fixture(name))
    struct.pack_into(fmt, data, offset, value)
    return reseal(data)


def test_pristine_fixtures_pass_every_check():
    consecutive = java_fixture("2_none_create") + _edit("2_gzip_create", 0, ">q", 107)
    assert _checked(consecutive) == []


def test_checks_are_off_by_default():
    data = _edit("2_none_create", 21, ">h", 0x0100)
    assert decode_records(data)[1] == []
    assert _checked(data, base=3) == [("reserved_attributes", "warning", 3 + 21)]


def test_max_timestamp_must_be_the_largest_record_timestamp():
    data = _edit("2_none_create", 35, ">q", T0 + 1)
    _, [problem] = decode_records(data, checks=True)
    assert (problem.check, problem.severity, problem.offset) == ("max_timestamp", "error", 35)
    assert (problem.expected, problem.found) == (T0 + 5000, T0 + 1)


def test_log_append_time_needs_a_time():
    data = _edit("2_lz4_logappend", 35, ">q", -1)
    assert _checked(data) == [("log_append_time", "error", 35)]


def _deltas(*deltas: int, last: int | None = None) -> bytes:
    records = b"".join(record(record_body(offset_delta=d)) for d in deltas)
    return v2_batch(records, len(deltas), last_offset_delta=last if last is not None else deltas[-1])


def test_offset_deltas_must_increase():
    assert ("offset_delta_order", "error", 61) in _checked(_deltas(0, 2, 1, last=2))


def test_offset_gaps_are_information_as_after_compaction():
    assert _checked(_deltas(0, 3, 4)) == [("offset_delta_order", "info", 61)]


def test_last_offset_delta():
    assert _checked(_deltas(0, 1, last=0)) == [("last_offset_delta", "error", 23)]
    assert _checked(_deltas(0, 1, last=5)) == [("last_offset_delta", "info", 23)]


def test_transactional_batch_needs_a_producer():
    batch = v2_batch(record(record_body()), 1, attributes=0x10)
    assert _checked(batch) == [("producer_fields", "error", 43)]


def test_idempotent_batch_needs_a_sequence():
    batch = v2_batch(record(record_body()), 1, producer_id=5, producer_epoch=0)
    assert _checked(batch) == [("producer_fields", "warning", 43)]


def test_control_batch_with_several_records():
    data = bytearray(java_fixture("2_none_create"))
    data[22] |= 0x20
    checks = {c[0] for c in _checked(reseal(data))}
    assert checks == {"control_record"}


def test_commit_marker_without_the_transactional_bit():
    data = bytearray(java_fixture("2_control_commit"))
    data[22] &= ~0x10 & 0xFF
    assert _checked(reseal(data)) == [("control_record", "error", 21)]


def test_offsets_between_batches():
    first = java_fixture("2_none_create")  # offsets 100..106
    overlapping = _edit("2_gzip_create", 0, ">q", 103)
    assert _checked(first + overlapping) == [("offset_order", "warning", len(first))]
    gap = _edit("2_gzip_create", 0, ">q", 110)
    assert _checked(first + gap) == [("offset_gap", "info", len(first))]


def test_legacy_zstd_is_refused():
    inner = legacy_message(0, 1, 0, b"k", b"v")
    wrapper = legacy_message(0, 1, 4, None, zstandard.ZstdCompressor().compress(inner))
    (message,), problems = decode_records(wrapper, checks=True)
    assert [(p.check, p.offset) for p in problems] == [("zstd_legacy", 17)]
    assert message["records"][0]["value"] == b"v"


def test_magic_0_has_no_timestamp_type():
    data = legacy_message(0, 0, 0x08, b"k", b"v")
    assert _checked(data) == [("legacy_timestamp", "error", 17)]


@pytest.mark.parametrize("attributes, timestamp, severity", [(0x08, -1, "error"),
                                                             (0x00, -5, "warning")])
def test_magic_1_timestamps(attributes, timestamp, severity):
    data = legacy_message(0, 1, attributes, b"k", b"v", timestamp=timestamp)
    assert _checked(data) == [("legacy_timestamp", severity, 18)]


def _wrapper(*inner: bytes, magic: int = 1, offset: int = 1) -> bytes:
    return legacy_message(offset, magic, 1, None, gzip.compress(b"".join(inner)))


def test_inner_magic_must_equal_the_wrapper_magic():
    wrapper = _wrapper(legacy_message(0, 0, 0, b"a", b"1"), legacy_message(1, 1, 0, b"b", b"2"))
    assert _checked(wrapper) == [("wrapper_magic", "error", 0)]


@pytest.mark.parametrize("offsets, severity", [((0, 2), "warning"), ((1, 0), "error")])
def test_magic_1_inner_offsets_are_relative(offsets, severity):
    wrapper = _wrapper(*(legacy_message(o, 1, 0, b"k", b"v") for o in offsets))
    assert _checked(wrapper) == [("wrapper_inner_offsets", severity, 0)]


def test_magic_0_wrapper_carries_its_last_inner_offset():
    inner = [legacy_message(o, 0, 0, b"k", b"v") for o in (5, 6)]
    assert _checked(_wrapper(*inner, magic=0, offset=6)) == []
    assert _checked(_wrapper(*inner, magic=0, offset=0)) == [
        ("wrapper_inner_offsets", "info", 0)]


def test_empty_compressed_wrapper():
    assert _checked(_wrapper()) == [("wrapper_inner_offsets", "warning", 0)]


def test_kafkajs_fixture_with_nonstandard_producer_fields_is_not_flagged():
    # kafkajs writes producer epoch 0 / base sequence 0 with no producer id; Kafka's own group
    # coordinator writes base sequence 0: neither is a problem
    (_, _, at, records), = kafkajs_fetch("v4_response_gzip")
    batches, problems = decode_records(records, base=at, checks=True)
    assert problems == [] and batches[0]["producer_epoch"] == 0


def _real_record_sets():
    # every segment brokers wrote in samples/: topics, internal topics, magic 0/1, compaction
    for path in sorted(SAMPLES.glob("*/logs/*/*.log")):
        yield str(path.relative_to(SAMPLES)), path.read_bytes()
    for name in sorted(p.name for p in KAFKA_RUST.glob("*.kafka.0*") if "invalid" not in p.name):
        for _, _, _, records in kafka_rust_fetch(name):
            yield name, records
    for path in sorted(KAFKAJS_FETCH.glob("v*_response*.json")):
        for topic, partition, _, records in kafkajs_fetch(path.stem):
            yield f"{path.stem} {topic}[{partition}]", records


def test_every_pristine_real_record_set_passes_every_check():
    seen = 0
    for name, records in _real_record_sets():
        _, problems = decode_records(records, name, checks=True)
        # a Fetch body may end in a partial batch; compaction removed records (samples' compacted-0)
        allowed = {"partial_trailing"} | ({"offset_delta_order"} if "/compacted-0/" in name else set())
        assert [p for p in problems if p.check not in allowed] == [], name
        assert all(p.severity == "info" for p in problems)
        seen += 1
    assert seen > 80


def _offset_order_one_by_one(deltas: list[int]) -> tuple[list[tuple], int, int]:
    """The rule as written: a delta must pass the highest before it; passing it by more than
    1 is a gap."""
    shown, previous, gaps = [], -1, 0
    for index, delta in enumerate(deltas):
        if delta <= previous:
            shown.append((f"records[{index}]", f"> {previous}", delta))
        elif delta != previous + 1:
            gaps += 1
        previous = max(previous, delta)
    return shown, gaps, previous


@pytest.mark.parametrize("seed", range(40))
def test_offset_delta_order_over_lists_matches_the_rule_one_by_one(seed):
    rng = random.Random(seed)
    deltas = [rng.choice((i, i, i + 2, rng.randrange(-2, 40))) for i in range(rng.randrange(1, 300))]
    problems: list = []
    cap = ProblemCap(problems, keep=rng.choice((3, 10, 1000)))
    previous, gaps, index = -1, 0, 0
    for cut in range(0, len(deltas), 17):  # chunk by chunk, as a streamed batch is read
        chunk = [100 + d for d in deltas[cut:cut + 17]]
        previous, gaps = _offset_delta_order(chunk, 100, "b", 0, cap, index, previous, gaps)
        index += len(chunk)
    expected, expected_gaps, expected_previous = _offset_order_one_by_one(deltas)
    assert (previous, gaps) == (expected_previous, expected_gaps)
    assert [(p.path.split(" → ")[-1], p.expected, p.found) for p in problems] == expected[:cap.keep]
    assert cap.seen.get("offset_delta_order", 0) == len(expected)
