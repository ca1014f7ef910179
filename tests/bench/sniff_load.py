"""Kafka-framed load for bench_sniff.py: Produce requests paced at a rate, answered by a stub
broker, over loopback in the namespace the benchmark made (its lo at MTU 1500, so each request
is split into wire-sized segments as on Ethernet).

    python -m tests.bench.sniff_load REQUESTS_PER_S SECONDS [CONNECTIONS]

Each request is a Produce v7 (header v1, client id ``bench-N``) carrying one uncompressed v2
record batch of RECORDS records of VALUE bytes, CRC-32C sealed, so sniff decodes and checks a real
batch for every exchange; the stub broker answers each with a Produce v7 response carrying the
same correlation id. Prints one JSON line: requests sent, responses received, seconds.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading
import time

from kinspect.wire.encode import encode_body, encode_request
from tests.unit.records.handmade import record, record_body, v2_batch

PORT = 9092
RECORDS = 16
VALUE = 900  # bytes per value: a 15 KB request, 11 segments at MTU 1500
TOPIC = "bench"


def request_frame(client_id: str) -> bytearray:
    values = os.urandom(RECORDS * VALUE)
    records = b"".join(record(record_body(offset_delta=i, key=b"key-%d" % i, value=values[i * VALUE:(i + 1) * VALUE]))
                       for i in range(RECORDS))
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": v2_batch(records, RECORDS)}]}]}
    return bytearray(encode_request(0, 7, 0, client_id, body))


def response_frame(correlation_id: int) -> bytes:
    body = encode_body(0, 7, "response", {"responses": [{"name": TOPIC, "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 0, "log_append_time_ms": -1, "log_start_offset": 0}]}],
        "throttle_time_ms": 0})
    payload = struct.pack(">i", correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def serve(conn: socket.socket, template: bytes) -> None:
    """The stub broker's side of one connection: a response for every whole request read."""
    buf = bytearray()
    out = bytearray(template)
    while True:
        data = conn.recv(1 << 20)
        if not data:
            break
        buf += data
        replies = []
        pos = 0
        while len(buf) - pos >= 12:
            size = struct.unpack_from(">i", buf, pos)[0]
            if len(buf) - pos < 4 + size:
                break
            out[4:8] = buf[pos + 8:pos + 12]  # the request's correlation id
            replies.append(bytes(out))
            pos += 4 + size
        del buf[:pos]
        if replies:
            conn.sendall(b"".join(replies))
    conn.close()


def main() -> None:
    rate, seconds = float(sys.argv[1]), float(sys.argv[2])
    connections = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", PORT))
    server.listen()
    template = response_frame(0)
    clients, frames, received = [], [], [0] * connections
    for i in range(connections):
        c = socket.create_connection(("127.0.0.1", PORT))
        s, _ = server.accept()
        threading.Thread(target=serve, args=(s, template), daemon=True).start()
        clients.append(c)
        frames.append(request_frame(f"bench-{i}"))

        def drain(c=c, i=i):
            while True:
                data = c.recv(1 << 20)
                if not data:
                    break
                received[i] += len(data)
        threading.Thread(target=drain, daemon=True).start()
    sent = 0
    start = time.perf_counter()
    while True:
        now = time.perf_counter() - start
        if now >= seconds:
            break
        due = int(now * rate)
        while sent < due:
            i = sent % connections
            frame = frames[i]
            struct.pack_into(">i", frame, 8, sent & 0x7FFFFFFF)
            clients[i].sendall(frame)
            sent += 1
        time.sleep(0.0005)
    elapsed = time.perf_counter() - start
    time.sleep(0.5)
    responses = sum(received) // len(template)
    for c in clients:
        c.close()
    print(json.dumps({"requests": sent, "responses": responses, "seconds": round(elapsed, 3),
                      "request_bytes": len(frames[0])}))


if __name__ == "__main__":
    main()
