"""The live client's framing and version choice against a scripted peer on a local socket.
Real brokers are in tests/integration/test_offsets_*.py; these are the edge cases they never
show (old brokers, broken peers)."""

import socket
import struct
import threading

import pytest

from kinspect.groups.live import Connection, LiveError, parse_address
from kinspect.wire.encode import encode_body

API_VERSIONS = 18
I32 = struct.Struct(">i")


class Peer(threading.Thread):
    """Accepts one connection; answers each request with answer(api_key, version, correlation)."""

    def __init__(self, answer):
        super().__init__(daemon=True)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.answer = answer
        self.requests = []

    def run(self):
        conn, _ = self.server.accept()
        with conn, self.server:
            try:
                self.serve(conn)
            except OSError:  # the client hung up on a reply it did not like
                pass

    def serve(self, conn):
        while True:
            head = conn.recv(4)
            if len(head) < 4:
                return
            size = I32.unpack(head)[0]
            frame = b""
            while len(frame) < size:
                frame += conn.recv(size - len(frame))
            api_key, version, correlation = struct.unpack_from(">hhi", frame)
            self.requests.append((api_key, version))
            reply = self.answer(api_key, version, correlation)
            if reply is None:
                return
            conn.sendall(reply)


def frame(correlation: int, body: bytes) -> bytes:
    payload = I32.pack(correlation) + body
    return I32.pack(len(payload)) + payload


def versions_body(version: int, keys: dict[int, tuple[int, int]], error: int = 0) -> bytes:
    return encode_body(API_VERSIONS, version, "response", {
        "error_code": error, "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                                          for k, (lo, hi) in keys.items()]})


def connect(answer) -> tuple[Connection, Peer]:
    peer = Peer(answer)
    peer.start()
    return Connection("127.0.0.1", peer.port, timeout=5), peer


def test_versions_are_the_highest_both_sides_speak():
    keys = {API_VERSIONS: (0, 4), 9: (1, 99), 10: (0, 2)}
    connection, peer = connect(lambda k, v, c: frame(c, versions_body(3, keys)))
    assert peer.requests == [(API_VERSIONS, 3)]
    assert connection.version(9) == 10 and connection.version(10) == 2
    with pytest.raises(LiveError, match="does not offer"):
        connection.version(69)


def test_an_old_broker_answers_api_versions_v3_with_a_v0_body():
    body = versions_body(0, {API_VERSIONS: (0, 2), 9: (0, 5)}, error=35)
    connection, _ = connect(lambda k, v, c: frame(c, body))
    assert connection.version(9) == 5


def test_a_peer_that_is_not_kafka():
    with pytest.raises(LiveError, match="closed the connection"):
        connect(lambda k, v, c: None)
    with pytest.raises(LiveError, match="not plausible"):
        connect(lambda k, v, c: I32.pack(1 << 30) + b"HTTP")
    with pytest.raises(LiveError, match="correlation id"):
        connect(lambda k, v, c: frame(c + 7, versions_body(3, {API_VERSIONS: (0, 4)})))
    with pytest.raises(LiveError, match="did not list its API versions"):
        connect(lambda k, v, c: frame(c, versions_body(3, {}, error=35)))


def test_nothing_listening():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(LiveError, match="cannot connect"):
        Connection("127.0.0.1", port, timeout=2)


def test_bootstrap_addresses():
    assert parse_address("broker-1:9092,broker-2:9092") == ("broker-1", 9092)
    assert parse_address("[::1]:19092") == ("::1", 19092)
    for bad in ("broker", "broker:", ":9092", "broker:x"):
        with pytest.raises(LiveError):
            parse_address(bad)
