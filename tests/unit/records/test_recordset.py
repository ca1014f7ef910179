import mmap
import struct

import pytest

from kinspect.problems import Problem
from kinspect.records import decode_records, iter_batches
from tests.conftest import SAMPLES
from tests.samples_oracle import oracle
from tests.unit.records.conftest import (FIXTURES, java_fixture, kafka_rust_fetch, kafkajs_fetch,
                                         values_of)

ALL_JAVA = sorted(path.stem for path in FIXTURES.glob("*.bin"))


def _units(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each top-level unit, framed independently of the decoder."""
    bounds, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        bounds.append((pos, pos + 12 + length))
        pos += 12 + length
    return bounds


def _mixed() -> bytes:
    """Every Kafka-written fixture back to back: all magics, codecs and control types."""
    return b"".join(java_fixture(name) for name in ALL_JAVA)


def test_mixed_magic_fetch_response_from_a_real_broker():
    (_, _, at, records), = kafkajs_fetch("v4_response_mixed_formats")
    batches, problems = decode_records(records, base=at, checks=True)
    assert problems == []
    assert [b["magic"] for b in batches] == [1] * 1611 + [2] * 3
    assert all(b["crc_valid"] for b in batches)
    offsets = [offset for offset, *_ in values_of(batches)]
    assert offsets == sorted(offsets) and len(offsets) == len(set(offsets)) == 2425
    assert [b["position"] for b in batches] == [at + start for start, _ in _units(records)]


def test_partial_trailing_batch_is_information_in_a_fetch_and_an_error_in_a_segment():
    (_, _, at, records), = kafkajs_fetch("v2_response_index_out_of_range")
    batches, [problem] = decode_records(records, "fetch", at)
    assert len(batches) == 3
    assert (problem.check, problem.severity, problem.found) == ("partial_trailing", "info", 9)
    assert problem.offset == at + len(records) - 9 and problem.path == "fetch → batch[3]"
    batches, [problem] = decode_records(records, "segment", at, partial_ok=False)
    assert (problem.check, problem.severity) == ("partial_trailing", "error")


def test_broker_cut_fetch_with_only_a_partial_message():
    for _, _, at, records in kafkajs_fetch("v2_response_partial_messages_many_partitions"):
        batches, [problem] = decode_records(records, base=at)
        assert batches == [] and problem.check == "partial_trailing"
        assert problem.severity == "info" and problem.offset == at


def test_zero_padding_after_the_last_batch():
    data = java_fixture("2_none_create") + bytes(300)
    batches, [problem] = decode_records(data, partial_ok=False)
    assert len(batches) == 1
    assert (problem.check, problem.severity) == ("trailing_zeros", "info")
    assert problem.offset == len(data) - 300


def test_unknown_magic_is_skipped_by_its_length():
    bad = bytearray(java_fixture("2_none_create"))
    bad[16] = 7
    data = java_fixture("1_none_logappend") + bytes(bad) + java_fixture("2_gzip_create")
    batches, [problem] = decode_records(data, base=5)
    assert [b["magic"] for b in batches] == [1, 1, 1, 2]
    assert (problem.check, problem.found) == ("magic", 7)
    assert problem.offset == 5 + len(java_fixture("1_none_logappend")) + 16
    assert problem.path == "records → batch[3]"


def test_length_too_small_for_its_magic_stops_framing():
    bad = bytearray(java_fixture("2_none_create"))
    struct.pack_into(">i", bad, 8, 40)
    batches, [problem] = decode_records(bytes(bad) + java_fixture("2_gzip_create"))
    assert batches == [] and (problem.check, problem.found) == ("batch_length", 40)


def test_iter_batches_streams_unit_by_unit():
    data = _mixed()
    stream = iter_batches(memoryview(data), partial_ok=False)
    first, problems = next(stream)
    assert first["position"] == 0 and problems == []
    rest = list(stream)
    assert len(rest) + 1 == len(_units(data))


@pytest.mark.parametrize("name", ["__cluster_metadata-0", "record-shapes-0", "codec-zstd-0"])
def test_a_memory_mapped_segment_streams_batch_by_batch(name):
    """Kafka 4.1.2's metadata log (72 batches), its record shapes (null and empty keys and
    values, headers, 4 KiB value) uncompressed and a zstd topic: the records' keys, values and
    header values are bytes copied out of the map (or None), never views into it."""
    path = SAMPLES / "kafka-4.1.2" / "logs" / name / "00000000000000000000.log"
    expected = oracle(path)
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        seen = []
        for batch, problems in iter_batches(mapped, partial_ok=False):
            assert problems == []
            fields = [r["key"] for r in batch["records"]] + [r["value"] for r in batch["records"]] + [
                h["value"] for r in batch["records"] for h in r["headers"]]
            assert {type(f) for f in fields} <= {bytes, type(None)}
            seen.append((batch["position"], [r["offset"] for r in batch["records"]]))
    assert seen == [(int(b["position"]), b["records"]) for b in expected]


def test_truncation_at_every_byte_never_raises_and_frames_what_is_whole():
    data = b"".join(java_fixture(n) for n in ("0_gzip_create", "1_none_logappend",
                                                 "2_control_commit", "2_lz4_create"))
    units = _units(data)
    for cut in range(len(data)):
        whole = sum(1 for _, end in units if end <= cut)
        for partial_ok in (True, False):
            batches, problems = decode_records(data[:cut], base=10, partial_ok=partial_ok,
                                               checks=True)
            problems = [p for p in problems if p.check != "offset_gap"]  # fixtures' offsets
            assert len(batches) == whole
            if cut in {end for _, end in units} or cut == 0:
                assert problems == []
            else:
                [problem] = problems
                assert problem.check == "partial_trailing"
                assert problem.severity == ("info" if partial_ok else "error")
                assert problem.offset == 10 + units[whole][0]


def _crc_offset(data: bytes, start: int) -> int:
    return start + (17 if data[start + 16] == 2 else 12)


@pytest.mark.parametrize("name", ALL_JAVA)
def test_every_header_bit_flip_is_caught_or_harmless(name):
    data = java_fixture(name)
    for start, end in _units(data):
        header = 61 if data[start + 16] == 2 else 22
        for bit in range(min(header, end - start) * 8):
            damaged = bytearray(data)
            damaged[start + bit // 8] ^= 1 << (bit % 8)
            batches, problems = decode_records(bytes(damaged), base=1000, checks=True,
                                               partial_ok=False)
            assert all(isinstance(p, Problem) for p in problems)
            where = start + bit // 8
            if where >= start + 16 + (5 if data[start + 16] == 2 else 0):
                # a CRC-covered field (or the CRC itself): the CRC check names this unit
                crc_problems = [p for p in problems if p.check == "crc"]
                framing = [p for p in problems if p.check in ("magic", "batch_length",
                                                              "partial_trailing")]
                assert crc_problems or framing, (name, bit)
                if crc_problems and not framing:
                    assert 1000 + _crc_offset(damaged, start) in {p.offset for p in crc_problems}


@pytest.mark.parametrize("name", ALL_JAVA)
def test_payload_bit_flips_are_crc_errors(name):
    data = java_fixture(name)
    for start, end in _units(data):
        first = start + (61 if data[start + 16] == 2 else 22)
        for pos in range(first, end):
            for mask in (0x01, 0x80):
                damaged = bytearray(data)
                damaged[pos] ^= mask
                batches, problems = decode_records(bytes(damaged), checks=True)
                crc = [p for p in problems if p.check == "crc" and p.path.endswith(
                    f"batch[{_units(data).index((start, end))}]")]
                assert crc and crc[0].offset == _crc_offset(data, start), (name, pos, mask)


def test_crc_field_damage_reports_the_found_value():
    data = bytearray(java_fixture("1_gzip_create"))
    data[12:16] = b"\xde\xad\xbe\xef"
    (message,), [problem] = decode_records(bytes(data))
    assert problem.found == 0xDEADBEEF == message["crc"]
    assert problem.expected == struct.unpack_from(">I", java_fixture("1_gzip_create"), 12)[0]


def test_kafka_rust_messages_with_record_lengths_damaged():
    (_, _, at, records), = kafka_rust_fetch("fetch1.mytopic.1p.nocompression.kafka.0821")
    for start, _ in _units(records)[:5]:
        for value in (-5, 0, 13, 1 << 30):
            damaged = bytearray(records)
            struct.pack_into(">i", damaged, start + 22, value)  # the value's length
            batches, problems = decode_records(bytes(damaged), base=at, checks=True)
            assert {"crc", "record_length"} <= {p.check for p in problems}
