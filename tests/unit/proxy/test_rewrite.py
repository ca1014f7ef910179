"""Broker addresses rewritten in real responses (Metadata v0-v13, FindCoordinator v0-v6) from the
committed captures, and in DescribeCluster and KIP-951 node endpoints built with kinspect's
encoder: only host and port change, the frame's length follows, the rest decodes as before."""

import struct

import pytest

from kinspect.proxy.frames import Requests, Responses
from kinspect.proxy.rewrite import Unchanged, carries_addresses, rewrite_response
from kinspect.wire.apis import response_header_version
from kinspect.wire.encode import encode_body
from kinspect.wire.headers import parse_response_header
from kinspect.wire.messages import decode_body
from tests.unit.proxy.streams import connections
from tests.unit.proxy.test_frames import CAPTURES

CAPTURES = [*CAPTURES, ("java-consumer-groups-describe.pcap", 9092), ("kafka-python-legacy-groups.pcapng", 9092),
            ("java-console-consumer-kip848.pcap", 9092)]


def _moved(node_id, host, port):
    return "proxy.example", 30000 + node_id


def _body(api_key, api_version, frame):
    header = parse_response_header(frame, response_header_version(api_key, api_version), 4)
    body, problems = decode_body(api_key, api_version, "response", frame, start=4 + header[1], raw_records=True)
    assert problems == []
    return header[0], body


def _real_responses():
    """(api key, version, frame) of every response naming brokers in the captures."""
    out = []
    for name, port in CAPTURES:
        for conn in connections(name, port).values():
            requests = Requests()
            responses = Responses(requests, carries_addresses,
                                  lambda k, v, frame: out.append((k, v, frame)) or frame, 1 << 30)
            for direction, _ts, data in conn["events"]:
                if direction == 1:
                    requests.feed(data)
                else:
                    responses.feed(data)
    return out


REAL = _real_responses()


def _addresses(api_key, api_version, body):
    if api_key == 10 and api_version < 4:
        return [(body["node_id"], body["host"], body["port"])]
    key = {3: "brokers", 10: "coordinators", 60: "brokers"}.get(api_key, "node_endpoints")
    node = "broker_id" if api_key == 60 else "node_id"
    return [(e[node], e["host"], e["port"]) for e in body.get(key) or ()]


def test_the_captures_hold_every_kind_of_real_response_naming_brokers():
    kinds = {(k, v) for k, v, _ in REAL}
    assert {(3, 0), (3, 2), (3, 12), (3, 13), (10, 0), (10, 2), (10, 6), (0, 10), (1, 16)} <= kinds


@pytest.mark.parametrize("api_key,api_version,frame", REAL, ids=[f"{k}v{v}-{i}" for i, (k, v, _) in enumerate(REAL)])
def test_real_responses_get_the_proxy_addresses_and_nothing_else_changes(api_key, api_version, frame):
    correlation_id, before = _body(api_key, api_version, frame)
    out = rewrite_response(api_key, api_version, frame, _moved)
    addresses = _addresses(api_key, api_version, before)
    if not any(node >= 0 for node, _, _ in addresses):  # a Produce or Fetch response naming no leader
        assert out is frame
        return
    assert struct.unpack_from(">i", out)[0] == len(out) - 4
    out_correlation_id, after = _body(api_key, api_version, out)
    assert out_correlation_id == correlation_id
    assert _addresses(api_key, api_version, after) == [
        (node, *(_moved(node, host, port) if node >= 0 else (host, port))) for node, host, port in addresses]
    for entry_before, entry_after in zip(*(_entries(api_key, api_version, b) for b in (before, after))):
        entry_before.pop("host"), entry_before.pop("port"), entry_after.pop("host"), entry_after.pop("port")
    assert after == before


def _entries(api_key, api_version, body):
    if api_key == 10 and api_version < 4:
        return [body]
    return body.get({3: "brokers", 10: "coordinators", 60: "brokers"}.get(api_key, "node_endpoints")) or []


def test_addresses_already_right_give_back_the_same_frame():
    api_key, api_version, frame = next(r for r in REAL if r[0] == 3)
    assert rewrite_response(api_key, api_version, frame, lambda n, h, p: (h, p)) is frame


def _frame(api_key, api_version, correlation_id, body):
    payload = struct.pack(">i", correlation_id)
    if response_header_version(api_key, api_version):
        payload += b"\x00"
    payload += encode_body(api_key, api_version, "response", body)
    return struct.pack(">i", len(payload)) + payload


ENDPOINTS = [{"node_id": 2, "host": "b2.internal", "port": 9092, "rack": None},
             {"node_id": 3, "host": "b3.internal", "port": 9093, "rack": "r1"}]


@pytest.mark.parametrize("api_key,api_version,body", [
    (60, 0, {"brokers": [{"broker_id": 1, "host": "b1", "port": 9092, "rack": None}], "cluster_id": "c",
             "controller_id": 1}),
    (60, 1, {"endpoint_type": 1, "brokers": [{"broker_id": 1, "host": "b1", "port": 9092, "rack": None},
                                             {"broker_id": 4, "host": "b4", "port": 9094, "rack": "x"}]}),
    (0, 10, {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 6, "current_leader": {"leader_id": 2, "leader_epoch": 5}}]}],
        "node_endpoints": ENDPOINTS}),
    (0, 12, {"responses": [{"name": "t", "partition_responses": [
        {"index": 1, "error_code": 6, "current_leader": {"leader_id": 3, "leader_epoch": 2}}]}],
        "node_endpoints": ENDPOINTS}),
    (1, 16, {"responses": [{"topic_id": "5a4ee64c-7a50-4a47-b1b6-7e46e1c6d6a8", "partitions": [
        {"partition_index": 0, "error_code": 6, "records": b"", "current_leader": {"leader_id": 3, "leader_epoch": 1}}]}],
        "node_endpoints": ENDPOINTS}),
    (1, 17, {"responses": [{"topic_id": "5a4ee64c-7a50-4a47-b1b6-7e46e1c6d6a8", "partitions": [
        {"partition_index": 0, "error_code": 74, "records": b"", "current_leader": {"leader_id": 2, "leader_epoch": 1}}]}],
        "node_endpoints": ENDPOINTS[:1]}),
    (10, 4, {"coordinators": [{"key": "g", "node_id": 3, "host": "b3", "port": 9093, "error_code": 0},
                              {"key": "h", "node_id": -1, "host": "", "port": -1, "error_code": 15}]}),
])
def test_built_responses_naming_brokers(api_key, api_version, body):
    frame = _frame(api_key, api_version, 42, body)
    out = rewrite_response(api_key, api_version, frame, _moved)
    assert struct.unpack_from(">i", out)[0] == len(out) - 4
    correlation_id, after = _body(api_key, api_version, out)
    _, before = _body(api_key, api_version, frame)
    assert correlation_id == 42
    assert _addresses(api_key, api_version, after) == [
        (n, *(_moved(n, h, p) if n >= 0 else (h, p))) for n, h, p in _addresses(api_key, api_version, before)]


def _cut(frame: bytes, end: int) -> bytes:
    return struct.pack(">i", end - 4) + frame[4:end]


def test_a_body_that_does_not_decode_is_left_alone():
    frame = _frame(60, 0, 1, {"brokers": [{"broker_id": 1, "host": "b1", "port": 9092}], "cluster_id": "c"})
    with pytest.raises(Unchanged):
        rewrite_response(60, 0, _cut(frame, len(frame) - 6), _moved)


@pytest.mark.parametrize("api_version", [0, 1, 2, 8, 9, 12])
def test_a_metadata_response_cut_inside_its_brokers_is_left_alone(api_version):
    """Every cut inside the brokers array (all of whose entries would be rewritten) is refused."""
    brokers = [(0, "b0.internal", 9092), (5, "b5.internal", 9093)]
    body = {"brokers": [{"node_id": n, "host": h, "port": p, "rack": "r"} for n, h, p in brokers],
            "topics": [], "cluster_id": "c", "controller_id": 0}
    frame = _frame(3, api_version, 7, body)
    whole = rewrite_response(3, api_version, frame, _moved)
    assert whole is not frame
    flexible = api_version >= 9
    brokers_at = 4 + 4 + flexible + (4 if api_version >= 3 else 0)  # size, correlation id, tags, throttle
    entries = len(encode_body(3, api_version, "response", body)) - len(
        encode_body(3, api_version, "response", {**body, "brokers": []}))
    brokers_end = brokers_at + (1 if flexible else 4) + entries
    assert rewrite_response(3, api_version, _cut(frame, brokers_end), _moved) is not frame  # the rest is not read
    for end in range(brokers_at, brokers_end):
        with pytest.raises(Unchanged):
            rewrite_response(3, api_version, _cut(frame, end), _moved)


def test_metadata_is_rewritten_in_place_never_decoded_whole(monkeypatch):
    """A Metadata response's topics can be megabytes (and its brokers, from a hostile broker,
    100,000): decoding and encoding a 2 MB one took 4 s of the relay's thread. Its broker entries
    are spliced in place instead, and every byte after them passes as it came, even bytes that do
    not decode."""
    import kinspect.proxy.rewrite as rewrite

    monkeypatch.setattr(rewrite, "decode_body", lambda *a, **k: pytest.fail("decoded"))
    monkeypatch.setattr(rewrite, "encode_body", lambda *a, **k: pytest.fail("encoded"))
    frames = [(v, f) for k, v, f in REAL if k == 3]
    assert {v for v, _ in frames} >= {0, 2, 12, 13}
    for api_version, frame in frames:
        out = rewrite_response(3, api_version, frame + b"\xff" * 3, _moved)
        assert out.endswith(b"\xff" * 3)


def test_a_body_whose_encoding_differs_is_left_alone():
    """A trailing byte after the body: decoding it again would not give the broker's bytes back."""
    frame = _frame(60, 0, 1, {"brokers": [{"broker_id": 1, "host": "b1", "port": 9092}]}) + b"\x00"
    frame = struct.pack(">i", len(frame) - 4) + frame[4:]
    with pytest.raises(Unchanged):
        rewrite_response(60, 0, frame, _moved)


def test_produce_and_fetch_responses_without_a_leader_error_are_not_decoded(monkeypatch):
    """KIP-951 endpoints come only with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH."""
    import kinspect.proxy.rewrite as rewrite

    frames = [(k, v, f) for k, v, f in REAL if k in (0, 1) and b"\x00\x06" not in f and b"\x00\x4a" not in f]
    assert {k for k, _, _ in frames} == {0, 1}
    monkeypatch.setattr(rewrite, "decode_body", lambda *a, **k: pytest.fail("decoded"))
    for api_key, api_version, frame in frames:
        assert rewrite_response(api_key, api_version, frame, _moved) is frame


def _renumbered_from_0(api_key, api_version, frame):
    """A real response with its brokers numbered from 0 (as Strimzi and Bitnami number them),
    encoded again with the same header."""
    header = parse_response_header(frame, response_header_version(api_key, api_version), 4)
    _, body = _body(api_key, api_version, frame)
    key = "broker_id" if api_key == 60 else "node_id"
    entries = [body] if api_key == 10 and api_version < 4 else _entries(api_key, api_version, body)
    numbers = {}
    for entry in entries:
        if entry[key] >= 0:
            entry[key] = numbers.setdefault(entry[key], len(numbers))
    payload = frame[4:4 + header[1]] + encode_body(api_key, api_version, "response", body)
    return struct.pack(">i", len(payload)) + payload


def _names_node_0(api_key, api_version, frame) -> bool:
    renumbered = _renumbered_from_0(api_key, api_version, frame)
    return 0 in {node for node, _, _ in _addresses(api_key, api_version, _body(api_key, api_version, renumbered)[1])}


NODE_0 = [(k, v, f) for k, v, f in REAL if k in (3, 10) and _names_node_0(k, v, f)]


@pytest.mark.parametrize("api_key,api_version,frame", NODE_0, ids=[f"{k}v{v}-{i}" for i, (k, v, _) in enumerate(NODE_0)])
def test_node_0_is_rewritten_like_any_other(api_key, api_version, frame):
    """No capture names node 0 (the lab's brokers are 1, 2, 3): the real Metadata and
    FindCoordinator responses renumbered from 0, so a rewrite that skips a falsy node id fails."""
    renumbered = _renumbered_from_0(api_key, api_version, frame)
    before = _addresses(api_key, api_version, _body(api_key, api_version, renumbered)[1])
    out = rewrite_response(api_key, api_version, renumbered, _moved)
    after = _addresses(api_key, api_version, _body(api_key, api_version, out)[1])
    assert after == [(n, *(_moved(n, h, p) if n >= 0 else (h, p))) for n, h, p in before]
    assert (0, "proxy.example", 30000) in after


def test_node_0_of_describe_cluster_is_rewritten():
    frame = _frame(60, 0, 1, {"brokers": [{"broker_id": 0, "host": "kafka-0.kafka-headless", "port": 9092},
                                          {"broker_id": 1, "host": "kafka-1.kafka-headless", "port": 9092}],
                              "cluster_id": "c", "controller_id": 0})
    out = rewrite_response(60, 0, frame, _moved)
    assert _addresses(60, 0, _body(60, 0, out)[1]) == [(0, "proxy.example", 30000), (1, "proxy.example", 30001)]


def _metadata(brokers, api_version=12):
    body = {"brokers": [{"node_id": n, "host": h, "port": p, "rack": None} for n, h, p in brokers], "topics": []}
    return _frame(3, api_version, 1, body)


def test_a_metadata_response_naming_more_than_max_brokers_is_read_that_far_only():
    frame = _metadata([(n, f"b{n}", 9092) for n in range(50)])
    told, asked = [], []
    out = rewrite_response(3, 12, frame, lambda n, h, p: asked.append(n) or _moved(n, h, p), max_brokers=20,
                           listing=lambda nodes, count: told.append((nodes, count)))
    assert told == [(set(range(20)), 50)] and asked == list(range(20))
    after = _addresses(3, 12, _body(3, 12, out)[1])
    assert after == [(n, *_moved(n, "", 0)) for n in range(20)] + [(n, f"b{n}", 9092) for n in range(20, 50)]


def test_other_responses_naming_more_than_max_brokers_are_left_alone():
    """Decoding and encoding them is what costs (4 s for 100,000 brokers); they name no cluster."""
    frame = _frame(60, 0, 1, {"brokers": [{"broker_id": n, "host": "b", "port": 9092} for n in range(30)],
                              "cluster_id": "c"})
    with pytest.raises(Unchanged, match="names 30 brokers, more than --max-brokers"):
        rewrite_response(60, 0, frame, _moved, max_brokers=20)
    assert rewrite_response(60, 0, frame, _moved, max_brokers=30) is not frame


@pytest.mark.parametrize("api_version", [0, 1, 9, 12])
def test_a_broker_host_that_is_not_utf8_is_left_as_it_came(api_version):
    body = {"brokers": [{"node_id": 1, "host": "b1", "port": 9092, "rack": None}], "topics": []}
    frame = _frame(3, api_version, 1, body)
    bad = frame.replace(b"b1", b"\xff\xfe")
    assert rewrite_response(3, api_version, bad, _moved) is bad
    assert rewrite_response(3, api_version, frame, _moved) != frame
