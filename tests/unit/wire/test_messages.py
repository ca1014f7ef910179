import json
import re
import struct
import subprocess

import pytest

from kinspect.problems import ERROR, INFO, WARNING
from kinspect.wire.apis import API_NAMES, request_header_version, response_header_version
from kinspect.wire.encode import encode_body
from kinspect.wire.layouts import layout
from kinspect.wire.messages import decode_body, decoder_source
from tests.conftest import PCAPS, REALDATA

KAFKAJS = REALDATA / "kafkajs" / "src" / "protocol" / "requests"
KEYS_BY_DIR = {name.lower(): key for key, name in API_NAMES.items()}
# A real ApiVersions v1 answer from an old broker that left out throttle_time_ms.
MISSING_THROTTLE = "apiVersions/fixtures/v1_response_missing_throttle_time.json"


def kafkajs_fixtures():
    """(id, api_key, version, kind, body) for every kafkajs request/response body fixture.

    The bodies start right after the header; for flexible versions kafkajs keeps the
    header's tagged-field count (one 0x00 byte) in front, which is dropped here.
    """
    out = []
    for path in sorted(KAFKAJS.glob("*/fixtures/v*_re*.json")):
        match = re.match(r"v(\d+)_(request|response)", path.name)
        if not match:
            continue
        key, version, kind = KEYS_BY_DIR[path.parts[-3].lower()], int(match[1]), match[2]
        body = bytes(json.loads(path.read_text())["data"])
        if layout(key, version, kind).flexible:
            assert body[0] == 0, path
            body = body[1:]
        out.append((str(path.relative_to(KAFKAJS)), key, version, kind, body))
    return out


def kafkajs(name: str) -> bytes:
    return next(body for ident, *_, body in FIXTURES if ident == name)


def capture_exchanges(pcap, port: int):
    """Every complete request and response in a capture, via tshark's TCP reassembly-free payloads.

    Yields (stream, kind, api_key, version, body, frame); frames are split by their size prefix.
    """
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-Y", "tcp.len>0 && !tcp.analysis.retransmission",
         "-T", "fields", "-e", "tcp.stream", "-e", "tcp.dstport", "-e", "tcp.payload"],
        capture_output=True, text=True, check=True).stdout
    streams: dict[tuple[str, bool], bytearray] = {}
    for line in out.splitlines():
        stream, dport, payload = line.split("\t")
        streams.setdefault((stream, int(dport) == port), bytearray()).extend(bytes.fromhex(payload))
    found = []
    for stream in sorted({s for s, _ in streams}, key=int):
        asked = {}
        for frame in split_frames(streams.get((stream, True), b"")):
            key, version, correlation = struct.unpack_from(">hhi", frame)
            pos = 8
            if request_header_version(key, version) >= 1:
                pos += 2 + max(struct.unpack_from(">h", frame, pos)[0], 0)
            if request_header_version(key, version) >= 2:
                assert frame[pos] == 0
                pos += 1
            asked[correlation] = (key, version)
            found.append((stream, "request", key, version, bytes(frame[pos:]), bytes(frame)))
        for frame in split_frames(streams.get((stream, False), b"")):
            correlation = struct.unpack_from(">i", frame)[0]
            if correlation not in asked:
                continue  # the capture starts after the request
            key, version = asked[correlation]
            pos = 4 + response_header_version(key, version)
            found.append((stream, "response", key, version, bytes(frame[pos:]), bytes(frame)))
    return found


def split_frames(data: bytes):
    pos = 0
    while pos + 4 <= len(data):
        size = struct.unpack_from(">i", data, pos)[0]
        yield data[pos + 4:pos + 4 + size]
        pos += 4 + size


FIXTURES = kafkajs_fixtures()


def errors(problems):
    return [str(p) for p in problems if p.severity == ERROR]


# ---------------------------------------------------------------- real bodies

def test_kafkajs_fixtures_cover_many_apis():
    assert len(FIXTURES) > 150
    assert len({key for _, key, *_ in FIXTURES}) >= 30


@pytest.mark.parametrize("ident, key, version, kind, body", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_kafkajs_bodies_decode_cleanly(ident, key, version, kind, body):
    decoded, problems = decode_body(key, version, kind, body)
    if ident == MISSING_THROTTLE:
        assert [p.path for p in problems] == ["ApiVersionsResponse v1 → throttle_time_ms"]
        assert problems[0].what == "truncated: need 4 bytes, 0 left"
        assert len(decoded["api_keys"]) == 34  # everything before the fault is kept
        return
    assert problems == [] or not errors(problems), [str(p) for p in problems]
    assert decoded or body == b""


def test_metadata_v5_values():
    body, problems = decode_body(3, 5, "response", kafkajs("metadata/fixtures/v5_response.json"))
    assert problems == []
    assert [(b["node_id"], b["host"], b["port"]) for b in body["brokers"]] == [
        (2, "10.3.220.89", 9098), (1, "10.3.220.89", 9095), (0, "10.3.220.89", 9092)]
    assert body["cluster_id"] == "wyOEk0m7Tn-08oGZjtVgEg"
    assert body["controller_id"] == 2
    (topic,) = body["topics"]
    assert topic["name"].startswith("test-topic-f5e17a86896ebfdeb429")
    assert topic["partitions"] == [{"error_code": 0, "partition_index": 0, "leader_id": 0,
                                    "replica_nodes": [0], "isr_nodes": [0], "offline_replicas": []}]


def test_error_codes_and_messages_are_read():
    body, _ = decode_body(45, 0, "response",
                          kafkajs("alterPartitionReassignments/fixtures/v0_response_error.json"))
    (partition,) = body["responses"][0]["partitions"]
    assert partition == {"partition_index": 0, "error_code": 39,
                         "error_message": "Replica assignment is invalid."}
    body, _ = decode_body(10, 1, "response",
                          kafkajs("findCoordinator/fixtures/v1_response_version_error.json"))
    assert body["error_code"] == 35 and body["error_message"] is None


def test_record_sets_are_expanded_with_their_field_path():
    body, problems = decode_body(1, 4, "response", kafkajs("fetch/fixtures/v4_response_mixed_formats.json"))
    assert not errors(problems)
    batches = body["responses"][0]["partitions"][0]["records"]
    assert {b["magic"] for b in batches} == {1, 2}
    assert all(b["crc_valid"] for b in batches)
    body, problems = decode_body(
        1, 2, "response", kafkajs("fetch/fixtures/v2_response_partial_messages_many_partitions.json"),
        base=8)
    assert problems and problems[0].path == "FetchResponse v2 → responses[0] → partitions[0] → records → batch[0]"
    assert problems[0].offset == 8 + 0x35  # frame-absolute: base + the batch's place in the body


def test_raw_records_keeps_bytes():
    raw = kafkajs("produce/fixtures/v7_request.json")
    body, _ = decode_body(0, 7, "request", raw, raw_records=True)
    records = body["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, bytes) and len(records) == 1041 and records in raw


def test_ndpi_capture_every_body_decodes(realdata, tshark):
    exchanges = capture_exchanges(realdata / "ndpi" / "kafka.pcapng", 9092)
    seen = {(key, version, kind) for _, kind, key, version, *_ in exchanges}
    assert {(18, 3, "response"), (3, 12, "response"), (0, 9, "request"), (22, 4, "response"),
            (0, 3, "request"), (3, 2, "response"), (18, 0, "response")} <= seen
    for stream, kind, key, version, body, _ in exchanges:
        decoded, problems = decode_body(key, version, kind, body)
        if (key, version, kind) == (18, 0, "request"):
            # librdkafka's ApiVersions v0 request carries 4 extra bytes; tshark flags them too
            assert [(p.severity, p.what) for p in problems] == [(WARNING, "4 trailing bytes after the body")]
            continue
        assert problems == [], (stream, key, version, kind, [str(p) for p in problems])


def test_ndpi_flexible_values_and_tagged_fields(realdata, tshark):
    exchanges = {(s, kind, key): body for s, kind, key, _, body, _ in
                 capture_exchanges(realdata / "ndpi" / "kafka.pcapng", 9092)}
    metadata, _ = decode_body(3, 12, "response", exchanges[("8", "response", 3)])
    (topic,) = metadata["topics"]
    assert topic["name"] == "sampleTopic"
    assert topic["topic_id"] == "c4a4c0df-715f-41b7-9ca4-95c62744d56c"
    assert metadata["cluster_id"] == "nE-OJv2oQyuCcxLzMxUcFw"
    versions, _ = decode_body(18, 3, "response", exchanges[("8", "response", 18)])
    assert versions["finalized_features_epoch"] == 0  # a tagged field (tag 1), by name
    assert "_unknown_tags" not in versions
    assert {"api_key": 1, "min_version": 0, "max_version": 15} in versions["api_keys"]
    request, _ = decode_body(18, 3, "request", exchanges[("8", "request", 18)])
    assert request == {"client_software_name": "apache-kafka-java", "client_software_version": "3.6.1"}
    produce, _ = decode_body(0, 9, "request", exchanges[("8", "request", 0)])
    assert produce["acks"] == -1 and produce["topic_data"][0]["name"] == "sampleTopic"
    assert produce["topic_data"][0]["partition_data"][0]["records"][0]["magic"] == 2


def test_go_sniffer_kafka_python_capture(realdata, tshark):
    exchanges = capture_exchanges(realdata / "go-sniffer" / "kafka.pcap", 9092)
    assert {(key, version) for _, _, key, version, *_ in exchanges} >= {(3, 0), (0, 1)}
    for _, kind, key, version, body, _ in exchanges:
        decoded, problems = decode_body(key, version, kind, body)
        assert problems == [], [str(p) for p in problems]
        if (key, kind) == (0, "request"):
            (batch,) = decoded["topic_data"][0]["partition_data"][0]["records"]
            assert batch["magic"] == 0


def test_kafka_rust_fetch_v0_bodies(realdata):
    raw = (realdata / "kafka-rust" / "fetch1.mytopic.1p.nocompression.kafka.0821").read_bytes()
    assert struct.unpack_from(">i", raw)[0] == 2  # correlation id, then the v0 body
    body, problems = decode_body(1, 0, "response", raw[4:], base=4)
    assert not errors(problems)
    (topic,) = body["responses"]
    (partition,) = topic["partitions"]
    assert topic["topic"] == "my-topic" and partition["high_watermark"] == 42
    assert len(partition["records"]) == 42
    expected = (realdata / "kafka-rust" / "fetch1.txt").read_bytes().split(b"\n")[:42]
    assert [m["records"][0]["value"] for m in partition["records"]] == expected


def recorded_captures():
    """The project's captures from real clients and brokers, with their broker port."""
    found = []
    for manifest in sorted(PCAPS.glob("*.manifest.json")):
        info = json.loads(manifest.read_text())
        if "bootstrap" in info["broker"]:
            port = int(info["broker"]["bootstrap"].rsplit(":", 1)[1])
        else:  # the broker's port as tcpdump was told it ("tcp port N")
            port = int(info["capture"]["argv"][-1].rsplit(" ", 1)[1])
        found.append((PCAPS / info["file"], port))
    return found


def test_recorded_captures_decode_without_problems_and_round_trip(tshark):
    captures = recorded_captures()
    assert len(captures) >= 3, f"expected the recorded captures in {PCAPS}"
    versions = set()
    for pcap, port in captures:
        for _, kind, key, version, body, _ in capture_exchanges(pcap, port):
            decoded, problems = decode_body(key, version, kind, body)
            if (key, version, kind) == (2, 0, "response") and "legacy" in pcap.name:
                # Tansu leaves out ListOffsets v0's old_style_offsets (pcaps/README.md): a real
                # broker bug, which must be reported where it is.
                assert [p.path.rsplit(" → ", 1)[1] for p in problems] == ["old_style_offsets"]
                continue
            assert problems == [], (pcap.name, key, version, kind, [str(p) for p in problems])
            raw_decoded, _ = decode_body(key, version, kind, body, raw_records=True)
            assert encode_body(key, version, kind, raw_decoded) == body, (pcap.name, key, version, kind)
            versions.add((key, version))
    assert {(0, 9), (0, 10), (1, 16), (3, 12), (18, 4)} <= versions  # what tshark 4.0 cannot read


# ---------------------------------------------------------------- kio as an independent encoder

def test_kio_encoded_bodies_read_back_the_same_values():
    import dataclasses
    import datetime
    import io
    import itertools
    import uuid

    from kio.index import load_request_schema, load_response_schema
    from kio.schema.errors import ErrorCode
    from kio.schema.index import api_key_map, schema_name_map
    from kio.serial import entity_writer
    from kio.serial._introspect import (EntityField, EntityTupleField, PrimitiveTupleField,
                                        classify_field, get_schema_field_type, is_optional)

    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    zero_uuid = "00000000-0000-0000-0000-000000000000"
    timed = ("timedelta_i32", "timedelta_i64", "datetime_i64")

    def value(kafka_type, n):
        return {
            "bool": lambda: n % 2 == 1, "int8": lambda: n % 100 - 50,
            "int16": lambda: n * 7 % 30000 - 1, "uint16": lambda: n * 7 % 60000,
            "int32": lambda: n * 1000003 % 2 ** 31 - 5, "int64": lambda: n * 10 ** 12 + 3,
            "float64": lambda: n + 0.25, "error_code": lambda: list(ErrorCode)[n % len(ErrorCode)],
            "timedelta_i32": lambda: datetime.timedelta(milliseconds=n * 17),
            "timedelta_i64": lambda: datetime.timedelta(milliseconds=n * 17),
            "datetime_i64": lambda: epoch + datetime.timedelta(milliseconds=1_700_000_000_000 + n),
            "uuid": lambda: uuid.UUID(int=n * 0x1234567890ABCDEF1234567 % 2 ** 128),
            "string": lambda: f"s{n}-é", "bytes": lambda: bytes(range(n % 7 + 1)),
            "records": lambda: bytes(range(n % 7 + 1)),
        }[kafka_type]()

    def build(cls, counter):
        values = {}
        for f in dataclasses.fields(cls):
            kind, n = classify_field(f), next(counter)
            if isinstance(kind, EntityField):
                values[f.name] = None if is_optional(f) and n % 3 == 0 else build(kind.type_, counter)
            elif isinstance(kind, EntityTupleField):
                values[f.name] = tuple(build(kind.type_, counter) for _ in range(n % 3 + 1))
            elif isinstance(kind, PrimitiveTupleField):
                values[f.name] = tuple(value(get_schema_field_type(f), n + i) for i in range(n % 4))
            elif is_optional(f) and n % 4 == 0:
                values[f.name] = None
            else:
                values[f.name] = value(get_schema_field_type(f), n)
        return cls(**values)

    def plain(v):  # kio's value → kinspect's shape and key
        if dataclasses.is_dataclass(v):
            out = {}
            for f in dataclasses.fields(v):
                kafka_type, x = f.metadata.get("kafka_type"), getattr(v, f.name)
                key = f.name.rstrip("_")
                if kafka_type in timed and not key.endswith("_ms"):
                    key += "_ms"  # kio drops the unit from the name of time-typed fields
                if x is None and kafka_type == "uuid":
                    out[key] = zero_uuid   # kio writes a null uuid as zeros
                elif x is None and kafka_type == "datetime_i64":
                    out[key] = -1
                else:
                    out[key] = plain(x)
            return out
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        if isinstance(v, ErrorCode):
            return v.value
        if isinstance(v, datetime.datetime):
            return round((v - epoch).total_seconds() * 1000)
        if isinstance(v, datetime.timedelta):
            return round(v.total_seconds() * 1000)
        if isinstance(v, uuid.UUID):
            return str(v)
        return v

    def tagged(fields, acc):
        for f in fields:
            if f.tag is not None:
                acc.add(f.key)
            tagged(f.fields, acc)
        return acc

    def same(expected, got, where, optional):
        if isinstance(expected, dict):
            for key, v in expected.items():
                if key in got:
                    same(v, got[key], f"{where}.{key}", optional)
                else:  # a tagged field kio left out because it held its default
                    assert key in optional, f"{where}.{key} missing"
        elif isinstance(expected, list):
            assert isinstance(got, list) and len(got) == len(expected), where
            for i, (a, b) in enumerate(zip(expected, got)):
                same(a, b, f"{where}[{i}]", optional)
        else:
            assert got == expected, f"{where}: {got!r} != {expected!r}"

    checked = 0
    for key, name in api_key_map.items():
        for version in schema_name_map[name]:
            for kind, load in (("request", load_request_schema), ("response", load_response_schema)):
                lay = layout(key, version, kind)
                if lay is None:
                    continue  # newer than our spec snapshot; test_apis pins the list
                cls = load(key, version)
                entity = build(cls, itertools.count(1))
                out = io.BytesIO()
                entity_writer(cls)(out, entity)
                raw = out.getvalue()
                body, problems = decode_body(key, version, kind, raw, raw_records=True)
                assert problems == [], (name, version, kind, [str(p) for p in problems])
                same(plain(entity), body, f"{name} {kind} v{version}", tagged(lay.fields, set()))
                assert encode_body(key, version, kind, body) == raw, (name, version, kind)
                checked += 1
    assert checked > 550


# ---------------------------------------------------------------- malformed bodies

TRUNCATION_SAMPLES = [
    (0, 7, "request", "produce/fixtures/v7_request.json"),
    (1, 11, "response", "fetch/fixtures/v11_response.json"),
    (1, 11, "request", "fetch/fixtures/v11_request.json"),
    (3, 5, "response", "metadata/fixtures/v5_response.json"),
    (46, 0, "response", "listPartitionReassignments/fixtures/v0_response.json"),
    (11, 5, "response", "joinGroup/fixtures/v5_response.json"),
    (32, 1, "response", "describeConfigs/fixtures/v1_response.json"),
]


@pytest.mark.parametrize("key, version, kind, name", TRUNCATION_SAMPLES)
def test_truncated_at_every_byte_gives_a_partial_tree_and_the_fault(key, version, kind, name):
    full = kafkajs(name)
    prefix = decode_body(key, version, kind, b"")[1][0].path.split(" → ")[0]
    for cut in range(len(full)):
        body, problems = decode_body(key, version, kind, full[:cut], base=100)
        faults = [p for p in problems if p.severity == ERROR and p.check == "body_structure"]
        assert len(faults) == 1, (cut, [str(p) for p in problems])
        fault = faults[0]
        assert fault.path.startswith(prefix + " → ")
        assert 100 <= fault.offset <= 100 + cut
        assert re.match(r"truncated: need \d+ bytes, \d+ left$|\w+ length \d+ exceeds remaining \d+$",
                        fault.what), fault.what
        assert isinstance(body, dict)


def test_truncation_inside_records_names_the_partition():
    full = kafkajs("fetch/fixtures/v11_response.json")
    body, problems = decode_body(1, 11, "response", full[:-20])
    fault = next(p for p in problems if p.check == "body_structure")
    assert fault.path == "FetchResponse v11 → responses[0] → partitions[0] → records"
    assert re.fullmatch(r"records length \d+ exceeds remaining \d+", fault.what)
    partition = body["responses"][0]["partitions"][0]
    assert partition["high_watermark"] == 3 and "records" not in partition


def test_truncated_fixed_fields_keep_those_that_fit():
    full = kafkajs("produce/fixtures/v7_response.json")
    body, problems = decode_body(0, 7, "response", full[:-10])
    (fault,) = problems
    partition = body["responses"][0]["partition_responses"][0]
    assert partition == {"index": 0, "error_code": 0, "base_offset": 0, "log_append_time_ms": -1}
    assert fault.path == "ProduceResponse v7 → responses[0] → partition_responses[0] → log_start_offset"
    assert (fault.what, fault.offset) == ("truncated: need 8 bytes, 2 left", len(full) - 12)


def test_negative_array_length():
    body, problems = decode_body(3, 5, "response", struct.pack(">ii", 0, -5))
    assert body == {"throttle_time_ms": 0}
    assert (problems[0].what, problems[0].path, problems[0].offset) == (
        "array length -5", "MetadataResponse v5 → brokers", 8)


def test_string_longer_than_the_body():
    raw = struct.pack(">ii", 0, 1) + struct.pack(">ih", 7, -2) + b"host"
    _, problems = decode_body(3, 5, "response", raw)
    assert problems[0].what == "string length -2"
    compact_70000 = bytes([0xF1, 0xA2, 0x04])  # uvarint 70001: length 70000
    raw = struct.pack(">i", 0) + b"\x02" + struct.pack(">i", 7) + compact_70000 + b"host"
    body, problems = decode_body(3, 12, "response", raw, base=10, path="x")
    assert body == {"throttle_time_ms": 0, "brokers": [{"node_id": 7}]}
    assert (problems[0].what, problems[0].path, problems[0].offset) == (
        "string length 70000 exceeds remaining 4", "x → brokers[0] → host", 10 + 12)


def test_huge_array_count_is_refused_before_allocating():
    raw = struct.pack(">i", 0) + b"\xff\xff\xff\xff\x0f"  # compact array of 2**32 - 2 brokers
    _, problems = decode_body(3, 12, "response", raw)
    assert problems[0].what.startswith("array length 4294967294 exceeds remaining")


def test_trailing_bytes_are_a_warning():
    body, problems = decode_body(12, 0, "response", b"\x00\x19junk")
    assert body == {"error_code": 25}
    assert [(p.severity, p.what, p.offset) for p in problems] == [
        (WARNING, "4 trailing bytes after the body", 2)]


def test_unknown_api_or_version():
    for key, version in ((93, 0), (0, 14), (-1, 0)):
        body, problems = decode_body(key, version, "request", b"\x00")
        assert body == {}
        assert problems[0].what.startswith(f"unknown API key {key} / version {version}")


def test_invalid_utf8_is_kept_as_bytes():
    body, problems = decode_body(12, 0, "request", b"\x00\x02\xff\xfe" + b"\x00\x00\x00\x01\x00\x01m")
    assert problems == [] and body == {"group_id": b"\xff\xfe", "generation_id": 1, "member_id": "m"}


def test_null_in_a_non_nullable_field_is_a_warning():
    body, problems = decode_body(12, 0, "request", b"\xff\xff" + b"\x00\x00\x00\x01\x00\x01m")
    assert body["group_id"] is None
    assert [(p.severity, p.path) for p in problems] == [(WARNING, "HeartbeatRequest v0 → group_id")]


def test_unknown_tagged_fields_are_kept_raw_and_known_ones_by_name():
    raw = bytearray(encode_body(18, 3, "response", {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}))
    assert raw[-1] == 0
    raw[-1:] = bytes([2, 1, 8]) + struct.pack(">q", 7) + bytes([9, 3]) + b"xyz"  # tags 1 and 9
    body, problems = decode_body(18, 3, "response", bytes(raw))
    assert problems == []
    assert body["finalized_features_epoch"] == 7
    assert body["_unknown_tags"] == {9: b"xyz"}


def test_tagged_field_size_mismatch_is_a_warning():
    raw = encode_body(18, 3, "response", {"error_code": 0, "api_keys": [], "throttle_time_ms": 0})
    raw = raw[:-1] + bytes([1, 1, 9]) + struct.pack(">q", 7) + b"!"  # int64 tag sized 9
    body, problems = decode_body(18, 3, "response", raw)
    assert body["finalized_features_epoch"] == 7
    assert [p.severity for p in problems] == [WARNING] and "used 8 of its 9 bytes" in problems[0].what


def test_api_versions_v0_fallback_for_unsupported_version():
    v0 = encode_body(18, 0, "response", {"error_code": 35, "api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": 2}]})
    body, problems = decode_body(18, 3, "response", v0)
    assert body == {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
    assert [(p.severity, p.check) for p in problems] == [(INFO, "api_versions_fallback")]
    # a different error does not trigger it
    _, problems = decode_body(18, 3, "response", struct.pack(">h", 1) + v0[2:])
    assert problems and all(p.check != "api_versions_fallback" for p in problems)


def test_nullable_struct_and_memoryview_input():
    body = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "m",
            "member_epoch": 3, "heartbeat_interval_ms": 5000, "assignment": None}
    raw = encode_body(68, 0, "response", body)
    assert decode_body(68, 0, "response", memoryview(raw)) == (body, [])
    body["assignment"] = {"topic_partitions": [
        {"topic_id": "c4a4c0df-715f-41b7-9ca4-95c62744d56c", "partitions": [0, 1]}]}
    raw = encode_body(68, 0, "response", body)
    assert decode_body(68, 0, "response", raw) == (body, [])


def test_every_known_body_version_compiles():
    from kinspect.wire.layouts import DEFINED
    from kinspect.wire.messages import _compiled

    for key, version, kind in DEFINED:
        assert callable(_compiled(key, version, kind))
    assert len(DEFINED) > 700
    assert "def decode" in decoder_source(1, 17, "response")
    assert decoder_source(1, 99, "response") is None


def test_garbage_versions_do_not_grow_the_caches():
    from kinspect.wire import messages

    before = len(messages._DECODERS)
    for version in range(100, 1100):
        decode_body(0, version, "request", b"")
    assert len(messages._DECODERS) == before


def test_mutated_real_bodies_never_raise():
    """Fuzz: random byte flips, inserts and cuts of every real body, seeded."""
    import random

    rng = random.Random(20251122)
    for _, key, version, kind, body in FIXTURES:
        if not body:
            continue
        for _ in range(40):
            mutated = bytearray(body)
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(len(mutated))
                choice = rng.random()
                if choice < 0.6:
                    mutated[at] = rng.randrange(256)
                elif choice < 0.8:
                    mutated[at:at] = bytes([rng.choice((0x00, 0x7F, 0x80, 0xFF))])
                else:
                    del mutated[at:]
                    if not mutated:
                        break
            decoded, problems = decode_body(key, version, kind, bytes(mutated), raw_records=True)
            assert isinstance(decoded, dict)
            assert all(p.check != "decoder_error" for p in problems), [str(p) for p in problems]


def test_arrays_of_fixed_size_structs_fast_path_and_its_fallback():
    entries = [{"api_key": k, "min_version": 0, "max_version": k % 5} for k in range(40)]
    body = {"error_code": 0, "api_keys": entries, "throttle_time_ms": 0}
    raw = encode_body(18, 3, "response", body)
    assert decode_body(18, 3, "response", raw) == (body, [])
    entries[7]["_unknown_tags"] = {3: b"\x01"}  # a tagged field in one element: general path
    raw = encode_body(18, 3, "response", body)
    assert decode_body(18, 3, "response", raw) == (body, [])
    decoded, problems = decode_body(18, 3, "response", raw[:60])  # does not fit: partial
    assert decoded["api_keys"][:7] == entries[:7]
    assert decoded["api_keys"][7] == {"api_key": 7, "min_version": 0, "max_version": 2}
    assert problems[0].path.startswith("ApiVersionsResponse v3 → api_keys[7] → ")


def test_a_body_decodes_the_same_in_place_as_sliced_out():
    # exchange.complete decodes bodies inside their frames (start=) rather than slicing a copy
    from kinspect.decode.pipeline import DecodeRun
    from kinspect.wire.exchange import RAW

    checked = 0
    for name in ("librdkafka-produce-consume.pcapng", "kafka39-legacy.pcap", "java-transactions.pcap"):
        for record in DecodeRun(PCAPS / name).raw_records():
            raw = record.get(RAW)
            if raw is None:
                continue
            key, version = record["api_key"], record["api_version"]
            for kind, payload, at in (("request", raw[0], raw[1]), ("response", raw[2], raw[3])):
                if payload is None:
                    continue
                for cut in (len(payload), max(at, len(payload) - 7), at + (len(payload) - at) // 2):
                    frame = payload[:cut]
                    in_place = decode_body(key, version, kind, frame, start=at)
                    sliced = decode_body(key, version, kind, frame[at:], at)
                    assert in_place == sliced
                    checked += 1
    assert checked > 300
