"""kinspect.validate: real batches and message sets pass; systematic damage to them is reported
by the right check at the right byte, and the walk goes on past it.

Seeds are real: kafka-clients' own writers (tests/unit/records/fixtures: every codec, both
legacy magics, control batches), real brokers' segments (samples/, with kafka-dump-log's output
beside each for the expected values) and real brokers' Fetch responses (kafka-rust 0.8/0.9,
kafkajs). Each damage loop runs in-process.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import lz4.frame
import pytest
import snappy
import zstandard
from crc32c import crc32c

from kinspect.limits import Limits
from kinspect.problems import ERROR, INFO, WARNING
from kinspect.records import decode_records
from kinspect.render.junit import JUnitReport
from kinspect.validate import (FileReport, Finding, check_family, classify, classify_bytes,
                               validate_bytes, validate_file, validate_paths)
from tests.conftest import PCAPS, REALDATA, SAMPLES
from tests.samples_oracle import SEGMENTS, counts, oracle
from tests.unit.records.conftest import FIXTURES, kafka_rust_fetch, kafkajs_fetch

FRAME = struct.Struct(">qi")
KAFKA4 = SAMPLES / "kafka-4.1.2" / "logs"
# 29 batches of KIP-848 group records and offset commits, 124 to 619 bytes each
OFFSETS_SEGMENT = KAFKA4 / "__consumer_offsets-6" / "00000000000000000000.log"
V2_FIELDS = [("base_offset", 0, 8), ("length", 8, 12), ("leader_epoch", 12, 16), ("magic", 16, 17),
             ("crc", 17, 21), ("attributes", 21, 23), ("last_offset_delta", 23, 27),
             ("base_timestamp", 27, 35), ("max_timestamp", 35, 43), ("producer_id", 43, 51),
             ("producer_epoch", 51, 53), ("base_sequence", 53, 57), ("records_count", 57, 61)]
OFFSET_CHECKS = {"offset_order", "offset_gap", "wrapper_inner_offsets"}


# ------------------------------------------------------------------ seeds

def units(data: bytes) -> list[tuple[int, int]]:
    """(position, size) of every unit of a pristine record set."""
    found, pos = [], 0
    while pos + 12 <= len(data):
        size = 12 + FRAME.unpack_from(data, pos)[1]
        if pos + size > len(data):
            break
        found.append((pos, size))
        pos += size
    return found


def first_units(data: bytes, count: int = 3) -> bytes:
    whole = units(data)[:count]
    return data[:whole[-1][0] + whole[-1][1]]


def _broker_seeds() -> dict[str, bytes]:
    seeds = {}
    for name in ("fetch1.mytopic.1p.nocompression.kafka.0821", "fetch1.mytopic.1p.gzip.kafka.0821",
                 "fetch1.mytopic.1p.snappy.kafka.0822"):
        seeds[f"kafka-rust {name}"] = first_units(kafka_rust_fetch(name)[0][3])
    for name in ("v4_response_mixed_formats", "v4_response_snappy", "v3_response_gzip",
                 "v1_response_gzip"):
        for topic, partition, _, records in kafkajs_fetch(name):
            if units(records):
                seeds[f"kafkajs {name} {topic}[{partition}]"] = first_units(records)
                break
    for path in sorted(SAMPLES.glob("*/logs/*/*.log")):  # real brokers' segments
        if path.stat().st_size:
            seeds[f"samples {path.parent.parent.parent.name}/{path.parent.name}"] = \
                first_units(path.read_bytes())
    return seeds


JAVA_SEEDS = {p.stem: p.read_bytes() for p in sorted(FIXTURES.glob("*.bin"))}
SEEDS = {**JAVA_SEEDS, **_broker_seeds()}


def test_seeds_cover_every_codec_both_legacy_magics_and_control_batches():
    kinds = set()
    for data in SEEDS.values():
        for pos, _ in units(data):
            magic, attributes = data[pos + 16], data[pos + 17 if data[pos + 16] < 2 else pos + 22]
            kinds.add((magic, attributes & 0x07))
            if magic == 2 and attributes & 0x20:
                kinds.add("control")
    assert {(m, c) for m in (0, 1) for c in range(4)} | {(2, c) for c in range(5)} <= kinds
    assert "control" in kinds


# ------------------------------------------------------------------ helpers

def validate(data: bytes) -> tuple[FileReport, list[Finding]]:
    report, findings = validate_bytes(data, "seed")
    return report, findings


def located(findings: list[Finding], severity: str = ERROR) -> list[tuple[str, int]]:
    return [(f.check, f.position) for f in findings if f.severity == severity]


def flipped(data: bytes, at: int, bit: int) -> bytes:
    damaged = bytearray(data)
    damaged[at] ^= 1 << bit
    return bytes(damaged)


def crc_at(data: bytes, pos: int) -> int:
    return pos + (17 if data[pos + 16] == 2 else 12)


def header_size(data: bytes, pos: int) -> int:
    """Bytes of fixed header: v2 up to the records, legacy up to and including the key length."""
    magic = data[pos + 16]
    return 61 if magic == 2 else (30 if magic == 1 else 22)


def reseal(data: bytes, pos: int, size: int) -> bytes:
    """Fix the CRC of the unit at pos after an edit (so the CRC does not hide the edit)."""
    damaged = bytearray(data)
    end = pos + size
    if damaged[pos + 16] == 2:
        struct.pack_into(">I", damaged, pos + 17, crc32c(bytes(damaged[pos + 21:end])))
    else:
        struct.pack_into(">I", damaged, pos + 12, zlib.crc32(bytes(damaged[pos + 16:end])))
    return bytes(damaged)


def uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def zigzag(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def record_starts(records: bytes) -> list[tuple[int, int, int]]:
    """(start, varint size, length) of each record in an uncompressed v2 records payload."""
    found, pos = [], 0
    while pos < len(records):
        raw, after = uvarint(records, pos)
        length = (raw >> 1) ^ -(raw & 1)
        found.append((pos, after - pos, length))
        pos = after + length
    return found


def assert_rest_is_clean(findings: list[Finding], data: bytes, pos: int) -> None:
    """Units after the damaged one at pos show no error: the walk went on. (A damaged length
    can make the damaged unit's own findings point past its end: those name its offsets.)"""
    after = pos + 12 + FRAME.unpack_from(data, pos)[1]
    own = offsets_of(data, pos)
    assert not [f for f in findings if f.severity == ERROR and f.position is not None
                and f.position >= after and f.base_offset not in own], findings


def offsets_of(data: bytes, pos: int) -> set[int]:
    """The base offsets a finding may give for the unit at pos: its offset field, or (legacy
    wrappers) its first inner offset."""
    unit = data[pos:pos + 12 + FRAME.unpack_from(data, pos)[1]]
    [decoded], _ = decode_records(unit)
    first = decoded["records"][0]["offset"] if decoded["records"] else None
    return {FRAME.unpack_from(data, pos)[0], first}


# ------------------------------------------------------------------ pristine

def test_every_pristine_seed_passes():
    for name, data in SEEDS.items():
        report, findings = validate(data)
        assert [f for f in findings if f.severity != INFO] == [], name
        assert report.batches == len(units(data)), name


def test_real_directories_validate_clean_and_every_unit_is_counted():
    """Every file of the real-data trees, the samples' broker log dirs and the fixtures is
    clean; each sample segment has the batches and records kafka-dump-log found in it."""
    reports = {}
    for event in validate_paths([REALDATA, SAMPLES, FIXTURES, PCAPS]):
        if isinstance(event, FileReport):
            reports[event.file] = event
        else:
            assert event.severity == INFO, event
    assert all(r.status() == "ok" for r in reports.values())
    assert len(SEGMENTS) > 40, f"{SAMPLES} holds the brokers' segments: tools/make_samples.py writes them"
    for segment in SEGMENTS:
        report = reports[str(segment)]
        assert (report.kind, report.batches, report.records) == ("segment", *counts(segment)), segment
    # of samples/, only the segments (samples/schemas' too, which have no oracle): not the indexes,
    # snapshots, checkpoints, metadata snapshots, nor kafka-dump-log's text
    assert ({f for f in reports if f.startswith(str(SAMPLES))}
            == {str(p) for p in SAMPLES.glob("*/logs/*/*.log")})
    kinds = {r.kind for r in reports.values()}
    assert kinds == {"segment", "records", "capture"}
    assert sum(r.kind == "records" for r in reports.values()) == len(JAVA_SEEDS)
    captures = 3 + len(list(PCAPS.glob("*.pcap*")))
    assert sum(r.kind == "capture" for r in reports.values()) == captures
    # Fetch bodies, index files, checkpoints and JSON are not record files
    assert not [f for f in reports if "kafka-rust" in f or "kafkajs" in f or f.endswith(".json")]


# ------------------------------------------------------------------ damage: header fields

def _fields(data: bytes, pos: int) -> list[tuple[str, int, int]]:
    magic = data[pos + 16]
    if magic == 2:
        return V2_FIELDS
    fields = [("base_offset", 0, 8), ("length", 8, 12), ("crc", 12, 16), ("magic", 16, 17),
              ("attributes", 17, 18)]
    if magic == 1:
        fields.append(("timestamp", 18, 26))
    key_at = 26 if magic == 1 else 18
    return fields + [("key_length", key_at, key_at + 4)]


def _target(data: bytes) -> tuple[int, int, list[tuple[int, int]]]:
    """The unit to damage: the middle one when there are three (it has two neighbours)."""
    whole = units(data)
    pos, size = whole[1] if len(whole) >= 3 else whole[0]
    return pos, size, whole


def _expect_header_damage(name, data, field, pos, size, whole, findings, report, damaged):
    unit_end = pos + size
    errors = located(findings)
    where = (name, field, findings)
    if field == "base_offset":
        assert errors == [], where
        if len(whole) > 1 or damaged[pos + 16] == 0 and damaged[pos + 17] & 7:
            successor = unit_end if unit_end < len(data) else None
            assert [f for f in findings if f.check in OFFSET_CHECKS
                    and f.position in (pos, successor)], where
    elif field == "leader_epoch":
        assert findings == [], where  # not covered by the CRC: a broker rewrites it
    elif field == "length":
        assert ("batch_length", pos + 8) in errors or ("partial_trailing", pos) in errors, where
        assert report.batches >= len(whole) - 1, where
        assert_rest_is_clean(findings, data, pos)
    elif field == "magic" and damaged[pos + 16] not in (0, 1, 2):
        assert ("magic", pos + 16) in errors, where
        assert_rest_is_clean(findings, data, pos)
    elif field == "crc":
        [crc] = findings
        original = struct.unpack_from(">I", data, crc_at(data, pos))[0]
        assert (crc.check, crc.severity, crc.position) == ("crc", ERROR, crc_at(data, pos)), where
        assert crc.expected == original and crc.found != original, where
    else:  # a field the CRC covers (or a magic that still frames)
        assert errors, where
        assert all(pos <= at < unit_end for _, at in errors), where
        if field != "magic":
            assert ("crc", crc_at(data, pos)) in errors, where
        assert_rest_is_clean(findings, data, pos)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_every_header_bit_flip_is_reported_by_the_right_check_at_the_right_byte(name):
    data = SEEDS[name]
    pos, size, whole = _target(data)
    for field, start, stop in _fields(data, pos):
        for at in range(pos + start, pos + stop):
            for bit in range(8):
                damaged = flipped(data, at, bit)
                report, findings = validate(damaged)
                _expect_header_damage(name, data, field, pos, size, whole, findings, report,
                                      damaged)


# ------------------------------------------------------------------ damage: payloads

@pytest.mark.parametrize("name", sorted(SEEDS))
def test_payload_bit_flips_are_crc_errors_in_that_batch_and_the_walk_goes_on(name):
    data = SEEDS[name]
    for pos, size in units(data):
        crc = crc_at(data, pos)
        compressed = data[pos + 16] == 2 and data[pos + 22] & 0x07
        start = pos + header_size(data, pos)
        step = max(1, (pos + size - start) // 512)  # every byte of all but the largest units
        for at in range(start, pos + size, step):
            report, findings = validate(flipped(data, at, at % 8))
            errors = located(findings)
            assert ("crc", crc) in errors, (name, at, findings)
            assert all(pos <= where < pos + size for _, where in errors), (name, at, findings)
            if compressed:
                assert all(where == pos + 61 for check, where in errors
                           if check == "decompress"), (name, at, findings)
            assert report.batches == len(units(data)), (name, at)


def test_a_compressed_payload_that_does_not_decompress_names_the_codec_and_the_payload():
    for name in ("2_gzip_create", "2_snappy_create", "2_lz4_create", "2_zstd_create"):
        data = bytearray(JAVA_SEEDS[name])
        data[61:] = b"\x00" * (len(data) - 61)
        _, findings = validate(reseal(bytes(data), 0, len(data)))
        [problem] = [f for f in findings if f.check == "decompress"]
        codec = name.split("_")[1]
        assert problem.position == 61 and codec in problem.what and problem.severity == ERROR


# ------------------------------------------------------------------ damage: record lengths

def _uncompressed_v2_units():
    for name, data in SEEDS.items():
        for pos, size in units(data):
            if data[pos + 16] == 2 and not data[pos + 22] & 0x07:
                yield name, data, pos, size


def test_every_record_length_change_is_reported_at_that_record():
    seen = 0
    for name, data, pos, size in _uncompressed_v2_units():
        for start, varint_size, length in record_starts(data[pos + 61:pos + size])[:5]:
            at = pos + 61 + start
            for changed in (length + 1, length - 1):
                encoded = zigzag(changed)
                if len(encoded) != varint_size:
                    continue
                damaged = reseal(data[:at] + encoded + data[at + varint_size:], pos, size)
                _, findings = validate(damaged)
                # a record one byte short is caught by its last field overrunning it: that is
                # the headers field when the record has headers (kinspect.records' naming)
                errors = located(findings)
                assert ("record_length", at) in errors or ("headers", at) in errors, \
                    (name, at, changed, findings)
                assert "crc" not in {f.check for f in findings}
                assert_rest_is_clean(findings, data, pos)
                seen += 1
    assert seen > 40


_CODECS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _recompress(codec: int, data: bytes) -> bytes:
    return {1: gzip.compress, 2: snappy.compress, 3: lz4.frame.compress,
            4: zstandard.ZstdCompressor().compress}[codec](data)


def _decompress(codec: int, data: bytes) -> bytes:
    if codec == 2 and data.startswith(b"\x82SNAPPY\x00"):
        out, pos = b"", 16
        while pos < len(data):
            (chunk,) = struct.unpack_from(">i", data, pos)
            out += snappy.uncompress(data[pos + 4:pos + 4 + chunk])
            pos += 4 + chunk
        return out
    return {1: gzip.decompress, 2: snappy.uncompress, 3: lz4.frame.decompress,
            4: lambda d: zstandard.ZstdDecompressor().decompressobj().decompress(d)}[codec](data)


def test_record_length_damage_inside_every_codec_points_at_the_compressed_payload():
    codecs = set()
    for name, data in SEEDS.items():
        for pos, size in units(data):
            codec = data[pos + 22] & 0x07 if data[pos + 16] == 2 else 0
            if not codec:
                continue
            records = bytearray(_decompress(codec, data[pos + 61:pos + size]))
            _, varint_size, length = record_starts(bytes(records))[0]
            records[:varint_size] = zigzag(length + 1)[:varint_size]
            payload = _recompress(codec, bytes(records))
            batch = bytearray(data[pos:pos + 61] + payload)
            struct.pack_into(">i", batch, 8, len(batch) - 12)
            damaged = reseal(bytes(batch), 0, len(batch))
            _, findings = validate(damaged)
            problems = [f for f in findings if f.check == "record_length"]
            assert problems and all(p.position == 61 for p in problems), (name, findings)
            assert f"byte 0 of the {_CODECS[codec]}-decompressed records" in problems[0].what
            assert "crc" not in {f.check for f in findings}
            codecs.add(codec)
    assert codecs == {1, 2, 3, 4}


def test_legacy_key_length_overrunning_the_message():
    seen = 0
    for name, data in SEEDS.items():
        for pos, size in units(data):
            magic = data[pos + 16]
            if magic == 2:
                continue
            key_at = pos + (26 if magic == 1 else 18)
            damaged = bytearray(data)
            struct.pack_into(">i", damaged, key_at, size)
            _, findings = validate(reseal(bytes(damaged), pos, size))
            assert located(findings) == [("record_length", pos)], (name, findings)
            seen += 1
    assert seen > 20


# ------------------------------------------------------------------ damage: truncation

def _cut_points(data: bytes) -> list[int]:
    cuts = set()
    for pos, size in units(data):
        for _, start, stop in _fields(data, pos):
            cuts.update((pos + start, pos + stop))
        cuts.update((pos + size // 2, pos + size - 1))
    return sorted(c for c in cuts if 0 < c < len(data))


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_truncation_at_every_boundary(name):
    data = SEEDS[name]
    whole = units(data)
    for cut in _cut_points(data):
        report, findings = validate(data[:cut])
        complete = [p for p, size in whole if p + size <= cut]
        if cut in {p + size for p, size in whole}:
            assert located(findings) == [], (name, cut, findings)
        else:
            cut_unit = len(complete) and whole[len(complete)][0]
            assert located(findings) == [("partial_trailing", cut_unit)], (name, cut, findings)
        assert report.batches == len(complete), (name, cut)


# ------------------------------------------------------------------ damage in a real segment

def _batches(segment: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of every batch, as kafka-dump-log read them."""
    return [(int(b["position"]), int(b["size"]), int(b["baseOffset"])) for b in oracle(segment)]


def test_a_damaged_real_segment_is_walked_to_its_end():
    data = bytearray(OFFSETS_SEGMENT.read_bytes())
    whole = _batches(OFFSETS_SEGMENT)
    damaged_units = {3: "payload", 14: "zeros", 25: "garbage"}
    data[whole[3][0] + 100] ^= 0x04
    start = whole[14][0] + 30
    data[start:start + 50] = bytes(50)
    start = whole[25][0]
    data[start:start + 16] = b"not a kafka batch"[:16]
    report, findings = validate_bytes(bytes(data), "segment", "segment")
    errors = located(findings)
    assert ("crc", whole[3][0] + 17) in errors
    assert ("crc", whole[14][0] + 17) in errors
    assert [f for f in findings if f.position == whole[25][0] + 8 and f.check == "batch_length"]
    assert all(whole[min(damaged_units)][0] <= at < whole[max(damaged_units)][0] + whole[25][1]
               for _, at in errors)
    assert report.batches == len(whole) - 1  # only the unit whose header is gone is lost


def test_a_length_that_swallows_the_next_batches_is_named():
    data = bytearray(OFFSETS_SEGMENT.read_bytes())
    whole = _batches(OFFSETS_SEGMENT)
    pos, size, base_offset = whole[5]
    struct.pack_into(">i", data, pos + 8, whole[9][0] - pos - 12)  # batches 5..8 as one
    report, findings = validate(bytes(data))
    [finding] = [f for f in findings if f.severity == ERROR]
    assert (finding.check, finding.position, finding.base_offset) == ("batch_length", pos + 8, base_offset)
    assert finding.expected == size - 12
    assert report.batches == len(whole) - 1


def test_zero_padding_after_the_last_batch_is_information():
    data = OFFSETS_SEGMENT.read_bytes() + bytes(4096)
    report, findings = validate(data)
    assert [(f.check, f.severity) for f in findings] == [("trailing_zeros", INFO)]
    assert report.status() == "ok" and report.batches == len(oracle(OFFSETS_SEGMENT))


@pytest.mark.parametrize("segment", [OFFSETS_SEGMENT, KAFKA4 / "compacted-0" / "00000000000000000014.log"],
                         ids=lambda p: p.parent.name + "/" + p.name)
def test_segment_named_after_a_later_offset_than_its_first_batch(segment):
    data = segment.read_bytes()
    first = _batches(segment)[0][2]
    assert segment.name == f"{first:020d}.log"
    _, findings = validate_bytes(data, f"{first + 1:020d}.log", "segment")
    assert [(f.check, f.severity, f.position) for f in findings] == [("segment_name", WARNING, 0)]
    _, findings = validate_bytes(data, segment.name, "segment")
    assert findings == []


# ------------------------------------------------------------------ classification

def test_files_are_told_apart_by_content():
    fixture = JAVA_SEEDS["2_zstd_create"]
    assert classify_bytes("anything.dat", fixture, explicit=False) == "records"
    assert classify(PCAPS / "kafka-python-sll2.pcap") == "capture"
    assert classify_bytes("x.gz", gzip.compress((PCAPS / "kafka-python-sll2.pcap").read_bytes()),
                          explicit=False) == "capture"
    assert classify_bytes("x.gz", gzip.compress(b"text, not a capture"), explicit=False) is None
    assert classify_bytes("00000000000000000042.log", b"", explicit=False) == "segment"
    assert classify_bytes("server.log", b"[2025-01-01] INFO started\n" * 4, explicit=False) is None
    assert classify_bytes("notes.txt", b"plain text that is long enough", explicit=True) is None
    for side_file in ("00000000000000000000.index", "00000000000000000000.timeindex",
                      "leader-epoch-checkpoint", "00000000000000002273.snapshot"):
        assert classify_bytes(side_file, fixture, explicit=False) is None


def test_a_record_file_with_a_damaged_first_unit_is_still_a_record_file():
    data = (KAFKA4 / "idempotent-0" / "00000000000000000000.log").read_bytes()  # 6 batches
    data = bytes(data[:16]) + b"\x07" + data[17:]  # magic of the first batch
    assert classify_bytes("fixture.bin", data, explicit=False) == "records"
    single = bytearray(JAVA_SEEDS["2_none_create"])
    single[16] = 9
    assert classify_bytes("fixture.bin", bytes(single), explicit=False) == "records"
    crc_only = flipped(JAVA_SEEDS["2_none_create"], 100, 0)
    assert classify_bytes("fixture.bin", crc_only, explicit=False) == "records"


def test_fetch_bodies_and_system_files_met_in_a_walk_are_not_record_files():
    for path in sorted((REALDATA / "kafka-rust").glob("fetch*.kafka.*")):
        assert classify(path, explicit=False) is None, path
    for path in (Path("/bin/sh"), Path("/etc/passwd")):
        assert classify(path, explicit=False) is None


def test_named_files_that_are_nothing_kafka_are_unreadable():
    [report] = list(validate_paths(["/etc/passwd"]))
    assert report.unreadable.startswith("not a capture, log segment or record file")
    [report] = list(validate_paths(["/no/such/file"]))
    assert report.status() == "unreadable"
    assert list(validate_paths(["/etc/passwd"], skip_unknown=True)) == []


# ------------------------------------------------------------------ captures

def _produce_batch(capture: Path) -> tuple[int, int, dict]:
    """A Produce request's first batch: its position in the capture file, its partition, and
    the batch as decoded."""
    from kinspect.decode.pipeline import DecodeRun
    for record in DecodeRun(str(capture)).records():
        if record.get("api_name") == "Produce" and record.get("request"):
            partition = record["request"]["topic_data"][0]["partition_data"][0]
            batch = partition["records"][0]
            raw = capture.read_bytes()
            crc = struct.pack(">I", batch["crc"])
            at = raw.index(b"\x02" + crc)  # magic byte, then the CRC
            return at - 16, partition["index"], batch
    raise AssertionError("no Produce request")


def test_a_damaged_batch_inside_a_capture_is_found_with_its_exchange(tmp_path):
    source = PCAPS / "librdkafka-produce-consume.pcapng"
    file_pos, partition, batch = _produce_batch(source)
    damaged = bytearray(source.read_bytes())
    damaged[file_pos + 40] ^= 0x01  # max timestamp, covered by the CRC
    path = tmp_path / "damaged.pcapng"
    path.write_bytes(bytes(damaged))
    events = list(validate_paths([path]))
    report = events[-1]
    findings = [e for e in events if isinstance(e, Finding) and e.severity == ERROR]
    crc = next(f for f in findings if f.check == "crc")
    assert crc.position == batch["position"] + 17  # in the Kafka frame
    assert crc.base_offset == batch["base_offset"]
    assert crc.context["api"].startswith("Produce v") and crc.context["side"] == "request"
    assert crc.context["topic"] == "lab-librdkafka" and crc.context["partition"] == partition
    assert "→ records → batch[0]" in crc.path
    assert {f.check for f in findings} <= {"crc", "max_timestamp"}
    assert report.status() == "problems" and report.record_sets > 0


def test_a_truncated_capture_and_one_without_kafka(tmp_path):
    source = PCAPS / "kafka-python-sll2.pcap"
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(source.read_bytes()[:-100])
    events = list(validate_paths([cut]))
    assert [e.check for e in events if isinstance(e, Finding) and e.severity != INFO]
    arkime = list(validate_paths([REALDATA / "arkime" / "kafka.pcap"]))
    assert events[-1].kind == arkime[-1].kind == "capture"
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(source.read_bytes()[:24])  # the file header, no packets
    findings = [e for e in validate_paths([empty]) if isinstance(e, Finding)]
    assert [(f.check, f.severity) for f in findings] == [("capture_kafka", WARNING)]


# ------------------------------------------------------------------ findings and JUnit

def test_finding_text_and_dict_carry_every_locator():
    _, [finding] = validate(flipped(JAVA_SEEDS["2_none_create"], 17, 0))
    text = str(finding)
    assert text.startswith("crc at byte 0x11, batch[0], base offset 100: ")
    assert "expected 0x" in text and "found 0x" in text
    d = finding.to_dict()
    assert (d["type"], d["check"], d["position"], d["batch"], d["base_offset"]) == (
        "finding", "crc", 17, 0, 100)


def test_every_check_name_has_a_family():
    checks = {"crc", "batch_length", "magic", "partial_trailing", "trailing_zeros", "codec",
              "decompress", "records_count", "record_length", "varint_bounds", "headers",
              "control_record", "wrapper_nesting", "reserved_attributes", "offset_delta_order",
              "last_offset_delta", "max_timestamp", "log_append_time", "producer_fields",
              "offset_order", "offset_gap", "zstd_legacy", "legacy_timestamp", "wrapper_magic",
              "wrapper_inner_offsets", "segment_name"}
    assert {check_family(c) for c in checks} <= {"framing", "crc", "records", "compression",
                                                 "attributes", "timestamps", "offsets",
                                                 "producer", "control"}
    assert check_family("capture_gap") == "capture" and check_family("body_structure") == "decode"


def test_junit_text_is_always_valid_xml():
    import xml.etree.ElementTree as ET
    junit = JUnitReport(keep=2)
    for index in range(5):
        junit.add(Finding("bad\x00name.bin", "crc", ERROR, f"control \x01\x1b chars {index}",
                          position=index))
    junit.end_file(FileReport("bad\x00name.bin", "records"))
    root = ET.fromstring(junit.to_xml())
    [failure] = root.iter("failure")
    assert "(and 4 more)" in failure.get("message") and "3 more not shown" in failure.text
    assert (root.get("tests"), root.get("failures")) == ("9", "1")


@pytest.mark.parametrize("name", ["java-transactions.pcap", "kafka39-legacy.pcap"])
def test_a_capture_counts_the_same_when_its_record_sets_are_streamed(name):
    def validated(**options):
        items = list(validate_file(PCAPS / name, **options))
        report = items[-1]
        return (report.batches, report.records, report.record_sets), [repr(f) for f in items[:-1]]

    held = validated()
    assert held[0][1] > 0
    assert validated(max_output=Limits(eager_records=1)) == held
