"""The relay's own header-only reading of frames (proxy/frames.py), over real clients' streams:
bytes come out as they went in, whatever the chunking; each response is paired with its request;
frames held for rewriting are exactly the responses of the APIs asked for."""

import random
import struct

import pytest

from kinspect.decode.pipeline import DecodeRun
from kinspect.proxy.frames import Requests, Responses
from kinspect.wire.encode import encode_request
from tests.conftest import PCAPS
from tests.unit.proxy.streams import connections

CAPTURES = [("librdkafka-produce-consume.pcapng", 42347), ("kafka41-librdkafka-mtu1500.pcap", 9092),
            ("java-transactions.pcap", 9092), ("kafka39-legacy.pcap", 46645), ("aiokafka-mtu1500.pcapng", 9092)]


def _chunks(data: bytes, rng: random.Random):
    pos = 0
    while pos < len(data):
        n = rng.choice((1, 2, 3, 7, 8, 9, 100, 1500, 65536))
        yield data[pos:pos + n]
        pos += n


def _decoded(name):
    """(conn label, correlation id) -> (api key, api version) of every answered exchange."""
    return {(r["conn"], r["correlation_id"]): (r["api_key"], r["api_version"])
            for r in DecodeRun(str(PCAPS / name), decode_bodies=False).raw_records()
            if r["type"] == "exchange" and r.get("response_size") is not None}


def _label(flow):
    src, sport, dst, dport = flow
    return f"{'.'.join(map(str, src))}:{sport}-{'.'.join(map(str, dst))}:{dport}"


@pytest.mark.parametrize("name,port", CAPTURES)
def test_bytes_pass_unchanged_and_every_response_is_paired(name, port):
    rng = random.Random(name)
    expected = _decoded(name)
    seen_responses = 0
    for flow, conn in connections(name, port).items():
        held = []

        def rewrite(api_key, api_version, frame):
            held.append((api_key, api_version, frame))
            return frame

        requests = Requests()
        responses = Responses(requests, lambda k, v: True, rewrite, 1 << 30)
        relayed = bytearray()
        for direction, _ts, data in conn["events"]:  # in capture order, as the relay gets them
            if direction == 1:
                for chunk in _chunks(data, rng):
                    requests.feed(chunk)
            else:
                for chunk in _chunks(data, rng):
                    relayed += responses.feed(chunk)
        assert bytes(relayed) == conn["server"]
        # every response frame was held whole, with the API and version of its request
        pos = 0
        for api_key, api_version, frame in held:
            size, correlation_id = struct.unpack_from(">ii", frame)
            assert frame == conn["server"][pos:pos + 4 + size]
            pos += 4 + size
            assert expected[(_label(flow), correlation_id)] == (api_key, api_version)
            seen_responses += 1
        assert pos == len(conn["server"])
        assert not responses.mid_frame and not requests.mid_frame
    assert seen_responses == len(expected)


@pytest.mark.parametrize("name,port", CAPTURES[:2])
def test_frames_not_held_pass_as_the_same_objects(name, port):
    for conn in connections(name, port).values():
        requests = Requests()
        responses = Responses(requests, lambda k, v: False, None, 1 << 30)
        for direction, _ts, data in conn["events"]:
            if direction == 1:
                requests.feed(data)
            else:
                assert responses.feed(data) is data
        assert requests.pending == {}


def test_a_produce_request_with_acks_0_waits_for_no_response():
    requests = Requests()
    body = {"acks": 0, "timeout_ms": 1000, "topic_data": []}
    for version in (3, 8, 9, 11):
        requests.feed(encode_request(0, version, version, "c", {**body, "transactional_id": None}))
    requests.feed(encode_request(0, 9, 100, "c", {**body, "acks": 1, "transactional_id": "t" * 40}))
    assert list(requests.pending) == [100]
    assert requests.frames == 5


def test_a_response_too_big_to_hold_passes_as_it_comes():
    requests = Requests()
    requests.feed(encode_request(3, 12, 7, "c", {"topics": None}))
    frame = struct.pack(">ii", 4 + 100, 7) + bytes(100)
    responses = Responses(requests, lambda k, v: True, lambda *a: pytest.fail("held"), 50)
    out = b"".join(responses.feed(frame[i:i + 10]) for i in range(0, len(frame), 10))
    assert out == frame and requests.pending == {}


# -- hostile clients: the relay's own reading stays bounded ------------------------------------

def test_a_flood_of_unanswered_requests_keeps_pending_bounded(monkeypatch):
    monkeypatch.setattr("kinspect.proxy.frames.MAX_PENDING", 1000)
    requests = Requests()
    frames = b"".join(encode_request(18, 3, correlation_id, "c", {}) for correlation_id in range(20_000))
    for i in range(0, len(frames), 4096):
        requests.feed(frames[i:i + 4096])
    assert requests.frames == 20_000
    assert len(requests.pending) == 1000 and requests.forgotten == 19_000
    assert list(requests.pending)[0] == 19_000  # the newest kept, the oldest forgotten


def test_a_lying_request_length_is_skipped_without_holding_it():
    requests = Requests()
    requests.feed(struct.pack(">i", 0x7FFFFFFF) + encode_request(18, 3, 1, "c", {})[4:] + bytes(100_000))
    assert requests.frames == 1 and requests.skip > 0x7FFFFFFF - 200_000
    assert len(requests.head) == 0  # only the first 512 bytes were ever read into memory


# -- SASL before KIP-152: raw tokens after a SaslHandshake v0 ----------------------------------

def _response(correlation_id: int, body: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(body), correlation_id) + body


def _token(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _sasl_v0_session(mechanism: str, client_tokens, server_tokens, error: int = 0) -> list:
    """(direction, bytes) in the order they go: a v0 handshake, its raw tokens (each client
    token before its answer), then a Metadata exchange (whose response names a broker)."""
    events = [(1, encode_request(17, 0, 1, "kp", {"mechanism": mechanism})),
              (2, _response(1, struct.pack(">hi", error, 1) + struct.pack(">h", len(mechanism))
                            + mechanism.encode()))]
    for i, token in enumerate(client_tokens):
        events.append((1, _token(token)))
        if i < len(server_tokens):
            events.append((2, _token(server_tokens[i])))
    events += [(1, encode_request(3, 1, 2, "kp", {"topics": None})), (2, _response(2, b"metadata-body"))]
    return events


def _relay(events, seed):
    rng = random.Random(seed)
    requests = Requests()
    held = []
    responses = Responses(requests, lambda k, v: k == 3, lambda k, v, f: held.append((k, v)) or f, 1 << 20)
    relayed = bytearray()
    for direction, data in events:
        for chunk in _chunks(data, rng):
            if direction == 1:
                requests.feed(chunk)
            else:
                relayed += responses.feed(chunk)
    assert bytes(relayed) == b"".join(data for direction, data in events if direction == 2)
    assert requests.pending == {} and not requests.mid_frame and not responses.mid_frame
    return requests, responses, held


SCRAM_CLIENT = [b"n,,n=bob,r=abc", b"c=biws,r=abcdef,p=cHJvb2Y="]
SCRAM_SERVER = [b"r=abcdef,s=c2FsdA==,i=4096", b"v=c2lnbmF0dXJl"]


@pytest.mark.parametrize("mechanism,client_tokens,server_tokens", [
    ("PLAIN", [b"\x00alice\x00alice-pw"], [b""]),  # PLAIN's answer is an empty frame
    ("SCRAM-SHA-512", SCRAM_CLIENT, SCRAM_SERVER),
    ("GSSAPI", [b"\x60\x82\x02token", b"\x05\x04wrap"], [b"\x60reply"]),  # tokens until a request
])
def test_raw_sasl_tokens_are_neither_paired_nor_waited_for(mechanism, client_tokens, server_tokens):
    for seed in range(20):
        requests, responses, held = _relay(_sasl_v0_session(mechanism, client_tokens, server_tokens), seed)
        assert held == [(3, 1)]  # the Metadata response after the tokens was paired and held
        assert requests.tokens == len(client_tokens) and responses.tokens == len(server_tokens)


def test_a_refused_v0_handshake_starts_no_tokens():
    requests, responses, held = _relay(_sasl_v0_session("GSSAPI", [], [], error=33), 0)  # UNSUPPORTED_SASL_MECHANISM
    assert held == [(3, 1)] and requests.tokens == responses.tokens == 0


# -- responses held for rewriting: a budget over every connection -----------------------------

def test_responses_held_at_once_are_bounded_over_all_connections():
    from kinspect.proxy.frames import HeldBudget
    refused = []
    budget = HeldBudget(1000, lambda size, api: refused.append((size, api)))
    links = []
    for correlation_id in (1, 2):
        requests = Requests()
        requests.feed(encode_request(1, 17, correlation_id, "c", {"topics": []}))  # a Fetch v17
        links.append(Responses(requests, lambda k, v: True, lambda k, v, f: f[:4] + b"X" + f[5:], budget))
    first = struct.pack(">ii", 4 + 700, 1) + bytes(700)
    second = struct.pack(">ii", 4 + 700, 2) + bytes(700)
    out_first = links[0].feed(first[:300])  # held: nothing goes yet
    assert out_first == b"" and budget.used == 708
    out_second = links[1].feed(second[:300]) + links[1].feed(second[300:])  # does not fit: passes as it came
    assert out_second == second and refused == [(708, (1, 17))] and budget.refused == 1
    out_first += links[0].feed(first[300:])  # whole: rewritten, and the budget given back
    assert out_first == first[:4] + b"X" + first[5:] and budget.used == 0


def test_a_connection_that_ends_mid_response_gives_its_held_bytes_back():
    from kinspect.proxy.frames import HeldBudget
    budget = HeldBudget(1 << 20)
    requests = Requests()
    requests.feed(encode_request(3, 12, 9, "c", {"topics": None}))
    responses = Responses(requests, lambda k, v: True, lambda k, v, f: f, budget)
    responses.feed(struct.pack(">ii", 4 + 5000, 9) + bytes(100))
    assert budget.used == 5008
    responses.release()
    assert budget.used == 0


def test_requests_followed_at_once_are_bounded_over_all_connections():
    """Unanswered requests cost the relay about 26 bytes each, and every connection could hold
    MAX_PENDING of them: 1.8 MB per connection for 70,000 requests sent to a broker that reads them
    all. A PendingBudget shared by the connections bounds them together: past it, a connection
    forgets its oldest; answers and ends give entries back."""
    from kinspect.proxy.frames import PendingBudget

    budget = PendingBudget(limit=10)
    first, second = Requests(budget), Requests(budget)
    first.feed(b"".join(encode_request(16, 0, i, "c", {}) for i in range(8)))
    second.feed(b"".join(encode_request(16, 0, i, "c", {}) for i in range(8)))
    assert budget.used == 10 and len(first.pending) == 8 and len(second.pending) == 2
    assert second.forgotten == 6 and list(second.pending) == [6, 7]  # the newest kept
    assert first.answered(0) == (16, 0) and first.answered(0) is None and budget.used == 9
    second.feed(encode_request(16, 0, 8, "c", {}))  # room for one again
    assert budget.used == 10 and list(second.pending) == [6, 7, 8]
    first.release()
    assert budget.used == 3 and not first.pending
    responses = Responses(second, lambda k, v: False, lambda k, v, f: f, 1 << 20)
    responses.feed(struct.pack(">ii", 4, 7))
    assert budget.used == 2 and list(second.pending) == [6, 8]
