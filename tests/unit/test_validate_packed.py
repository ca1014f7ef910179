"""kinspect.validate keeps a regular batch's records packed as their bytes (no object per record),
in segments and in captures: the findings and counts must be exactly those of the walk that
decodes every record to a dict.

Real segments (every one in samples/: Kafka 4.1.2's topics of every codec and record shape,
its __consumer_offsets, __transaction_state, __share_group_state and KRaft metadata log, Kafka
3.9.2's magic 0 and 1 message sets, the schema registry lab's topics; and the doctor scenario's
broker) and the same bytes damaged: a byte of every batch's records flipped, in turn
in the varints, the keys and the values, so that packing is refused or the CRC fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kinspect import validate as validate_module
from kinspect.decode.pipeline import DecodeRun
from kinspect.limits import Budget
from kinspect.records.packed import PackedRecords
from kinspect.storage.segment import walk_segment
from tests.conftest import PCAPS, REPO, SAMPLES
from tests.unit.native import needs_c

DOCTOR_SEGMENT = REPO / "tests/data/doctor-scenario/logs/events-0/00000000000000000000.log"
SEGMENTS = sorted(SAMPLES.glob("*/logs/*/*.log")) + [DOCTOR_SEGMENT]


def _lines(data: bytes, name: str, pack: bool, monkeypatch) -> list[str]:
    real = validate_module.Budget
    monkeypatch.setattr(validate_module, "Budget", lambda limits, input_bytes=0, pack_records=False:
                        real(limits, input_bytes, pack_records=pack))
    report, findings = validate_module.validate_bytes(data, name, "segment")
    monkeypatch.setattr(validate_module, "Budget", real)
    return [json.dumps(f.to_dict(), default=str) for f in findings] + [json.dumps(report.to_dict())]


def _damaged(data: bytes, step: int) -> bytes:
    """One byte flipped in each batch's records, ``step`` bytes into them."""
    out, pos = bytearray(data), 0
    while pos + 61 < len(out):
        length = int.from_bytes(out[pos + 8:pos + 12], "big")
        if length < 49:
            break
        if 61 + step < 12 + length:
            out[pos + 61 + step] ^= 0x5A
        pos += 12 + length
    return bytes(out)


def test_the_segments_are_there():
    assert len(SEGMENTS) > 50, f"{SAMPLES} holds the brokers' segments: tools/make_samples.py writes them"


@pytest.mark.parametrize("segment", SEGMENTS, ids=lambda p: str(p.relative_to(REPO).parent))
@pytest.mark.parametrize("step", [None, 0, 1, 3, 7, 20])
def test_packed_records_give_the_findings_of_decoded_ones(segment, step, monkeypatch):
    data = segment.read_bytes()
    if step is not None:
        data = _damaged(data, step)
    name = segment.name
    assert _lines(data, name, True, monkeypatch) == _lines(data, name, False, monkeypatch)


@needs_c  # packing is the C scan's; the pure-Python twin decodes every record
def test_validate_packs_regular_batches():
    """The walk validate runs hands the checks PackedRecords for a real segment's regular batches
    (the doctor scenario's)."""
    segment = DOCTOR_SEGMENT
    data = segment.read_bytes()
    seen = []
    real = walk_segment

    def spy(buf, path, **options):
        budget = options["max_output"]
        assert isinstance(budget, Budget) and budget.pack_records
        for item in real(buf, path, **options):
            seen.append(type(item[1].get("records")))
            yield item

    validate_module.walk_segment, saved = spy, validate_module.walk_segment
    try:
        validate_module.validate_bytes(data, segment.name, "segment")
    finally:
        validate_module.walk_segment = saved
    assert seen and set(seen) == {PackedRecords}


CAPTURES = ["librdkafka-produce-consume.pcapng", "java-transactions.pcap", "java-console-producer-zstd.pcap",
            "aiokafka-mtu1500.pcapng"]


def _capture_lines(path: Path, pack: bool, monkeypatch) -> list[str]:
    real = DecodeRun.records
    monkeypatch.setattr(DecodeRun, "records", lambda self, progress=None, pack_records=False:
                        real(self, progress, pack))
    lines = []
    for item in validate_module.validate_paths([path]):
        d = item.to_dict()
        d.pop("seconds", None)
        lines.append(json.dumps(d, default=str))
    monkeypatch.setattr(DecodeRun, "records", real)
    return lines


@pytest.mark.parametrize("name", CAPTURES)
def test_a_captures_findings_are_the_same_packed_or_not(name, monkeypatch):
    path = PCAPS / name
    assert _capture_lines(path, True, monkeypatch) == _capture_lines(path, False, monkeypatch)


@needs_c  # packing is the C scan's
def test_validate_asks_for_packed_records_in_captures(monkeypatch):
    asked = []
    real = DecodeRun.records

    def spy(self, progress=None, pack_records=False):
        asked.append(pack_records)
        return real(self, progress, pack_records)

    monkeypatch.setattr(DecodeRun, "records", spy)
    report = list(validate_module.validate_paths([PCAPS / CAPTURES[0]]))[-1]
    assert asked == [True] and report.records > 0
