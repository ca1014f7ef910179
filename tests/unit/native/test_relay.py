"""native/_relay.c's walk of Produce v10+ and Fetch v16+ responses (names_brokers) against
kinspect's own decoder: a response is handed to Python exactly when it carries KIP-951
NodeEndpoints, and whatever does not walk cleanly is handed over too. The pump's relaying is
tested against its asyncio twin in tests/unit/proxy/test_pump.py."""

import random
import struct

import pytest

from kinspect import native
from kinspect.wire.apis import response_header_version
from kinspect.wire.headers import parse_response_header
from kinspect.wire.messages import decode_body
from tests.unit.proxy.test_rewrite import ENDPOINTS, REAL, _frame
from tests.unit.native import needs_c

pytestmark = needs_c  # every test here is the C module against its twin

relay = native.relay  # built in CI: test_v2records.py asserts every accelerator is
TOPIC_ID = "5a4ee64c-7a50-4a47-b1b6-7e46e1c6d6a8"


def _decoded_endpoints(api_key, api_version, frame) -> bool:
    header = parse_response_header(frame, response_header_version(api_key, api_version), 4)
    body, problems = decode_body(api_key, api_version, "response", frame, start=4 + header[1], raw_records=True)
    assert problems == []
    return bool(body.get("node_endpoints"))


def _produce(version: int, endpoints: list, base_offset: int, error: int = 0, errors: int = 0) -> dict:
    topic = {"topic_id": TOPIC_ID} if version >= 13 else {"name": "orders"}
    partitions = [{"index": i, "error_code": error, "base_offset": base_offset + i, "log_start_offset": 6 << 24,
                   "record_errors": [{"batch_index": b, "batch_index_error_message": "bad"} for b in range(errors)],
                   "error_message": "m" if errors else None,
                   **({"current_leader": {"leader_id": 2, "leader_epoch": 5}} if error else {})} for i in range(3)]
    return {"responses": [{**topic, "partition_responses": partitions}, {**topic, "partition_responses": []}],
            "throttle_time_ms": 6, "node_endpoints": endpoints}


def _fetch(endpoints: list, high_watermark: int, error: int = 0) -> dict:
    partitions = [{"partition_index": i, "error_code": error, "high_watermark": high_watermark,
                   "aborted_transactions": [{"producer_id": 6, "first_offset": 74}] if i else None,
                   "records": bytes([0, 6, 0, 0x4A]) * i,
                   **({"current_leader": {"leader_id": 3, "leader_epoch": 1}} if error else {})} for i in range(3)]
    return {"responses": [{"topic_id": TOPIC_ID, "partitions": partitions}], "node_endpoints": endpoints}


BUILT = [(0, v, _produce(v, e, offset, error, errors)) for v in (10, 11, 12, 13)
         for e, error in ((ENDPOINTS, 6), ([], 0), (ENDPOINTS[:1], 74))
         for offset in (0, 6 << 16, (6 << 24) + 6) for errors in (0, 2)]
BUILT += [(1, v, _fetch(e, hw, error)) for v in (16, 17) for e, error in ((ENDPOINTS, 6), ([], 0))
          for hw in (5, (0x4A << 8) + 6)]


@pytest.mark.parametrize("api_key,api_version,body", BUILT)
def test_a_built_response_is_handed_over_exactly_when_it_names_brokers(api_key, api_version, body):
    frame = _frame(api_key, api_version, 7, body)
    assert relay.names_brokers(api_key, api_version, frame) == _decoded_endpoints(api_key, api_version, frame)


def test_offsets_whose_bytes_hold_a_leader_error_code_no_longer_send_produce_responses_to_python():
    frame = _frame(0, 11, 7, _produce(11, [], (6 << 24) + 6))
    assert b"\x00\x06" in frame  # rewrite_response's first check would decode it
    assert not relay.names_brokers(0, 11, frame)


def test_real_produce_and_fetch_responses_walk_as_the_decoder_reads_them():
    real = [(k, v, f) for k, v, f in REAL if (k == 0 and v >= 10) or (k == 1 and v >= 16)]
    assert real, "the captures hold Produce v10+ or Fetch v16+ responses"
    for api_key, api_version, frame in real:
        assert relay.names_brokers(api_key, api_version, frame) == _decoded_endpoints(api_key, api_version, frame)


def test_cut_or_garbled_responses_are_handed_over_never_misread():
    rng = random.Random(5)
    for api_key, api_version, body in BUILT[::5]:
        frame = _frame(api_key, api_version, 7, body)
        for cut in range(8, len(frame) - 1, 3):
            assert relay.names_brokers(api_key, api_version, frame[:cut])
        for _ in range(50):
            garbled = bytearray(frame)
            garbled[rng.randrange(8, len(frame))] = rng.randrange(256)
            relay.names_brokers(api_key, api_version, bytes(garbled))  # any answer, no crash, no hang
    huge = struct.pack(">ii", 20, 7) + b"\x00" + b"\xff\xff\xff\xff\x0f" + b"\x00" * 10
    assert relay.names_brokers(0, 12, huge)  # a count of 4 billion topics ends at the frame's end
    assert relay.names_brokers(3, 12, b"\x00" * 16)  # other APIs: always Python's
