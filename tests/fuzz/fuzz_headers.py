"""Fuzz request and response headers (kinspect/wire/headers.py) and what reads a frame's
first bytes: the plausibility test of a frame start, tagged fields, Produce's acks, SASL tokens.

Input: one byte (0: a request frame's payload; 1: a response's; bit 1: the response header is
v1), then the frame payload. Checks: no exception; a parsed header never claims more bytes than
the payload has.
"""

import struct

import harness

with harness.instrumented("kinspect.wire"):
    from kinspect.wire.exchange import produce_acks
    from kinspect.wire.headers import (parse_request_header, parse_response_header,
                                       plausible_request, skip_tagged_fields)
    from kinspect.wire.sasl import RawSasl
    from kinspect.wire.secrets import client_token, server_token


def target(data: bytes) -> None:
    selector, payload = (data[0], data[1:]) if data else (0, b"")
    end = len(payload)
    if selector & 1:
        parsed = parse_response_header(payload, selector >> 1 & 1)
        if parsed is not None and not 4 <= parsed[1] <= end:
            raise harness.Finding(f"response header of {parsed[1]} bytes in {end}")
        server_token(payload)
    else:
        header = parse_request_header(payload)
        if header is not None:
            if not 8 <= header.size <= end:
                raise harness.Finding(f"request header of {header.size} bytes in {end}")
            if header.api_key == 0:
                produce_acks(header.api_version, payload, header.size)
            if header.api_key == 17 and header.api_version == 0:
                sasl = RawSasl(header.correlation_id, payload, header.size)
                sasl.answered(header.correlation_id, b"\0" * 6, 4)
                sasl.client_frame(payload), sasl.server_frame(payload)
        framed = struct.pack(">i", end) + payload
        plausible_request(framed, 0, len(framed), 256 << 20)
        client_token(payload)
    got = skip_tagged_fields(payload, 0, end)
    if got is not None and got[1] > end:
        raise harness.Finding(f"tagged fields end at {got[1]} past {end}")

if __name__ == "__main__":
    harness.main(target, "headers")
