"""Connection churn on loopback for sniff's memory test (run inside a namespace of the test's own).

    python -m tests.lab.sniff_churn SECONDS [CONNECTIONS_PER_S]

A stub broker on 127.0.0.1:9092 answers ApiVersions v0 requests, except those whose correlation
id is NO_REPLY or more. Clients open connections at a steady rate, in four kinds, round robin:

- ``answered``: one request, its response, close;
- ``pending``: one request never answered, the connection held open PENDING_HOLD s (past sniff's
  --pending-timeout of 1 s in the test, so the request expires to a "no response" exchange);
- ``oversized``: a frame of BIG bytes (past --max-frame 4096), then an answered request, close;
- ``idle``: one answered request, then silence for IDLE_HOLD s (past --idle-timeout 2 s), close.

Prints one JSON line with the counts of each kind.
"""

from __future__ import annotations

import json
import selectors
import socket
import struct
import sys
import threading
import time
import heapq
from collections import Counter

from kinspect.wire.encode import encode_body, encode_request

PORT = 9092
NO_REPLY = 1_000_000
BIG = 20_000
PENDING_HOLD = 1.6
IDLE_HOLD = 3.0
KINDS = ("answered", "pending", "oversized", "idle")


def _response(correlation_id: int) -> bytes:
    payload = struct.pack(">i", correlation_id) + encode_body(18, 0, "response", {"error_code": 0, "api_keys": []})
    return struct.pack(">i", len(payload)) + payload


def _broker(server: socket.socket, stop: threading.Event) -> None:
    sel = selectors.DefaultSelector()
    sel.register(server, selectors.EVENT_READ)
    buffers: dict[socket.socket, bytearray] = {}
    while not stop.is_set():
        for key, _ in sel.select(0.1):
            sock = key.fileobj
            if sock is server:
                conn, _ = server.accept()
                sel.register(conn, selectors.EVENT_READ)
                buffers[conn] = bytearray()
                continue
            data = sock.recv(1 << 16)
            if not data:
                sel.unregister(sock)
                sock.close()
                del buffers[sock]
                continue
            buf = buffers[sock]
            buf += data
            while len(buf) >= 12:
                size = struct.unpack_from(">i", buf)[0]
                if len(buf) < 4 + size:
                    break
                correlation_id = struct.unpack_from(">i", buf, 8)[0]
                del buf[:4 + size]
                if correlation_id < NO_REPLY:
                    sock.sendall(_response(correlation_id))


def _request(correlation_id: int) -> bytes:
    return encode_request(18, 0, correlation_id, "churn", {})


def main() -> None:
    seconds = float(sys.argv[1])
    per_second = float(sys.argv[2]) if len(sys.argv) > 2 else 100
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", PORT))
    server.listen(1024)
    stop = threading.Event()
    threading.Thread(target=_broker, args=(server, stop), daemon=True).start()
    held: list[tuple[float, int, socket.socket]] = []  # a heap: (close at, n, socket)
    counts = Counter()
    big = struct.pack(">ihhi", BIG, 18, 0, 2 * NO_REPLY) + b"\0" * (BIG - 8)
    start = time.monotonic()
    n = 0
    while True:
        now = time.monotonic()
        while held and held[0][0] <= now:
            heapq.heappop(held)[2].close()
        if now - start >= seconds:
            break
        if n >= (now - start) * per_second:
            time.sleep(0.002)
            continue
        kind = KINDS[n % len(KINDS)]
        n += 1
        counts[kind] += 1
        c = socket.create_connection(("127.0.0.1", PORT))
        if kind == "pending":
            c.sendall(_request(NO_REPLY + n))
            heapq.heappush(held, (now + PENDING_HOLD, n, c))
            continue
        if kind == "oversized":
            c.sendall(big)
        c.sendall(_request(n))
        c.recv(1 << 16)  # its response
        if kind == "idle":
            heapq.heappush(held, (now + IDLE_HOLD, n, c))
        else:
            c.close()
    for _, _, c in held:
        c.close()
    stop.set()
    print(json.dumps(dict(counts)))


if __name__ == "__main__":
    main()
