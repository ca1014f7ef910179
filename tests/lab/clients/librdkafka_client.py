"""librdkafka (confluent-kafka) lab client: one producer per codec, then a committing group.

Request counts come from librdkafka's own `debug=protocol` log, which it writes to stderr from
its threads: "Sent ProduceRequest (v10, 158 bytes @ 0, CorrId 2)" per transmission (retries
included) and "Received ProduceResponse (v10, 45 bytes, CorrId 2, rtt 0.37ms)". stderr is
pointed at a file for the run, then scanned and echoed back.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time

import confluent_kafka as ck

from tests.lab.clients.common import Manifest, emit, make_headers, make_value, parse_args

SENT = re.compile(r"Sent (\w+)Request \(v(\d+),")
RECEIVED = re.compile(r"Received (\w+)Response \(v(\d+),")


def base_config(args, api_version: str | None) -> dict:
    config = {"bootstrap.servers": args.bootstrap, "debug": "protocol"}
    if api_version:  # behave like a client talking to a broker of that version
        config.update({"api.version.request": False, "broker.version.fallback": api_version})
    return config


def produce(args, manifest: Manifest) -> None:
    for codec in args.codecs:
        producer = ck.Producer({**base_config(args, args.api_version), "client.id": f"{args.label}-producer-{codec}",
                                "compression.codec": codec, "linger.ms": 20})

        def report(err, msg, codec=codec):
            manifest.add_produced(
                value=msg.value().decode(), key=msg.key().decode(), headers=msg.headers(),
                codec=codec, partition=msg.partition(), offset=msg.offset() if err is None else None,
                error=None if err is None else str(err))

        for i in range(args.count):
            producer.produce(args.topic, key=f"k{i}".encode(),
                             value=make_value(args.label, codec, i, args.value_size).encode(),
                             headers=make_headers(i) or None, on_delivery=report)
        left = producer.flush(30)
        if left:
            manifest.notes.append(f"{left} {codec} messages undelivered after 30 s")


def consume(args, manifest: Manifest, expected: set[str]) -> None:
    consumer = ck.Consumer({**base_config(args, args.consumer_api_version), "client.id": f"{args.label}-consumer", "group.id": args.group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "session.timeout.ms": 6000, "max.poll.interval.ms": 10000})
    consumer.subscribe([args.topic])
    deadline = time.monotonic() + 60
    while expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        manifest.add_consumed(topic=msg.topic(), partition=msg.partition(), offset=msg.offset(),
                              value=msg.value())
        expected.discard(msg.value().decode())
    if expected:
        manifest.notes.append(f"consumer missed {len(expected)} values")
    consumer.commit(asynchronous=False)
    for tp in consumer.committed(consumer.assignment(), timeout=10):
        if tp.offset >= 0:
            manifest.add_committed(topic=tp.topic, partition=tp.partition, offset=tp.offset)
    consumer.close()


def main() -> None:
    args = parse_args("librdkafka")
    manifest = Manifest("librdkafka", {"confluent-kafka": ck.__version__,
                                       "librdkafka": ck.libversion()[0]},
                        args.bootstrap, args.topic, None if args.no_consume else args.group,
                        args.api_version, args.consumer_api_version)
    real_stderr = os.dup(2)
    with tempfile.TemporaryFile("w+") as log:
        os.dup2(log.fileno(), 2)
        try:
            produce(args, manifest)
            if not args.no_consume:
                consume(args, manifest, {p["value"] for p in manifest.produced if p["delivered"]})
        finally:
            os.dup2(real_stderr, 2)
            log.seek(0)
            text = log.read()
            sys.stderr.write(text)
    manifest.tally.scan(text, SENT, RECEIVED)
    emit(manifest)


if __name__ == "__main__":
    main()
