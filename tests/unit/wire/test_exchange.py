"""Pairing on one connection: by correlation id, with the request deciding the response's schema."""

from __future__ import annotations

import struct

import pytest

from kinspect.wire.encode import encode_body, encode_request
from kinspect.wire import exchange
from kinspect.wire.topics import TopicNames


class Completing(exchange.Connection):
    """A connection whose output has its bodies decoded, as the pipeline does."""

    def __init__(self):
        super().__init__("10.0.0.1:5000-10.0.0.2:9092", max_frame=1 << 20, client_syn=True, server_syn=True)
        self.topics = TopicNames()

    def client_data(self, data, ts):
        return [exchange.complete(r, self.topics) for r in super().client_data(data, ts)]

    def server_data(self, data, ts):
        return [exchange.complete(r, self.topics) for r in super().server_data(data, ts)]

    def close(self, ts):
        return [exchange.complete(r, self.topics) for r in super().close(ts)]


def connection():
    return Completing()


def response(api_key, version, correlation_id, body, flexible_header=False):
    payload = struct.pack(">i", correlation_id) + (b"\x00" if flexible_header else b"")
    payload += encode_body(api_key, version, "response", body)
    return struct.pack(">i", len(payload)) + payload


METADATA_V1_RESPONSE = {"brokers": [{"node_id": 1, "host": "b1", "port": 9092, "rack": None}],
                        "controller_id": 1, "topics": []}


def test_pipelined_requests_pair_out_of_order_with_latency():
    c = connection()
    out = c.client_data(encode_request(3, 1, 7, "app", {"topics": None}), 1.0)
    out += c.client_data(encode_request(3, 1, 8, "app", {"topics": None}), 1.5)
    assert out == []
    out = c.server_data(response(3, 1, 8, METADATA_V1_RESPONSE), 2.0)
    out += c.server_data(response(3, 1, 7, METADATA_V1_RESPONSE), 3.0)
    assert [(r["correlation_id"], r["latency_ms"]) for r in out] == [(8, 500.0), (7, 2000.0)]
    assert out[0]["response"]["brokers"][0]["host"] == "b1"
    assert out[0]["client_id"] == "app" and out[0]["problems"] == []


def test_acks_zero_produce_expects_no_response():
    c = connection()
    body = {"transactional_id": None, "acks": 0, "timeout_ms": 100, "topic_data": []}
    out = c.client_data(encode_request(0, 3, 1, "p", body), 1.0)
    assert len(out) == 1 and out[0]["response_expected"] is False and out[0]["response"] is None
    assert c.close(2.0) == []


def test_unanswered_and_orphan():
    c = connection()
    c.client_data(encode_request(3, 1, 1, "app", {"topics": None}), 1.0)
    out = c.server_data(response(3, 1, 99, METADATA_V1_RESPONSE), 2.0)
    assert out[0]["type"] == "orphan_response" and out[0]["correlation_id"] == 99
    left = c.close(3.0)
    assert left[0]["correlation_id"] == 1 and left[0]["response"] is None
    assert "no response" in left[0]["problems"][-1]["what"]


def test_api_versions_response_header_is_v0_even_when_flexible():
    c = connection()
    c.client_data(encode_request(18, 3, 5, "c", {"client_software_name": "x", "client_software_version": "1"}), 1.0)
    body = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 9}],
            "throttle_time_ms": 0}
    out = c.server_data(response(18, 3, 5, body, flexible_header=False), 1.1)
    assert out[0]["response"]["api_keys"][0]["max_version"] == 9 and not out[0]["problems"]


def test_api_versions_v0_fallback_with_unsupported_version():
    c = connection()
    c.client_data(encode_request(18, 3, 5, "c", {"client_software_name": "x", "client_software_version": "1"}), 1.0)
    v0 = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
    out = c.server_data(response(18, 0, 5, v0), 1.1)
    assert out[0]["error_codes"] == ["UNSUPPORTED_VERSION"]
    assert out[0]["response"]["api_keys"][0]["max_version"] == 2
    assert [p["severity"] for p in out[0]["problems"]] == ["info"]


def test_flexible_response_header_and_error_names():
    c = connection()
    c.client_data(encode_request(10, 3, 2, "c", {"key": "g", "key_type": 0}), 1.0)
    body = {"throttle_time_ms": 0, "error_code": 15, "error_message": None, "node_id": -1, "host": "",
            "port": -1}
    out = c.server_data(response(10, 3, 2, body, flexible_header=True), 1.2)
    assert out[0]["error_codes"] == ["COORDINATOR_NOT_AVAILABLE"] and not out[0]["problems"]


def test_correlation_id_reused_before_response():
    c = connection()
    c.client_data(encode_request(3, 1, 1, "app", {"topics": None}), 1.0)
    out = c.client_data(encode_request(3, 1, 1, "app", {"topics": None}), 2.0)
    assert len(out) == 1 and "reused" in out[0]["problems"][-1]["what"]


def test_malformed_response_body_keeps_the_partial_tree():
    c = connection()
    c.client_data(encode_request(3, 1, 1, "app", {"topics": None}), 1.0)
    whole = response(3, 1, 1, METADATA_V1_RESPONSE)
    cut = whole[4:-6]
    out = c.server_data(struct.pack(">i", len(cut)) + cut, 2.0)
    assert out[0]["response"]["brokers"][0]["host"] == "b1"
    error = [p for p in out[0]["problems"] if p["severity"] == "error"][0]
    assert error["path"].startswith("MetadataResponse v1") and error["offset"] > 4


def test_unknown_api_key_is_reported_not_fatal():
    c = connection()
    frame = struct.pack(">ihhih", 12, 999, 0, 1, 2) + b"ab"
    c.client_data(frame, 1.0)
    out = c.server_data(struct.pack(">ii", 4, 1), 1.5)
    assert out[0]["api_name"] == "Unknown(999)" and out[0]["request"] is None
    assert "unknown API key 999" in out[0]["problems"][0]["what"]


def test_bodies_stay_raw_until_completed():
    c = exchange.Connection("a-b", max_frame=1 << 20, client_syn=True, server_syn=True)
    c.client_data(encode_request(3, 1, 1, "app", {"topics": None}), 1.0)
    out = c.server_data(response(3, 1, 1, METADATA_V1_RESPONSE), 2.0)
    assert out[0]["request"] is None and exchange.RAW in out[0]
    done = exchange.complete(out[0], TopicNames())
    assert exchange.RAW not in done and done["response"]["brokers"][0]["node_id"] == 1


@pytest.mark.parametrize("version", [0, 2, 3, 7, 9, 11])
def test_produce_acks_read_without_decoding(version):
    body = {"transactional_id": "tx" if version >= 3 else None, "acks": 0, "timeout_ms": 5, "topic_data": []}
    frame = encode_request(0, version, 1, "p", body)
    header = exchange.parse_request_header(frame[4:])
    assert exchange.produce_acks(version, frame[4:], header.size) == 0
    body["acks"] = -1
    frame = encode_request(0, version, 1, "p", body)
    assert exchange.produce_acks(version, frame[4:], header.size) == -1


@pytest.mark.parametrize("transactional_id", [None, "", "t", "x" * 126, "x" * 127, "x" * 300])
def test_produce_acks_past_transactional_ids_of_one_and_two_byte_lengths(transactional_id):
    body = {"transactional_id": transactional_id, "acks": 1, "timeout_ms": 5, "topic_data": []}
    payload = encode_request(0, 10, 1, "p", body)[4:]
    at = exchange.parse_request_header(payload).size
    assert exchange.produce_acks(10, payload, at) == 1
    acks_end = len(payload) - 6  # timeout_ms, an empty topic_data, no tagged fields follow
    for cut in range(at, acks_end):  # a body cut short before acks ends: unknown, no fault
        assert exchange.produce_acks(10, payload[:cut], at) is None
    assert exchange.produce_acks(10, payload[:acks_end], at) == 1


def test_unanswered_requests_are_written_out_past_twice_max_frame():
    """A capture of one direction: requests never answered go out early, not into memory."""
    import struct as _struct

    from kinspect.wire.exchange import Connection as _Connection

    conn = _Connection("c-s", max_frame=1024, client_syn=True, server_syn=True)
    out = []
    for cid in range(10):
        body = _struct.pack(">hhih", 18, 0, cid, 1) + b"c" + bytes(480)
        out += conn.client_data(_struct.pack(">i", len(body)) + body, float(cid))
    early = [e for e in out if e.get("type") == "exchange"]
    assert [e["correlation_id"] for e in early] == [0, 1, 2, 3, 4, 5]
    assert "twice --max-frame" in early[0]["problems"][-1]["what"]
    assert conn.held[0] <= 2048 and len(conn.pending) == 4
    assert len(conn.close(11.0)) == 4 and conn.held[0] == 0


# -- repeated notices fold into a count (issue 30, item 7) ---------------------------------------

def _notices(records, kind):
    return [r for r in records if r["type"] == "notice" and r["kind"] == kind]


def _folded(records, kind):
    """(notices shown one by one, the notice counting the rest) of ``kind``."""
    notices = _notices(records, kind)
    assert notices and "more" in notices[-1] and all("more" not in n for n in notices[:-1])
    return notices[:-1], notices[-1]


def test_frames_of_size_zero_fold_into_a_count_at_the_close():
    """Zeros on port 9092 are a frame of size 0 every 4 bytes: 1,000 of them each way give ten
    notices and one that counts the rest, not 2,000 notices."""
    c = connection()
    out = c.client_data(bytes(4000), 1.0) + c.server_data(bytes(4000), 2.0)
    assert [n["what"] for n in out] == ["request header does not parse"] * exchange.NOTICES_SHOWN
    closing = c.close(3.0)
    shown, rest = _folded(out + closing, "undecodable")
    assert len(shown) == 10 and len(closing) == 1
    assert rest["more"] == 1990 and rest["size"] == 0 and rest["conn"] == c.label and rest["time"] == 3.0
    assert rest["what"] == ("1990 more undecodable notices on this connection like the ones above "
                            "(2000 in all; the first 10 are shown)")


def test_gap_and_resync_notices_fold_and_keep_their_byte_counts():
    c = connection()
    out = []
    for i in range(50):  # a frame begun, then lost past its end: a gap, and the stream hunts again
        out += c.client_data(struct.pack(">i", 100) + b"abc", 1.0 + i)
        out += c.client_gap(500, 1.0 + i)
        out += c.client_data(b"\xff" * 7, 1.0 + i)  # nothing that looks like a request: skipped
    out += c.close(99.0)
    gaps, gap_rest = _folded(out, "gap")
    assert len(gaps) == 10 and gap_rest["more"] == 40
    assert sum(n["missing"] for n in gaps) + gap_rest["missing"] == 50 * 500
    resyncs, resync_rest = _folded(out, "resync")
    assert len(resyncs) == 10 and resync_rest["more"] + 10 > 50
    assert sum(n["length"] for n in resyncs) + resync_rest["length"] == 50 * 14  # every byte, none framed
    assert len(out) == 22


def test_a_connection_with_few_notices_has_no_count():
    c = connection()
    out = c.client_data(bytes(4 * exchange.NOTICES_SHOWN), 1.0) + c.close(2.0)
    assert len(_notices(out, "undecodable")) == exchange.NOTICES_SHOWN and not any("more" in r for r in out)


def test_raw_sasl_tokens_fold_past_the_first_ten():
    from kinspect.wire.encode import encode_body

    c = connection()
    c.client_data(encode_request(17, 0, 1, "app", {"mechanism": "GSSAPI"}), 1.0)
    answer = struct.pack(">i", 1) + encode_body(17, 0, "response", {"error_code": 0, "mechanisms": ["GSSAPI"]})
    c.server_data(struct.pack(">i", len(answer)) + answer, 1.5)
    token = struct.pack(">i", 6) + b"\x60\x82\x01\x00\x00\x00"
    out = c.client_data(token * 25, 2.0) + c.close(3.0)
    tokens, rest = _folded(out, "sasl_token")
    assert len(tokens) == 10 and rest["more"] == 15 and rest["size"] == 15 * 6


def test_responses_with_no_request_fold_past_the_first_ten():
    """A capture of the broker's side only: every response an orphan, 8 bytes each."""
    from kinspect.live.stats import LiveStats
    from kinspect.decode.summary import Summary

    c = connection()
    out = c.server_data(struct.pack(">ii", 4, 7) * 25, 1.0)
    assert [(r["type"], r["correlation_id"]) for r in out] == [("orphan_response", 7)] * 10
    closing = c.close(2.0)
    assert len(closing) == 1 and closing[0]["type"] == "notice" and closing[0]["kind"] == "orphan_response"
    assert closing[0]["more"] == 15 and closing[0]["response_size"] == 15 * 8
    assert closing[0]["what"] == ("15 more responses with no request seen on this connection like the ones "
                                  "above (25 in all; the first 10 are shown)")
    totals, live = Summary(), LiveStats()
    for record in out + closing:
        totals.add(record)
        live.add(record)
    assert totals.orphans == live.orphans == 25 and not totals.notices and not live.notices
