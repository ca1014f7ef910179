"""SASL before KIP-152: the raw tokens that follow a SaslHandshake v0.

After a SaslHandshake v0 request and its successful response (error code 0), the client sends
its SASL tokens as size-prefixed frames without a request header, and the broker answers a token
with a size-prefixed frame whenever its SaslServer has something to send; Kafka requests resume
once the mechanism completes (Kafka's SaslServerAuthenticator). PLAIN: one token, answered by an
empty frame; SCRAM: client-first and client-final, answered by server-first and server-final.
Other mechanisms take as many rounds as they need (GSSAPI's last token gets no answer), so for
them the first client frame that parses as a request of a known key and version ends the phase:
a SASL token never does (text tokens start with printable bytes, GSSAPI's with 0x60 or 0x0504).
A v1 handshake is followed by SaslAuthenticate requests instead: ordinary exchanges.
"""

from __future__ import annotations

import struct

from kinspect.wire import apis
from kinspect.wire.headers import parse_request_header

SASL_HANDSHAKE = 17
# Tokens each side sends in a successful exchange of these mechanisms.
ROUNDS = {"PLAIN": 1, "SCRAM-SHA-256": 2, "SCRAM-SHA-512": 2}
UNTIL_REQUEST = -1  # an unknown count: tokens until the client sends a request

_I16 = struct.Struct(">h")


class RawSasl:
    """One connection's SaslHandshake v0 and the raw tokens after it (sans-I/O).

    ``client_frame`` / ``server_frame`` tell whether a frame is a SASL token rather than a
    Kafka message; ``over`` is set once Kafka messages have resumed (or never will)."""

    __slots__ = ("correlation_id", "mechanism", "client_left", "server_left", "over")

    def __init__(self, correlation_id: int, payload: bytes, at: int):
        """From a SaslHandshake v0 request: its correlation id, frame payload, body offset."""
        self.correlation_id = correlation_id
        self.mechanism = _string(payload, at)
        self.client_left = self.server_left = 0  # no tokens before the handshake is answered
        self.over = False

    def answered(self, correlation_id: int, payload: bytes, at: int) -> None:
        """A response on the connection; the handshake's, with error code 0, starts the tokens."""
        if correlation_id != self.correlation_id or self.client_left or self.over:
            return
        if len(payload) - at < 2 or _I16.unpack_from(payload, at)[0] != 0:
            self.over = True
            return
        self.client_left = self.server_left = ROUNDS.get(self.mechanism, UNTIL_REQUEST)

    def client_frame(self, payload: bytes) -> bool:
        if not self.client_left:
            return False
        if self.client_left == UNTIL_REQUEST:
            header = parse_request_header(payload)
            if header is not None and apis.is_known(header.api_key, header.api_version):
                self.client_left = self.server_left = 0
                self.over = True
                return False
            return True
        self.client_left -= 1
        return True

    def server_frame(self, payload: bytes) -> bool:
        if not self.server_left:
            return False
        if self.server_left > 0:
            self.server_left -= 1
            self.over = not self.server_left and not self.client_left
        return True


def _string(payload: bytes, at: int) -> str | None:
    """A non-flexible string (int16 length) at ``at``, or None when it does not fit."""
    if len(payload) - at < 2:
        return None
    (n,) = _I16.unpack_from(payload, at)
    if n < 0 or at + 2 + n > len(payload):
        return None
    return payload[at + 2:at + 2 + n].decode("utf-8", "replace")
