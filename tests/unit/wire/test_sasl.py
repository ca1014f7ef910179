"""The raw SASL tokens after a SaslHandshake v0: told apart from Kafka messages, in Kafka's order.

Real kafka-python v0 logins (PLAIN, SCRAM-SHA-512) against a real broker:
tests/integration/test_secrets_lab.py.
"""

from __future__ import annotations

import struct

from kinspect.wire.encode import encode_body, encode_request
from kinspect.wire.exchange import Connection, complete
from kinspect.wire.topics import TopicNames

HANDSHAKE, METADATA = 17, 3
METADATA_RESPONSE = {"brokers": [{"node_id": 1, "host": "b", "port": 9092, "rack": None}], "controller_id": 1,
                     "topics": []}


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def response(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    return frame(struct.pack(">i", correlation_id) + encode_body(api_key, version, "response", body))


class Login:
    """A connection fed client and server bytes in turn; records come out completed."""

    def __init__(self, show_secrets: bool = False):
        self.conn = Connection("c-s", max_frame=1 << 20, client_syn=True, server_syn=True,
                               show_secrets=show_secrets)
        self.out: list[dict] = []

    def client(self, data: bytes) -> "Login":
        self.out += [complete(r, TopicNames()) for r in self.conn.client_data(data, 1.0)]
        return self

    def server(self, data: bytes) -> "Login":
        self.out += [complete(r, TopicNames()) for r in self.conn.server_data(data, 2.0)]
        return self

    def handshake(self, mechanism: str, version: int = 0, error: int = 0) -> "Login":
        self.client(encode_request(HANDSHAKE, version, 1, "app", {"mechanism": mechanism}))
        return self.server(response(HANDSHAKE, version, 1, {"error_code": error, "mechanisms": [mechanism]}))

    def metadata(self, correlation_id: int = 2) -> "Login":
        self.client(encode_request(METADATA, 1, correlation_id, "app", {"topics": None}))
        return self.server(response(METADATA, 1, correlation_id, METADATA_RESPONSE))

    def kinds(self) -> list[str]:
        return [r.get("api_name") or f"{r['kind']}:{r.get('side', '')}" for r in self.out]


def test_plain_one_token_answered_by_an_empty_frame():
    login = Login().handshake("PLAIN").client(frame(b"\x00alice\x00alice-pw")).server(frame(b"")).metadata()
    assert login.kinds() == ["SaslHandshake", "sasl_token:client", "sasl_token:server", "Metadata"]
    client, server = login.out[1], login.out[2]
    assert client["token"] == b"\x00alice\x00<redacted 8 bytes>" and client["mechanism"] == "PLAIN"
    assert "alice" in client["what"] and "alice-pw" not in client["what"]
    assert server["token"] == b"" and server["size"] == 0
    assert login.out[3]["response"]["brokers"][0]["node_id"] == 1 and not login.out[3]["problems"]


def test_show_secrets_keeps_the_token():
    login = Login(show_secrets=True).handshake("PLAIN").client(frame(b"\x00alice\x00alice-pw"))
    assert login.out[1]["token"] == b"\x00alice\x00alice-pw" and "alice-pw" in login.out[1]["what"]


def test_scram_two_rounds():
    proof = b"p=" + b"Q" * 88
    login = (Login().handshake("SCRAM-SHA-512")
             .client(frame(b"n,,n=bob,r=cnonce")).server(frame(b"r=cnonce-snonce,s=c2FsdA==,i=4096"))
             .client(frame(b"c=biws,r=cnonce-snonce," + proof)).server(frame(b"v=" + b"S" * 88))
             .metadata())
    assert login.kinds() == ["SaslHandshake", "sasl_token:client", "sasl_token:server", "sasl_token:client",
                             "sasl_token:server", "Metadata"]
    tokens = [r["token"] for r in login.out[1:5]]
    assert tokens == [b"n,,n=bob,r=cnonce", b"r=cnonce-snonce,s=c2FsdA==,i=4096",
                      b"c=biws,r=cnonce-snonce,p=<redacted 88 bytes>", b"v=<redacted 88 bytes>"]


def test_other_mechanisms_take_tokens_until_a_request_comes():
    # GSSAPI-like: three client tokens, the last one unanswered, then Kafka requests resume
    tokens = [b"\x60\x82\x01\x00" + bytes(20), b"", b"\x05\x04\x01\xff" + bytes(12)]
    login = (Login().handshake("GSSAPI")
             .client(frame(tokens[0])).server(frame(b"\x60\x81\x10" + bytes(8)))
             .client(frame(tokens[1])).server(frame(b"\x05\x04\x00\xff" + bytes(12)))
             .client(frame(tokens[2])).metadata())
    assert login.kinds() == ["SaslHandshake", "sasl_token:client", "sasl_token:server", "sasl_token:client",
                             "sasl_token:server", "sasl_token:client", "Metadata"]
    assert [r["token"] for r in login.out[1:6]] == ["<redacted 24 bytes>", "<redacted 11 bytes>", b"",
                                                    "<redacted 16 bytes>", "<redacted 16 bytes>"]
    assert not login.out[6]["problems"]


def test_a_handshake_that_fails_or_is_v1_starts_no_tokens():
    failed = Login().handshake("PLAIN", error=33).client(frame(b"\x00alice\x00alice-pw"))
    assert failed.kinds() == ["SaslHandshake", "undecodable:"]
    v1 = Login().handshake("PLAIN", version=1)
    v1.client(encode_request(36, 1, 2, "app", {"auth_bytes": b"\x00alice\x00alice-pw"}))
    v1.server(response(36, 1, 2, {"error_code": 0, "auth_bytes": b""}))
    assert v1.kinds() == ["SaslHandshake", "SaslAuthenticate"]
    assert v1.out[1]["request"]["auth_bytes"] == b"\x00alice\x00<redacted 8 bytes>"



def test_a_huge_token_is_shortened_in_the_notice_text_only():
    token = b"\x00" + b"u" * 100_000 + b"\x00secret-pw"
    login = Login().handshake("PLAIN").client(frame(token))
    notice = login.out[1]
    assert len(notice["what"]) < 300 and "secret-pw" not in notice["what"]
    assert notice["token"] == b"\x00" + b"u" * 100_000 + b"\x00<redacted 9 bytes>"
