"""Fuzz the proxy's framing (kinspect/proxy/frames.py) and its rewriting (rewrite.py): the two byte
streams of a connection, as the relay follows them.

Input: the session corpus (real connections of the committed captures): one byte of options (bit
0: responses that may name brokers are rewritten for real, with rewrite.py, else handed back
as they came; bit 1: a held budget of 4 KiB, else 64 MiB; bit 2: --max-brokers 3), then the events
of both directions (formats.stream_ops; losses and ends are not what a relay sees: skipped).
Checks: no exception escapes (rewrite.py's Unchanged is an answer); every held frame is whole
(its size field says its length) and comes back as a whole frame; without rewriting, the bytes
sent on are the broker's bytes, but for a frame still held at the end; the held budget is all
given back on release; no more requests wait than MAX_PENDING; a rewritten Metadata response that
decoded cleanly decodes cleanly again, naming the same brokers at the addresses asked for; and
where the C pump's walk (native/_relay.c names_brokers) lets a Produce v10+ or Fetch v16+ response
pass unheld, the Python decoder finds no broker in it.
"""

import struct

import formats
import harness

with harness.instrumented("kinspect.proxy"):
    from kinspect import native
    from kinspect.proxy.frames import MAX_PENDING, HeldBudget, Requests, Responses
    from kinspect.proxy.rewrite import Unchanged, carries_addresses, rewrite_response

from kinspect.wire.apis import response_header_version  # noqa: E402
from kinspect.wire.headers import parse_response_header  # noqa: E402
from kinspect.wire.messages import decode_body  # noqa: E402

RELAY = native.relay


def _moved(node_id: int, host: str, port: int) -> tuple[str, int]:
    return f"proxy-{node_id % 7}.example", 20000 + node_id % 1000


def _body(api_key: int, api_version: int, frame: bytes):
    header = parse_response_header(frame, response_header_version(api_key, api_version), 4)
    if header is None:
        return None
    body, problems = decode_body(api_key, api_version, "response", frame, start=4 + header[1], raw_records=True)
    return None if problems else body


def _brokers(body: dict) -> list:
    return [(b.get("node_id"), b.get("host"), b.get("port")) for b in body.get("brokers") or ()]


class Rewriter:
    def __init__(self, real: bool, max_brokers: int | None):
        self.real, self.max_brokers = real, max_brokers

    def __call__(self, api_key: int, api_version: int, frame: bytes) -> bytes:
        if len(frame) < 4 or struct.unpack_from(">i", frame)[0] != len(frame) - 4:
            raise harness.Finding(f"a held frame is not whole: size {frame[:4].hex()}, {len(frame)} bytes")
        if RELAY is not None and ((api_key == 0 and api_version >= 10) or (api_key == 1 and api_version >= 16)):
            self._check_walk(api_key, api_version, frame)
        if not self.real:
            return frame
        try:
            out = rewrite_response(api_key, api_version, frame, _moved, self.max_brokers)
        except Unchanged:
            return frame
        if struct.unpack_from(">i", out)[0] != len(out) - 4:
            raise harness.Finding(f"a rewritten frame's size field says {struct.unpack_from('>i', out)[0]}, "
                                  f"it holds {len(out) - 4}")
        if api_key == 3 and out is not frame:
            self._check_metadata(api_version, frame, out)
        return out

    def _check_metadata(self, api_version: int, frame: bytes, out: bytes) -> None:
        before = _body(3, api_version, frame)
        if before is None:
            return
        after = _body(3, api_version, out)
        if after is None:
            raise harness.Finding(f"Metadata v{api_version} decoded cleanly, and not once rewritten")
        limit = len(_brokers(before)) if self.max_brokers is None else self.max_brokers
        expected = [(n, *_moved(n, h, p)) if i < limit and n >= 0 and isinstance(h, str) else (n, h, p)
                    for i, (n, h, p) in enumerate(_brokers(before))]
        if _brokers(after) != expected:
            raise harness.Finding(f"Metadata v{api_version} rewritten to {_brokers(after)!r:.500}, "
                                  f"not {expected!r:.500}")
        after["brokers"], before["brokers"] = [], []
        if after != before:
            raise harness.Finding(f"Metadata v{api_version}: more than the brokers changed")

    def _check_walk(self, api_key: int, api_version: int, frame: bytes) -> None:
        if RELAY.names_brokers(api_key, api_version, frame):
            return
        body = _body(api_key, api_version, frame)
        if body is not None and body.get("node_endpoints"):
            raise harness.Finding(f"the C walk lets API {api_key} v{api_version} pass, and it names brokers: "
                                  f"{body['node_endpoints']!r:.300}")


def target(data: bytes) -> None:
    cursor = formats.Cursor(data)
    options = cursor.u8()
    budget = HeldBudget(4096 if options & 2 else 64 << 20)
    requests = Requests()
    responses = Responses(requests, carries_addresses, Rewriter(bool(options & 1), 3 if options & 4 else None),
                          budget)
    sent, received = bytearray(), bytearray()
    for kind, reverse, chunk, _ in formats.stream_ops(cursor):
        if kind != formats.DATA:
            continue
        if not reverse:
            requests.feed(chunk)
            if len(requests.pending) > MAX_PENDING:
                raise harness.Finding(f"{len(requests.pending)} requests pending")
            continue
        received += chunk
        sent += responses.feed(chunk)
    if not options & 1:
        held = bytes(responses.held) if responses.held is not None else b""
        if bytes(sent) + held != bytes(received):
            raise harness.Finding(f"relayed {len(sent)} bytes (+{len(held)} held) of {len(received)}: "
                                  f"not the broker's bytes")
    responses.release()
    if budget.used != 0:
        raise harness.Finding(f"{budget.used} bytes of the held budget not given back")


if __name__ == "__main__":
    harness.main(target, "session", generated=True)
