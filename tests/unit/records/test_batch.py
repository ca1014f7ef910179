import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AiokafkaBuilder
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder

from kinspect.records import decode_records
from tests.conftest import SAMPLES
from tests.samples_oracle import SEGMENTS, oracle
from tests.unit.records.conftest import java_fixture, java_values, kafkajs_fetch, values_of
from tests.unit.records.handmade import record, record_body, reseal, uvarint, v2_batch, varint

JAVA_V2 = ["2_none_create", "2_gzip_create", "2_snappy_create", "2_lz4_create", "2_zstd_create",
           "2_lz4_logappend", "2_none_idempotent", "2_zstd_transactional", "2_none_deletehorizon"]
T0 = 1_700_000_000_000


@pytest.mark.parametrize("name", JAVA_V2)
def test_kafka_written_batches_decode_as_kafka_reads_them(name, manifest):
    expected = manifest[name]
    batches, problems = decode_records(java_fixture(name), checks=True, partial_ok=False)
    assert problems == []
    assert values_of(batches) == java_values(expected)
    for batch, java in zip(batches, expected["batches"], strict=True):
        assert batch["compression"] == java["compression"]
        assert batch["timestamp_type"] == java["timestamp_type"]
        assert batch["crc_valid"] is java["crc_valid"] is True
        assert batch["base_offset"] + batch["last_offset_delta"] == java["last_offset"]
        for field in ("base_offset", "max_timestamp", "producer_id", "producer_epoch",
                      "base_sequence", "is_transactional", "is_control",
                      "partition_leader_epoch"):
            assert batch[field] == java[field], field


def test_log_append_time_gives_every_record_the_batch_time(manifest):
    (batch,), _ = decode_records(java_fixture("2_lz4_logappend"))
    assert batch["timestamp_type"] == "LogAppendTime"
    assert {r["timestamp"] for r in batch["records"]} == {batch["max_timestamp"]}
    assert batch["max_timestamp"] != batch["base_timestamp"]


def test_delete_horizon_flag():
    (batch,), _ = decode_records(java_fixture("2_none_deletehorizon"))
    assert batch["has_delete_horizon"] and batch["attributes"] & 0x40
    assert batch["base_timestamp"] == T0 + 86_400_000


def test_header_fields_of_a_transactional_zstd_batch():
    (batch,), _ = decode_records(java_fixture("2_zstd_transactional"), base=1000)
    assert batch["is_transactional"] and not batch["is_control"]
    assert (batch["producer_id"], batch["producer_epoch"], batch["base_sequence"]) == (4243, 1, 0)
    assert batch["compression"] == "zstd" and batch["records_count"] == 5
    assert batch["position"] == 1000 and batch["magic"] == 2
    assert batch["batch_length"] == len(java_fixture("2_zstd_transactional")) - 12


def _records_for_builders():
    big = bytes(range(256)) * 40  # multi-byte varint lengths
    return [
        (0, T0, b"key-0", b"value-0", [("trace-id", b"abc")]),
        (1, T0 - 5_000, None, big, []),  # negative timestamp delta
        (2, T0 + 86_400_000, b"k" * 300, None, [("clé", None), ("", b"")]),
        (3, T0 + 1, b"", b"", [("h%d" % i, b"v" * i) for i in range(20)]),
    ]


@pytest.mark.parametrize("builder", [KafkaPythonBuilder, AiokafkaBuilder],
                         ids=["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_values_in_equal_values_out(builder, codec):
    records = _records_for_builders()
    batch_builder = builder(2, codec, False, 77, 2, 40, 1 << 22)
    for offset, timestamp, key, value, headers in records:
        batch_builder.append(offset, timestamp, key, value, headers)
    data = bytes(batch_builder.build())
    batches, problems = decode_records(data, checks=True, partial_ok=False)
    assert problems == []
    assert values_of(batches) == [(o, t, k, v, h) for o, t, k, v, h in records]
    assert batches[0]["max_timestamp"] == T0 + 86_400_000
    assert batches[0]["base_sequence"] == 40
    assert batches[0]["compression"] == ["none", "gzip", "snappy", "lz4", "zstd"][codec]


def test_kafkajs_snappy_batch_from_a_real_broker():
    (_, _, at, records), _ = kafkajs_fetch("v4_response_snappy")
    (batch,), problems = decode_records(records, base=at)
    assert problems == []
    assert batch["compression"] == "snappy" and batch["position"] == at
    assert values_of([batch]) == [(0, 1549293228209, b"key-149",
                                   b"value-149-2019-02-04T15:13:48.187Z", [])]


@pytest.mark.parametrize("segment", SEGMENTS, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_real_broker_segment_all_batches_valid(segment):
    """Every batch (magic 0 and 1: every outer message) kafka-dump-log found, at its position,
    with its records' offsets; CRCs valid; checks silent but for compaction's removed records."""
    data = segment.read_bytes()
    batches, problems = decode_records(data, checks=True, partial_ok=False)
    expected = oracle(segment)
    compacted = [b for b in expected if b["records"] and "baseOffset" in b  # records removed
                 and b["records"] != list(range(int(b["baseOffset"]), int(b["lastOffset"]) + 1))]
    assert [(p.check, p.severity) for p in problems] == [("offset_delta_order", "info")] * len(compacted)
    assert [b["position"] for b in batches] == [int(b["position"]) for b in expected]
    assert all(b["crc_valid"] for b in batches)
    assert ([r["offset"] for b in batches for r in b["records"]]
            == [offset for b in expected for offset in b["records"]])
    last = batches[-1]
    assert last["position"] + 12 + last.get("batch_length", last.get("message_size")) == len(data)


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview], ids=["bytes", "bytearray", "view"])
def test_any_buffer_type_decodes_the_same(wrap):
    data = java_fixture("2_none_create") + java_fixture("2_gzip_create")
    assert decode_records(wrap(data)) == decode_records(data)


def test_bad_crc_is_reported_with_expected_and_found():
    data = bytearray(java_fixture("2_none_create"))
    data[-1] ^= 0x01
    (batch,), problems = decode_records(bytes(data), path="p", base=100)
    assert batch["crc_valid"] is False
    (problem,) = problems
    assert (problem.check, problem.severity, problem.offset) == ("crc", "error", 117)
    assert problem.found == batch["crc"] and problem.expected != problem.found
    assert problem.path == "p → batch[0]"


def _single(body: bytes, count: int = 1, **header) -> tuple[dict, list]:
    (batch,), problems = decode_records(v2_batch(record(body), count, **header), base=50)
    return batch, problems


def test_varint_longer_than_5_bytes():
    body = b"\x00" + varint(0) + b"\x80\x80\x80\x80\x80\x01" + varint(-1) + varint(-1) + b"\x00"
    batch, [problem] = _single(body)
    assert problem.check == "varint_bounds" and problem.offset == 50 + 61
    assert batch["records"] == []


def test_varint_value_beyond_32_bits():
    body = b"\x00" + varint(0) + uvarint(1 << 33) + varint(-1) + varint(-1) + b"\x00"
    _, [problem] = _single(body)
    assert problem.check == "varint_bounds" and "32 bits" in problem.what


def test_varlong_timestamp_delta_of_10_bytes_is_fine():
    batch, problems = _single(record_body(timestamp_delta=-(1 << 62)))
    assert problems == [] and batch["records"][0]["timestamp"] == T0 - (1 << 62)


def test_header_key_that_is_not_utf8_is_a_warning_and_decodes():
    headers = varint(1) + varint(2) + b"\xff\xfe" + varint(1) + b"x"
    batch, [problem] = _single(record_body(headers=headers))
    assert (problem.check, problem.severity) == ("headers", "warning")
    assert batch["records"][0]["headers"] == [{"key": "\ufffd\ufffd", "value": b"x"}]


@pytest.mark.parametrize("headers", [
    varint(1_000_000),  # count cannot fit
    varint(-3),
    varint(1) + varint(-1) + varint(-1),  # null header key
    varint(1) + varint(5) + b"ab",  # key overruns the record
    varint(1) + varint(1) + b"a" + varint(9) + b"v",  # value overruns the record
])
def test_malformed_headers(headers):
    batch, problems = _single(record_body(headers=headers))
    assert [p.check for p in problems] == ["headers"]
    assert batch["records"] == []


def test_key_length_below_minus_one():
    body = b"\x00" + varint(0) + varint(0) + varint(-2) + varint(-1) + b"\x00"
    batch, [problem] = _single(body)
    assert problem.check == "record_length" and "key length -2" in problem.what


def test_record_with_bytes_after_its_headers_is_skipped_and_the_next_decodes():
    bad = record(record_body() + b"\x00\x00")
    good = record(record_body(offset_delta=1, value=b"second"))
    (batch,), [problem] = decode_records(v2_batch(bad + good, 2))
    assert problem.check == "record_length" and problem.path.endswith("records[0]")
    assert [r["value"] for r in batch["records"]] == [b"second"]


def test_record_length_overrunning_the_batch_stops_the_batch():
    data = varint(500) + record_body()
    (batch,), [problem] = decode_records(v2_batch(data, 1), base=7)
    assert problem.check == "record_length" and problem.offset == 7 + 61


def test_records_count_mismatch():
    records = record(record_body()) + record(record_body(offset_delta=1))
    (batch,), [problem] = decode_records(v2_batch(records, 3, last_offset_delta=1), base=10)
    assert (problem.check, problem.expected, problem.found) == ("records_count", 2, 3)
    assert problem.offset == 10 + 57 and len(batch["records"]) == 2


def test_problems_inside_compressed_payload_point_at_the_payload():
    builder = KafkaPythonBuilder(2, 1, False, -1, -1, -1, 1 << 20)
    builder.append(0, T0, b"k", b"value " * 100, [])
    data = bytearray(builder.build())
    (batch,), problems = decode_records(bytes(data), base=1000)
    assert problems == [] and batch["compression"] == "gzip"
    data[-6] ^= 0xFF  # inside the gzip trailer (CRC32 of the content)
    (batch,), problems = decode_records(reseal(data), base=1000)
    assert [p.check for p in problems] == ["decompress"]
    assert problems[0].offset == 1000 + 61 and "gzip" in problems[0].what
    assert batch["records"] == []


def test_unknown_codec():
    data = bytearray(java_fixture("2_none_create"))
    data[22] |= 0x07
    (batch,), problems = decode_records(reseal(data))
    assert batch["compression"] == "unknown(7)"
    assert [(p.check, p.severity) for p in problems] == [("codec", "error")]


# zigzag varints change width at these values: 1 byte holds -64..63, 2 bytes -8192..8191
WIDTH_EDGES = [-8193, -8192, -65, -64, -1, 0, 63, 64, 8191, 8192]


def test_every_field_at_the_varint_width_edges():
    sizes = [n for n in WIDTH_EDGES if n >= 0]
    bodies, expected = [], []
    for i, delta in enumerate(WIDTH_EDGES):
        size = sizes[i % len(sizes)]
        key, value = b"k" * size, b"v" * sizes[-1 - i % len(sizes)]
        name, header_value = "h" * size, b"x" * sizes[i % 3]
        headers = (varint(1) + varint(size) + name.encode() + varint(len(header_value))
                   + header_value)
        bodies.append(record(record_body(offset_delta=8192 + delta, timestamp_delta=delta,
                                         key=key, value=value, headers=headers)))
        expected.append((8192 + delta, T0 + delta, key, value, [(name, header_value)]))
    (batch,), problems = decode_records(v2_batch(b"".join(bodies), len(bodies),
                                                 base_timestamp=T0))
    assert problems == [] and values_of([batch]) == expected


def test_zero_header_count_written_in_two_bytes():
    batch, problems = _single(record_body(headers=b"\x80\x00"))
    assert problems == [] and list(batch["records"][0]["headers"]) == []


def test_records_without_headers_are_empty_json_arrays():
    from kinspect.render.jsonl import dumps
    (_, _, at, records), _ = kafkajs_fetch("v4_response_snappy")
    (batch,), _ = decode_records(records, base=at)
    assert [list(r["headers"]) for r in batch["records"]] == [[]]
    assert dumps(batch).count('"headers":[]') == 1


def test_one_and_two_byte_varint_tables_hold_every_zigzag_value():
    from kinspect.records import batch

    for raw in range(1 << 14):
        data = bytes([raw & 0x7F | 0x80, raw >> 7]) if raw >= 0x80 else bytes([raw])
        assert batch._varint(data, 0, 5) == ((raw >> 1) ^ -(raw & 1), len(data))
        if raw < 0x80:  # the same value written in two bytes
            assert batch._varint(bytes([raw | 0x80, 0]), 0, 5) == ((raw >> 1) ^ -(raw & 1), 2)
