"""Batches too big to hold: streamed records give the same output as held ones, in bounded memory."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from kinspect.limits import Budget, Limits
from kinspect.records.recordset import decode_records
from kinspect.records.stream import RecordStream
from kinspect.render.jsonl import dumpb, pieces, plain
from kinspect.storage.segment import walk_segment
from tests.conftest import PCAPS, SAMPLES
from kinspect.decode.pipeline import DecodeRun


def varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    return bytes(out + bytes((raw,)))


def batch(records: list[bytes], base_offset: int = 0) -> bytes:
    payload = b"".join(varint(len(r)) + r for r in records)
    after_crc = struct.pack(">hiqqqhii", 0, len(records) - 1, 5, 9, -1, -1, -1, len(records)) + payload
    body = struct.pack(">ibI", 0, 2, crc32c(after_crc)) + after_crc
    return struct.pack(">qi", base_offset, len(body)) + body


def record(delta: int, key: bytes | None = b"k", bad: bool = False) -> bytes:
    key_part = varint(-1) if key is None else varint(len(key)) + key
    headers = varint(1) + varint(2) + b"\xff\xfe" + varint(-1) if bad else varint(0)  # non-UTF-8 key
    return b"\x00" + varint(0) + varint(delta) + key_part + varint(1) + b"v" + headers


def small(limit: int) -> Budget:
    return Budget(Limits(eager_records=limit))


def test_a_stream_decodes_like_a_list():
    data = batch([record(i, key=str(i).encode()) for i in range(1000)])
    held, held_problems = decode_records(data)
    streamed, streamed_problems = decode_records(data, max_output=small(10))
    assert isinstance(held[0]["records"], list)
    stream = streamed[0]["records"]
    assert isinstance(stream, RecordStream) and len(stream) == 1000
    assert list(stream) == held[0]["records"]
    assert stream[0] == held[0]["records"][0] and stream[-1] == held[0]["records"][-1]
    assert stream.head(3) == held[0]["records"][:3]
    assert [p.to_dict() for p in streamed_problems] == [p.to_dict() for p in held_problems]
    assert dumpb(streamed) == dumpb(held)
    assert b"".join(pieces({"b": streamed}, True)) == dumpb({"b": held}, True)


def test_checks_run_over_a_stream_as_over_a_list():
    deltas = [0, 1, 2, 2, 5, 6, 4, 7] * 50
    data = batch([record(d) for d in deltas])
    held = decode_records(data, checks=True)
    streamed = decode_records(data, checks=True, max_output=small(7))
    assert [p.to_dict() for p in streamed[1]] == [p.to_dict() for p in held[1]]


def test_problems_of_one_kind_are_counted_not_repeated():
    data = batch([record(i, bad=True) for i in range(5000)])
    _, problems = decode_records(data, checks=True)
    headers = [p for p in problems if p.check == "headers"]
    assert len(headers) == 11
    assert "4990 more headers problems" in headers[-1].what


def test_a_preview_shows_the_first_records_and_how_many_more():
    data = batch([record(i) for i in range(500)])
    streamed, _ = decode_records(data, max_output=small(10))
    shown = plain(streamed)[0]["records"]
    assert len(shown) == 201 and shown[-1] == "… 300 more records (streamed)"


def test_streaming_keeps_real_output_identical():
    """Every real v2 segment and capture gives the same JSON held or streamed (a tiny budget)."""
    for path in sorted(SAMPLES.glob("kafka-4.1.2/**/*.log")):
        data = path.read_bytes()
        held = [dumpb(item) for _, item, _ in walk_segment(data, checks=True)]
        streamed = [dumpb(item) for _, item, _ in walk_segment(data, checks=True, max_output=small(2))]
        assert held == streamed, path
    for name in ("librdkafka-produce-consume.pcapng", "java-transactions.pcap"):
        held = [dumpb(r) for r in DecodeRun(PCAPS / name).records()]
        streamed = [dumpb(r) for r in DecodeRun(PCAPS / name, limits=Limits(eager_records=1)).records()]
        assert held == streamed, name


def test_legacy_wrappers_past_the_budget_stream_their_inner_messages():
    """Every real legacy segment (magic 0 and 1, every codec) gives the same JSON held or with
    a budget of one record: a wrapper's inner messages are walked again when written."""
    streams = 0
    for path in sorted(SAMPLES.glob("kafka-3.9.2-legacy/**/*.log")):
        data = path.read_bytes()
        held = [dumpb(item) for _, item, _ in walk_segment(data, checks=True)]
        streamed = list(walk_segment(data, checks=True, max_output=small(1)))
        assert [dumpb(item) for _, item, _ in streamed] == held, path
        assert [p for _, _, problems in streamed for p in problems if p.check == "records_cut"] == []
        streams += sum(type(item.get("records")).__name__ == "WrapperStream" for _, item, _ in streamed)
    assert streams > 0


def test_a_record_set_of_more_batches_than_may_be_held_streams_them():
    data = b"".join(batch([record(0), record(1)], base_offset=2 * i) for i in range(600))
    held, held_problems = decode_records(data, checks=True)
    streamed, streamed_problems = decode_records(data, checks=True, max_output=small(40))
    assert type(streamed).__name__ == "BatchStream" and len(streamed) == 600
    assert [dumpb(b) for b in streamed] == [dumpb(b) for b in held]
    # every batch has a max_timestamp problem: past the point of streaming, they are counted
    assert len(held_problems) == 600 and len(streamed_problems) < 40
    assert streamed_problems[:10] == held_problems[:10]
    assert "more max_timestamp problems" in streamed_problems[-1].what
    assert b"".join(pieces({"records": streamed}, True)) == dumpb({"records": held}, True)
    assert len(plain(streamed)) == 201


def test_streamed_batches_that_stream_their_records_write_the_same_json():
    data = b"".join(batch([record(d) for d in range(50)], base_offset=50 * i) for i in range(20))
    held, _ = decode_records(data)
    streamed, _ = decode_records(data, max_output=small(30))
    assert dumpb(streamed) == dumpb(held)


def test_a_batch_of_records_that_do_not_decode_is_given_up_after_a_bound(monkeypatch):
    from kinspect.records import batch as v2

    monkeypatch.setattr(v2, "MAX_BAD_RECORDS", 50)
    bad = b"\x00\x00\x00\x7f\x01\x00"  # a key length of -64
    data = batch([bad] * 500)
    _, problems = decode_records(data)
    cut = [p for p in problems if p.check == "records_cut"]
    assert cut and "50 records of this batch do not decode" in cut[0].what
    assert sum(p.check == "record_length" for p in problems) == 11  # 10 shown, 1 counting the rest
