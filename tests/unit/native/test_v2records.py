"""The C records decoder against its Python twin: the same records, or None where Python finds a problem.

Evidence: every v2 batch of every committed capture, every sample and realdata segment, the
Java-written fixtures, and mutations of real record payloads (byte changes, truncations).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kinspect import native
from kinspect.decode.pipeline import DecodeRun
from kinspect.records import batch
from kinspect.records.recordset import decode_records
from tests.conftest import PCAPS, SAMPLES
from tests.unit.records.conftest import FIXTURES
from tests.unit.native import needs_c

decode = native.v2records.decode if native.v2records is not None else None


@needs_c
def test_the_accelerators_are_built():
    # The README's install builds them; without a C compiler kinspect still works, slower.
    assert native.status() == {"v2records": True, "bytes_json": True, "packets": True, "ring": True,
                               "bodies": True, "tls": True, "relay": True, "avro": True, "protobuf": True}, (
        "C accelerators missing: pip install -e . with a C compiler (gcc) present")


def python_twin(args):
    """The Python loop on decode's arguments: (records, framed, position after, problems)."""
    problems: list = []
    limit = args[6] if len(args) > 6 else None
    records, framed, after = batch.decode_py(*args[:6], "records", problems, 0, None, "", 0, limit)
    return records, framed, after, problems


def is_key_warning(problem) -> bool:
    return problem.check == "headers" and problem.what.endswith("key is not valid UTF-8")


class Differential:
    """Stands in for batch._fast: runs both decoders on every call and compares."""

    def __init__(self):
        self.calls: list[tuple] = []

    def __call__(self, *args):
        result = fast = decode(*args)
        records, framed, after, problems = python_twin(args)
        warnings = [p for p in problems if is_key_warning(p)]
        if len(warnings) < len(problems) or (warnings and len(args) < 8):
            assert fast is None, f"C decoded records Python finds trouble in: {problems[0]}"
        else:
            assert fast is not None, "C fell back on records Python decodes without a problem"
            if len(args) > 7:  # (records, position after them, bad keys), bad_keys filled
                keep = args[8] if len(args) > 8 else len(warnings)
                assert fast[2] == len(warnings)
                assert [(f"header[{number}] key is not valid UTF-8", f"records → records[{index}]",
                         at) for index, number, at in args[7]] == [
                    (p.what, p.path, p.offset) for p in warnings[:keep]]
            if len(args) > 6:  # (records, position after them)
                assert fast[1] == after
                fast = fast[0]
            assert fast == records and framed == len(fast)
            assert [type(r["headers"]) for r in fast] == [type(r["headers"]) for r in records]
        self.calls.append(args)
        return result


@pytest.fixture
def differential(monkeypatch) -> Differential:
    watcher = Differential()
    monkeypatch.setattr(batch, "_fast", watcher)
    return watcher


CAPTURES = sorted(p.name for p in PCAPS.glob("*.pcap*"))
SEGMENTS = sorted(SAMPLES.rglob("*.log"))


@needs_c
@pytest.mark.parametrize("name", CAPTURES)
def test_every_batch_of_every_capture(differential, name):
    for _ in DecodeRun(PCAPS / name).records():
        pass
    if "legacy" not in name and "groups-describe" not in name:  # those hold no v2 batches
        assert differential.calls, "expected v2 batches in this capture"


@needs_c
def test_every_segment(differential):
    assert len(SEGMENTS) > 20
    for path in SEGMENTS:
        decode_records(path.read_bytes(), str(path), partial_ok=False)
    assert len(differential.calls) > 250  # samples/ alone hold 303 batches


@needs_c
def test_java_written_fixtures(differential):
    for path in sorted(FIXTURES.glob("2_*.bin")):
        decode_records(path.read_bytes())
    assert differential.calls


def real_payloads(limit_bytes: int = 4096) -> list[tuple]:
    """Small real record payloads (decompressed or not) with their batch's arguments."""
    collected: list[tuple] = []

    def keep(*args):
        data, pos, end = args[:3]
        if end - pos <= limit_bytes:
            collected.append((bytes(data[pos:end]), *args[3:6]))
        return decode(*args)

    saved = batch._fast
    batch._fast = keep
    try:
        for name in ("librdkafka-produce-consume.pcapng", "java-transactions.pcap",
                     "java-console-producer-zstd.pcap", "aiokafka-mtu1500.pcapng"):
            for _ in DecodeRun(PCAPS / name).records():
                pass
    finally:
        batch._fast = saved
    unique = {payload[0]: payload for payload in collected}
    return [unique[key] for key in sorted(unique)[:60]]


@pytest.fixture(scope="module")
def payloads() -> list[tuple]:
    found = real_payloads()
    assert len(found) >= 20
    with_headers = [p for p in found if any(r["headers"] for r in decode(p[0], 0, len(p[0]), *p[1:]))]
    assert len(with_headers) >= 5, "want records with headers among them"
    return found


def agree(data: bytes, base_offset: int, base_timestamp: int, fixed) -> bool:
    """Whether C decodes data (then as Python does); with a bad_keys list, also checked."""
    args = (data, 0, len(data), base_offset, base_timestamp, fixed)
    fast = decode(*args)
    records, framed, _, problems = python_twin(args)
    agree_on_bad_keys(args, records, problems)
    if problems:
        assert fast is None, f"C decoded {data.hex()} but Python says {problems[0]}"
        return False
    assert fast == records and framed == len(fast), data.hex()
    return True


def agree_on_bad_keys(args: tuple, records: list, problems: list, keep: int = 3) -> bool:
    """decode with a bad_keys list against the Python loop's records and problems: it decodes
    what Python decodes with only header-key warnings, and lists the first ``keep`` of them.
    Whether it decoded any such key."""
    bad_keys: list = []
    listed = decode(*args, len(args[0]) + 1, bad_keys, keep)
    warnings = [p for p in problems if is_key_warning(p)]
    if len(warnings) < len(problems):
        assert listed is None, f"C decoded {args[0].hex()} but Python says {problems[0]}"
        return False
    assert listed is not None, f"C fell back on {args[0].hex()}: Python only warns {warnings}"
    assert listed[0] == records and listed[1] == args[2] and listed[2] == len(warnings)
    assert [(f"header[{number}] key is not valid UTF-8", f"records → records[{index}]", at)
            for index, number, at in bad_keys] == [(p.what, p.path, p.offset) for p in warnings[:keep]]
    return bool(warnings)


@needs_c
def test_windows_agree_and_add_up(payloads):
    """With a limit, both decode the same records a window at a time, and the windows make
    up the whole."""
    for data, base_offset, base_timestamp, fixed in payloads:
        whole = decode(data, 0, len(data), base_offset, base_timestamp, fixed)
        for limit in (1, 2, 3, 1000):
            pos, joined = 0, []
            while pos < len(data):
                args = (data, pos, len(data), base_offset, base_timestamp, fixed, limit)
                records, after = decode(*args)
                twin, framed, twin_after, problems = python_twin(args)
                assert (records, after) == (twin, twin_after) and framed == len(records) <= limit
                assert not problems and after > pos
                joined += records
                pos = after
            assert joined == whole


@needs_c
def test_mutated_payloads(payloads):
    rng = random.Random(20261122)
    regular = irregular = bad_keys = 0
    for data, base_offset, base_timestamp, fixed in payloads:
        for at in range(len(data)):
            for byte in {0x00, 0x01, 0x7F, 0x80, 0xFF, data[at] ^ 0x01, rng.randrange(256)}:
                changed = data[:at] + bytes((byte,)) + data[at + 1:]
                if agree(changed, base_offset, base_timestamp, fixed):
                    regular += 1
                else:
                    irregular += 1
                    args = (changed, 0, len(changed), base_offset, base_timestamp, fixed)
                    bad_keys += agree_on_bad_keys(args, *python_twin(args)[::3])
        for cut in range(len(data)):
            agree(data[:cut], base_offset, base_timestamp, fixed)
        agree(data + b"\x00", base_offset, base_timestamp, fixed)
    assert regular > 1000 and irregular > 1000  # both paths were exercised
    assert bad_keys > 100  # and header keys that are not UTF-8, decoded with a bad_keys list


def varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        if raw < 0x80:
            return bytes(out + bytes((raw,)))
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7


def record(body: bytes) -> bytes:
    return varint(len(body)) + body


@needs_c
def test_edges_fall_back_or_agree():
    plain = b"\x00" + varint(5) + varint(1) + varint(1) + b"k" + varint(2) + b"vv" + varint(0)
    assert decode(record(plain), 0, len(record(plain)), 100, 1000, None) == [
        {"offset": 101, "timestamp": 1005, "key": b"k", "value": b"vv", "headers": ()}]
    assert agree(record(plain), 100, 1000, None)
    assert decode(record(plain), 0, len(record(plain)), 100, 1000, 7)[0]["timestamp"] == 7
    # offsets and timestamps past 64 bits: Python's integers take them
    assert decode(record(plain), 0, len(record(plain)), 2**63 - 1, 0, None) is None
    assert decode(record(plain), 0, len(record(plain)), 0, 2**63 - 3, None) is None
    assert decode(record(plain), 0, len(record(plain)), 2**64, 0, None) is None
    # a 5-byte varint beyond 32 bits, a 10-byte one beyond 64
    too_wide = b"\x00" + varint(0) + b"\xff\xff\xff\xff\x1f" + varint(-1) + varint(-1) + varint(0)
    assert not agree(record(too_wide), 0, 0, None)
    eleventh = b"\x00" + b"\xff" * 9 + b"\x7f" + varint(0) + varint(-1) + varint(-1) + varint(0)
    assert not agree(record(eleventh), 0, 0, None)
    # header keys must be UTF-8; values may be null
    headers = (b"\x00" + varint(0) + varint(0) + varint(-1) + varint(-1) + varint(2)
               + varint(1) + b"a" + varint(-1) + varint(2) + b"\xc3\xa9" + varint(0))
    assert decode(record(headers), 0, len(record(headers)), 0, 0, None)[0]["headers"] == [
        {"key": "a", "value": None}, {"key": "é", "value": b""}]
    bad_key = headers.replace(b"\xc3\xa9", b"\xc3\x28")
    assert not agree(record(bad_key), 0, 0, None)
    # the window: bytes before pos and after end are not records
    framed = b"junk" + record(plain) + b"tail"
    assert decode(framed, 4, 4 + len(record(plain)), 0, 0, None)[0]["value"] == b"vv"
    assert decode(framed, 4, len(framed) + 1, 0, 0, None) is None
    assert decode(b"", 0, 0, 0, 0, None) == []
    with pytest.raises(TypeError):
        decode(bytearray(record(plain)), 0, 1, 0, 0, None)


# -- varints at their edges: C against its Python twin, kafka-python as the oracle of values -------

def _kafka_varint(value: int) -> bytes:
    """kafka-python's own zigzag encoding (kafka.record.util), not kinspect's."""
    from kafka.record.util import encode_varint

    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


def _overlong(encoded: bytes, size: int) -> bytes:
    """The same value in ``size`` bytes: continuation bits and zero groups after its last byte."""
    return encoded[:-1] + bytes((encoded[-1] | 0x80,)) + b"\x80" * (size - len(encoded) - 1) + b"\x00"


INT32_EDGES = [0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, 2**31 - 1, -2**31]
INT64_EDGES = INT32_EDGES + [2**31, -2**31 - 1, 2**62, 2**63 - 1, -2**63]


def _varint_forms(value: int, max_bytes: int):
    """(encoding, the value it holds or None where it is invalid for a field of max_bytes)."""
    minimal = _kafka_varint(value)
    yield minimal, value
    for size in range(len(minimal) + 1, max_bytes + 2):  # overlong, up to one byte too long
        yield _overlong(minimal, size), value if size <= max_bytes else None
    for cut in range(1, len(minimal)):
        yield minimal[:cut], None  # truncated: what follows is read as its next bytes
    zigzag = (value << 1) ^ (value >> 63)
    wider = zigzag | (1 << (32 if max_bytes == 5 else 64))  # a bit past the field's width
    raw = bytearray()
    while wider >= 0x80:
        raw.append((wider & 0x7F) | 0x80)
        wider >>= 7
    yield bytes(raw + bytes((wider,))), None


def _record_with(field: str, encoded: bytes) -> bytes:
    """A record whose ``field`` is the varint ``encoded`` and every other field a small valid one."""
    parts = {"timestamp_delta": varint(5), "offset_delta": varint(1), "key_length": varint(1),
             "value_length": varint(2), "header_count": varint(1), "header_key_length": varint(1),
             "header_value_length": varint(1)}
    parts[field] = encoded
    body = (b"\x00" + parts["timestamp_delta"] + parts["offset_delta"] + parts["key_length"] + b"k"
            + parts["value_length"] + b"vv" + parts["header_count"] + parts["header_key_length"] + b"h"
            + parts["header_value_length"] + b"x")
    return record(body)


# field -> (its most bytes, the value the record's other bytes need, or None where any fits)
VARINT_FIELDS = {"timestamp_delta": (10, None), "offset_delta": (5, None), "key_length": (5, 1),
                 "value_length": (5, 2), "header_count": (5, 1), "header_key_length": (5, 1),
                 "header_value_length": (5, 1)}
BASE_OFFSET, BASE_TIMESTAMP = 1_000, 1_700_000_000_000


def _twins(data: bytes):
    """C's records and the Python twin's (records, problems), checked to agree: C gives None
    where Python finds a problem, and else Python's records, or None only where an offset or a
    timestamp leaves 64 bits (C's fallback to Python, by design)."""
    fast = decode(data, 0, len(data), BASE_OFFSET, BASE_TIMESTAMP, None)
    records, _, _, problems = python_twin((data, 0, len(data), BASE_OFFSET, BASE_TIMESTAMP, None))
    if problems:
        assert fast is None, f"C decoded {data.hex()} but Python says {problems[0]}"
    elif all(-2**63 <= r[k] < 2**63 for r in records for k in ("offset", "timestamp")):
        assert fast == records, data.hex()
    else:
        assert fast is None or fast == records, data.hex()
    return fast, records, problems


@needs_c
@pytest.mark.parametrize("field", sorted(VARINT_FIELDS))
def test_varints_at_their_edges_decode_alike_in_c_and_python(field):
    max_bytes, needed = VARINT_FIELDS[field]
    values = (INT64_EDGES if max_bytes == 10 else INT32_EDGES) + ([needed] if needed is not None else [])
    decoded = rejected = 0
    for value in values:
        for encoded, holds in _varint_forms(value, max_bytes):
            fast, records, problems = _twins(_record_with(field, encoded))
            if problems:
                rejected += 1
                assert holds is None or (needed is not None and holds != needed), encoded.hex()
                continue
            decoded += 1
            assert holds is not None, encoded.hex()  # nothing invalid decodes
            [got] = records
            if field == "timestamp_delta":
                assert got["timestamp"] == BASE_TIMESTAMP + holds, encoded.hex()
            elif field == "offset_delta":
                assert got["offset"] == BASE_OFFSET + holds, encoded.hex()
            else:
                assert holds == needed and got["key"] == b"k" and got["value"] == b"vv"
                assert got["headers"] == [{"key": "h", "value": b"x"}]
    assert decoded and rejected


@needs_c
def test_the_record_length_varint_at_its_edges():
    plain = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(-1) + varint(0)
    for encoded, holds in _varint_forms(len(plain), 5):
        fast, records, problems = _twins(encoded + plain)
        assert (fast is not None) == (holds == len(plain)) == (not problems), encoded.hex()
    for value in INT32_EDGES:  # lengths that do not fit the bytes left, negative ones
        if value != len(plain):
            assert _twins(_kafka_varint(value) + plain)[2]
