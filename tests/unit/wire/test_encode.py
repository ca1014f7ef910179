import struct

import pytest

from kinspect.wire.encode import EncodeError, encode_body, encode_request
from kinspect.wire.messages import decode_body
from tests.unit.wire.test_messages import FIXTURES, MISSING_THROTTLE, capture_exchanges

ROUND_TRIP = [f for f in FIXTURES if f[0] != MISSING_THROTTLE]


@pytest.mark.parametrize("ident, key, version, kind, raw", ROUND_TRIP, ids=[f[0] for f in ROUND_TRIP])
def test_decode_then_encode_reproduces_kafkajs_bodies(ident, key, version, kind, raw):
    body, _ = decode_body(key, version, kind, raw, raw_records=True)
    assert encode_body(key, version, kind, body) == raw


def test_decode_then_encode_reproduces_captured_bodies(realdata, tshark):
    exchanges = capture_exchanges(realdata / "ndpi" / "kafka.pcapng", 9092)
    exchanges += capture_exchanges(realdata / "go-sniffer" / "kafka.pcap", 9092)
    for _, kind, key, version, raw, _ in exchanges:
        body, problems = decode_body(key, version, kind, raw, raw_records=True)
        if problems:  # librdkafka's ApiVersions v0 request with 4 stray bytes
            assert (key, version, kind) == (18, 0, "request")
            raw = raw[:len(raw) - 4]
        assert encode_body(key, version, kind, body) == raw, (key, version, kind)


def test_encode_request_rebuilds_the_java_clients_frames(realdata, tshark):
    """Header v2 (flexible) with the int16 client id, and the size prefix, byte for byte."""
    requests = [e for e in capture_exchanges(realdata / "ndpi" / "kafka.pcapng", 9092)
                if e[0] == "8" and e[1] == "request"]
    assert {e[2] for e in requests} == {18, 22, 3, 0}
    for _, _, key, version, raw, frame in requests:
        correlation = struct.unpack_from(">i", frame, 4)[0]
        client_id = frame[10:10 + struct.unpack_from(">h", frame, 8)[0]].decode()
        body, _ = decode_body(key, version, "request", raw, raw_records=True)
        assert encode_request(key, version, correlation, client_id, body) == \
            struct.pack(">i", len(frame)) + frame


def test_encode_request_header_v1_and_v0():
    frame = encode_request(3, 5, 7, "cli", {"topics": None, "allow_auto_topic_creation": True})
    assert frame == (struct.pack(">ihhih", 18, 3, 5, 7, 3) + b"cli" + struct.pack(">i", -1) + b"\x01")
    frame = encode_request(7, 0, 1, "ignored", {"broker_id": 5})
    assert frame == struct.pack(">ihhii", 12, 7, 0, 1, 5)  # ControlledShutdown v0: no client id
    frame = encode_request(18, 3, 2, None, {"client_software_name": "k", "client_software_version": "1"})
    assert frame[12:14] == b"\xff\xff" and frame[14] == 0  # null client id, empty header tags


def test_missing_fields_take_kafka_defaults():
    raw = encode_body(3, 12, "request", {"topics": [{"name": "t"}]})
    body, problems = decode_body(3, 12, "request", raw)
    assert problems == []
    assert body == {"topics": [{"topic_id": "00000000-0000-0000-0000-000000000000", "name": "t"}],
                    "allow_auto_topic_creation": True,  # Kafka's default for this field
                    "include_topic_authorized_operations": False}
    raw = encode_body(2, 1, "request", {"topics": []})
    assert decode_body(2, 1, "request", raw)[0]["replica_id"] == 0


def test_tagged_fields_round_trip_sorted_with_unknown_ones():
    body = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0, "finalized_features_epoch": 5,
            "_unknown_tags": {9: b"xyz", 0x80: b""}}
    raw = encode_body(18, 3, "response", body)
    assert raw.endswith(bytes([3, 1, 8]) + struct.pack(">q", 5) + b"\x09\x03xyz" + b"\x80\x01\x00")
    assert decode_body(18, 3, "response", raw) == (body, [])


def test_strings_bytes_and_uuids_accept_the_decoders_shapes():
    body = {"group_id": b"\xff\xfe", "generation_id": 1, "member_id": "m"}
    assert decode_body(12, 0, "request", encode_body(12, 0, "request", body))[0] == body
    topic_id = "c4a4c0df-715f-41b7-9ca4-95c62744d56c"
    raw = encode_body(3, 12, "request", {"topics": [{"topic_id": topic_id, "name": None}]})
    assert bytes.fromhex(topic_id.replace("-", "")) in raw


def test_bad_input_raises_encode_error():
    with pytest.raises(EncodeError, match="unknown API key 0 / version 99"):
        encode_body(0, 99, "request", {})
    with pytest.raises(EncodeError, match="generation_id"):
        encode_body(12, 0, "request", {"group_id": "g", "generation_id": 2 ** 40, "member_id": "m"})
    with pytest.raises(EncodeError, match="group_id"):
        encode_body(12, 0, "request", {"group_id": 5, "generation_id": 1, "member_id": "m"})
    with pytest.raises(EncodeError, match=r"topics\[0\]\.name: string needs str or bytes"):
        encode_body(3, 12, "request", {"topics": [{"name": 3}]})
    with pytest.raises(EncodeError, match="topics: expected a list"):
        encode_body(3, 12, "request", {"topics": "t"})
    with pytest.raises(EncodeError, match="not a uuid"):
        encode_body(3, 12, "request", {"topics": [{"topic_id": "nope", "name": "t"}]})
