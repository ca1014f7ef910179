import gzip
import struct

import pytest
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder as AiokafkaBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KafkaPythonBuilder

from kinspect.records import decode_records
from tests.unit.records.conftest import (KAFKA_RUST, KAFKAJS, java_fixture, java_values,
                                         kafka_rust_fetch, values_of)
from tests.unit.records.fetch_skeleton import load_kafkajs
from tests.unit.records.handmade import legacy_message

T0 = 1_700_000_000_000
FETCH1 = ["fetch1.mytopic.1p.nocompression.kafka.0821", "fetch1.mytopic.1p.gzip.kafka.0821",
          "fetch1.mytopic.1p.snappy.kafka.0821", "fetch1.mytopic.1p.snappy.kafka.0822"]
JAVA_LEGACY = ["0_none_create", "0_gzip_create", "0_snappy_create", "0_lz4_create",
               "1_none_create", "1_gzip_create", "1_snappy_create", "1_lz4_create",
               "1_gzip_logappend", "1_none_logappend"]


@pytest.mark.parametrize("name", FETCH1)
def test_kafka_0_8_and_0_9_fetch_responses_match_the_producer_input(name):
    lines = (KAFKA_RUST / "fetch1.txt").read_bytes().split(b"\n")[:42]
    (topic, partition, at, records), = kafka_rust_fetch(name)
    batches, problems = decode_records(records, f"{topic}[{partition}]", at, checks=True)
    assert problems == []
    assert values_of(batches) == [(i, None, None, line, []) for i, line in enumerate(lines)]
    assert all(b["magic"] == 0 and b["crc_valid"] and b["timestamp"] is None for b in batches)
    assert batches[0]["position"] == at
    codec = name.split(".")[3]
    assert {b["compression"] for b in batches} == {"none" if codec == "nocompression" else codec}
    if codec != "nocompression":
        (wrapper,) = batches
        assert wrapper["offset"] == 41
        assert all(r["crc_valid"] and r["magic"] == 0 for r in wrapper["records"])


def test_fetch2_decodes_and_its_corrupted_twin_reports_the_crc():
    text = (KAFKA_RUST / "fetch2.txt").read_bytes().rstrip(b"\n")
    (_, _, at, good), = kafka_rust_fetch("fetch2.mytopic.nocompression.kafka.0900")
    (message,), problems = decode_records(good, base=at)
    assert problems == [] and message["crc_valid"]
    assert message["records"][0]["value"] == text
    (_, _, at, bad), = kafka_rust_fetch("fetch2.mytopic.nocompression.invalid_crc.kafka.0900")
    (message,), (problem,) = decode_records(bad, "fetch2", at)
    assert message["crc_valid"] is False and message["crc"] == 0x58585858
    assert (problem.check, problem.severity, problem.offset) == ("crc", "error", at + 12)
    assert (problem.expected, problem.found) == (0x7E196BB4, 0x58585858)
    assert message["records"][0]["value"] == text  # values still shown


def test_kafkajs_message_sets():
    gzipped = load_kafkajs(KAFKAJS / "messageSet/fixtures/messages_v0_GZIP.json")[4:]
    (wrapper,), problems = decode_records(gzipped, checks=True)
    assert problems == [] and wrapper["offset"] == 2 and wrapper["compression"] == "gzip"
    assert values_of([wrapper]) == [(i, None, b"key-%d" % i, b"some-value-%d" % i, [])
                                    for i in range(3)]
    plain = load_kafkajs(KAFKAJS / "messageSet/fixtures/messages_v0_uncompressed.json.json")[4:]
    messages, problems = decode_records(plain, checks=True)
    assert problems == [] and [m["position"] for m in messages] == [0, 43, 86]
    assert values_of(messages) == values_of([wrapper])


@pytest.mark.parametrize("name", JAVA_LEGACY)
def test_kafka_written_message_sets_decode_as_kafka_reads_them(name, manifest):
    batches, problems = decode_records(java_fixture(name), checks=True, partial_ok=False)
    assert problems == []
    assert values_of(batches) == java_values(manifest[name])
    magic = int(name[0])
    assert all(b["magic"] == magic and b["crc_valid"] for b in batches)
    expected_type = None if magic == 0 else (
        "LogAppendTime" if name.endswith("logappend") else "CreateTime")
    assert {b["timestamp_type"] for b in batches} == {expected_type}


def test_log_append_time_wrapper_gives_inner_messages_its_timestamp():
    (wrapper,), _ = decode_records(java_fixture("1_gzip_logappend"))
    assert wrapper["timestamp"] == T0 + 999
    assert [r["timestamp"] for r in wrapper["records"]] == [T0 + 999] * 4
    assert [r["offset"] for r in wrapper["records"]] == [200, 201, 202, 203]


def _build(builder, magic, codec, count=6):
    message_set = builder(magic, codec, 1 << 20)
    for i in range(count):
        message_set.append(i, T0 + i if magic else None, b"key-%d" % i if i != 2 else None,
                           (b"value %d " % i) * 50 if i != 3 else None)
    return bytearray(message_set.build())


@pytest.mark.parametrize("builder", [KafkaPythonBuilder, AiokafkaBuilder],
                         ids=["kafka-python", "aiokafka"])
@pytest.mark.parametrize("magic, codec", [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)])
def test_values_in_equal_values_out(builder, magic, codec):
    data = _build(builder, magic, codec)
    if codec:  # as a broker would: the wrapper gets the last offset (magic 0: inner are absolute)
        data[0:8] = struct.pack(">q", 105 if magic == 1 else 5)
    batches, problems = decode_records(bytes(data), checks=True, partial_ok=False)
    assert problems == []
    assert [b["compression"] for b in batches][:1] == [["none", "gzip", "snappy", "lz4"][codec]]
    first = 100 if codec and magic == 1 else 0
    assert values_of(batches) == [
        (first + i, T0 + i if magic else None, b"key-%d" % i if i != 2 else None,
         (b"value %d " % i) * 50 if i != 3 else None, []) for i in range(6)]


def _wrapper(inner: bytes, magic: int = 1, offset: int = 10, attributes: int = 1) -> bytes:
    return legacy_message(offset, magic, attributes, None, gzip.compress(inner))


def test_inner_message_with_a_bad_crc():
    inner = bytearray(legacy_message(0, 1, 0, b"a", b"1") + legacy_message(1, 1, 0, b"b", b"2"))
    inner[-1] ^= 0x01
    (wrapper,), [problem] = decode_records(_wrapper(bytes(inner)), base=300)
    assert [r["crc_valid"] for r in wrapper["records"]] == [True, False]
    assert wrapper["crc_valid"] is True
    assert problem.check == "crc" and problem.path.endswith("batch[0] → records[1]")
    assert problem.offset == 300 + len(_wrapper(bytes(inner))) - len(gzip.compress(bytes(inner)))


def test_nested_compression_is_reported():
    nested = _wrapper(legacy_message(0, 1, 0, b"a", b"1"), offset=0)
    (wrapper,), problems = decode_records(_wrapper(nested))
    assert [p.check for p in problems] == ["wrapper_nesting"]
    assert len(wrapper["records"]) == 1


def test_decompressed_bytes_that_are_not_a_message_set():
    (wrapper,), problems = decode_records(_wrapper(b"this is not a message set at all"))
    assert [p.check for p in problems] == ["decompress"] and wrapper["records"] == []


def test_compressed_wrapper_with_null_value():
    (wrapper,), problems = decode_records(legacy_message(0, 1, 1, None, None))
    assert [p.check for p in problems] == ["decompress"] and "null value" in problems[0].what


def test_wrapper_payload_that_does_not_decompress():
    data = legacy_message(0, 0, 2, None, b"\x7f\xff\xff\xff garbage")
    (wrapper,), [problem] = decode_records(data, base=4)
    assert problem.check == "decompress" and "snappy" in problem.what
    assert problem.offset == 4 + len(data) - len(b"\x7f\xff\xff\xff garbage")


def test_key_length_overrunning_the_message():
    data = bytearray(legacy_message(0, 0, 0, b"key", b"value"))
    struct.pack_into(">i", data, 18, 1000)
    (message,), problems = decode_records(bytes(data))
    assert [p.check for p in problems] == ["crc", "record_length"]
    assert message["records"] == []
