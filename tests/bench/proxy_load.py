"""One librdkafka producer's run for tests/bench/bench_proxy.py; prints one JSON object.

    python -m tests.bench.proxy_load --bootstrap HOST:PORT --topic t --size 1024 --seconds 10
    python -m tests.bench.proxy_load ... --rate 200      # paced: latency at low load

Unpaced: produce as fast as librdkafka takes them for --seconds, then flush; throughput is the
bytes of values acknowledged over the time from the first produce to the end of the flush.
Paced: --rate messages a second, linger.ms=0; latency is librdkafka's own per message (produce()
to acknowledgement, Message.latency()).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import confluent_kafka as ck


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--rate", type=float, default=0)
    args = p.parse_args()
    paced = args.rate > 0
    producer = ck.Producer({"bootstrap.servers": args.bootstrap, "acks": 1, "linger.ms": 0 if paced else 5,
                            "compression.type": "none", "client.id": "bench-proxy"})
    value = os.urandom(args.size)
    latencies, acked, errors = [], [0], [0]

    def report(err, msg):
        if err is not None:
            errors[0] += 1
            return
        acked[0] += 1
        if paced:
            latencies.append(msg.latency())

    # warm up: metadata, connections, the first batch
    producer.produce(args.topic, value=value, on_delivery=lambda e, m: None)
    producer.flush(30)
    start = time.perf_counter()
    end = start + args.seconds
    sent = 0
    if paced:
        interval = 1 / args.rate
        next_at = start
        while next_at < end:
            now = time.perf_counter()
            if now < next_at:
                producer.poll(min(next_at - now, 0.001))
                continue
            producer.produce(args.topic, value=value, on_delivery=report)
            sent += 1
            next_at += interval
    else:
        while time.perf_counter() < end:
            try:
                producer.produce(args.topic, value=value, on_delivery=report)
                sent += 1
            except BufferError:
                producer.poll(0.001)
                continue
            producer.poll(0)
    left = producer.flush(60)
    elapsed = time.perf_counter() - start
    latencies.sort()

    def pct(q):
        return None if not latencies else latencies[min(len(latencies) - 1, int(q / 100 * len(latencies)))] * 1e6

    print(json.dumps({"sent": sent, "acked": acked[0], "errors": errors[0], "unflushed": left,
                      "seconds": elapsed, "mb_per_s": acked[0] * args.size / elapsed / 1e6,
                      "msgs_per_s": acked[0] / elapsed, "p50_us": pct(50), "p99_us": pct(99)}))


if __name__ == "__main__":
    main()
