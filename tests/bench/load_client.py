"""Volume load for the benchmark capture: librdkafka producers and a committing consumer group.

    python -m tests.bench.load_client --bootstrap HOST:PORT --topic bench-0 --messages 20000

One producer per codec runs in its own thread, all at once, writing JSON-like events (random
ids and words, so they compress the way real events do, 2-4x) with keys and some headers.
Meanwhile a consumer group of --consumers members reads the topic and commits every
--commit-every messages, so the capture holds produce, fetch and group traffic side by side.
Prints one JSON manifest on stdout: counts, not values (a million values would dwarf the capture's
own manifest).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
WORDS = ("order", "payment", "refund", "cart", "login", "logout", "search", "view", "click",
         "shipment", "invoice", "coupon", "review", "wishlist", "checkout", "signup", "session")
POOL_SIZE = 4096


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", help="consumer group; default: <topic>-group")
    p.add_argument("--codecs", default=",".join(CODECS))
    p.add_argument("--messages", type=int, default=20_000, help="per codec")
    p.add_argument("--value-size", type=int, default=400, help="approximate bytes per value")
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--consumers", type=int, default=2)
    p.add_argument("--commit-every", type=int, default=500)
    p.add_argument("--rate", type=float, default=0, help="messages/s per producer; 0: unpaced")
    p.add_argument("--rates", default="", help="per codec, overriding --rate: none=1500,lz4=3500")
    p.add_argument("--burst", type=int, default=256,
                   help="messages between pacing pauses (256: bursts that fill 10-60 KB requests; "
                        "a few: a steady stream that librdkafka's linger cuts into small requests)")
    p.add_argument("--librdkafka-defaults", action="store_true",
                   help="leave linger.ms and batch.size at librdkafka's defaults (else 5 ms, 64 KiB)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600)
    args = p.parse_args(argv)
    args.codecs = args.codecs.split(",")
    args.group = args.group or f"{args.topic}-group"
    args.rates = {codec: float(rate) for codec, rate in (item.split("=") for item in args.rates.split(",") if item)}
    if set(args.codecs) - set(CODECS):
        p.error(f"unknown codecs {sorted(set(args.codecs) - set(CODECS))}")
    return args


def value_pool(size: int, seed: int) -> list[bytes]:
    """Event tails: hex ids and words, padded with more words to about `size` bytes."""
    rng = random.Random(seed)
    pool = []
    for _ in range(POOL_SIZE):
        event = {"user": f"{rng.getrandbits(64):016x}", "event": rng.choice(WORDS),
                 "amount": round(rng.uniform(0, 500), 2), "region": rng.choice(("eu", "us", "ap")),
                 "trace": f"{rng.getrandbits(128):032x}"}
        text = json.dumps(event)
        notes = []
        while len(text) + sum(len(n) + 1 for n in notes) < size:
            notes.append(rng.choice(WORDS) + str(rng.randrange(1000)))
        pool.append((text[:-1] + ', "notes": "' + " ".join(notes) + '"}').encode())
    return pool


def create_topic(args) -> str:
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    futures = admin.create_topics([NewTopic(args.topic, args.partitions, 1)])
    try:
        futures[args.topic].result(30)
        return "created"
    except ck.KafkaException as exc:  # already there, or the broker auto-creates: say which
        return f"create_topics: {exc}"


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.produced: dict[str, dict] = {}
        self.consumed = 0
        self.commits = 0

    def consumed_add(self, n: int, commits: int) -> None:
        with self.lock:
            self.consumed += n
            self.commits += commits


def produce(args, codec: str, pool: list[bytes], tally: Tally) -> None:
    batching = {} if args.librdkafka_defaults else {"linger.ms": 5, "batch.size": 64 * 1024}
    producer = ck.Producer({"bootstrap.servers": args.bootstrap, "client.id": f"bench-producer-{codec}",
                            "compression.codec": codec, **batching})
    counts = {"sent": 0, "delivered": 0, "failed": 0}

    def report(err, _msg):
        counts["failed" if err else "delivered"] += 1

    rng = random.Random(f"{args.seed}-{codec}")
    rate = args.rates.get(codec, args.rate)
    started = time.monotonic()
    for i in range(args.messages):
        value = b'{"seq": %d, "codec": "%s", ' % (i, codec.encode()) + pool[i % POOL_SIZE][1:]
        headers = [("trace-id", pool[i % POOL_SIZE][-16:]), ("source", b"bench")] if i % 5 == 0 else None
        while True:
            try:
                producer.produce(args.topic, key=b"user-%d" % rng.randrange(10_000), value=value,
                                 headers=headers, on_delivery=report)
                break
            except BufferError:  # local queue full: let librdkafka drain it
                producer.poll(0.05)
        counts["sent"] += 1
        if i % args.burst == 0:
            producer.poll(0)
            if rate:
                ahead = i / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
    left = producer.flush(60)
    counts["undelivered"] = left
    with tally.lock:
        tally.produced[codec] = counts


def consume(args, member: int, expected: threading.Event, target: list[int], tally: Tally) -> None:
    consumer = ck.Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                            "client.id": f"bench-consumer-{member}", "auto.offset.reset": "earliest",
                            "enable.auto.commit": False, "session.timeout.ms": 10000,
                            "heartbeat.interval.ms": 1000})
    consumer.subscribe([args.topic])
    deadline = time.monotonic() + args.timeout
    since_commit = 0
    while time.monotonic() < deadline:
        messages = consumer.consume(500, 0.5)
        good = sum(1 for m in messages if not m.error())
        since_commit += good
        commits = 0
        if since_commit >= args.commit_every:
            consumer.commit(asynchronous=True)
            since_commit, commits = 0, 1
        tally.consumed_add(good, commits)
        if expected.is_set() and tally.consumed >= target[0]:
            break
    try:
        consumer.commit(asynchronous=False)
        tally.consumed_add(0, 1)
    except ck.KafkaException:  # nothing consumed since the last commit
        pass
    consumer.close()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.time()
    topic_status = create_topic(args)
    pool = value_pool(args.value_size, args.seed)
    tally = Tally()
    expected, target = threading.Event(), [0]
    consumers = [threading.Thread(target=consume, args=(args, m, expected, target, tally))
                 for m in range(args.consumers)]
    producers = [threading.Thread(target=produce, args=(args, codec, pool, tally)) for codec in args.codecs]
    for t in consumers + producers:
        t.start()
    for t in producers:
        t.join()
    target[0] = sum(c["delivered"] for c in tally.produced.values())
    expected.set()
    for t in consumers:
        t.join()
    manifest = {"client": "librdkafka", "versions": {"confluent-kafka": ck.__version__,
                                                     "librdkafka": ck.libversion()[0]},
                "bootstrap": args.bootstrap, "topic": args.topic, "topic_status": topic_status,
                "group": args.group, "partitions": args.partitions, "consumers": args.consumers,
                "value_size": args.value_size, "commit_every": args.commit_every, "rate": args.rate,
                "rates": args.rates, "burst": args.burst, "batching": "librdkafka defaults" if args.librdkafka_defaults
                else {"linger.ms": 5, "batch.size": 64 * 1024},
                "produced": tally.produced, "consumed": tally.consumed, "commits": tally.commits,
                "seconds": round(time.time() - started, 1)}
    json.dump(manifest, sys.stdout, indent=1)
    sys.stdout.write("\n")
    if tally.consumed < target[0]:
        print(f"consumer group read {tally.consumed} of {target[0]} delivered", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
