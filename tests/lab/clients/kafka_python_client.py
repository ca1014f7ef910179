"""kafka-python lab client: one producer per codec, then a committing group.

`--api-version 0.9` / `0.10.1` pins the protocol level (legacy message format, magic 0 / 1).
Request counts come from kafka-python's DEBUG log on "kafka.protocol.parser", one line per
request written: "Sending request 4 ProduceRequest(version=9, ...)", and one per response
parsed: "Received response 4 ProduceResponse(version=9, ...)".
"""

from __future__ import annotations

import logging
import re
import sys
import time

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.lab.clients.common import (Manifest, emit, make_headers, make_value, parse_api_version,
                                      parse_args)

SENT = re.compile(r"Sending request \d+ (\w+)Request\(version=(\d+)")
RECEIVED = re.compile(r"Received response \d+ (\w+)Response\(version=(\d+)")
PROTOCOL_LOGGER = "kafka.protocol.parser"


class TallyHandler(logging.Handler):
    def __init__(self, manifest: Manifest):
        super().__init__(logging.DEBUG)
        self.manifest = manifest

    def emit(self, record: logging.LogRecord) -> None:
        self.manifest.tally.scan(record.getMessage(), SENT, RECEIVED)


def common_config(args, api_version: str | None) -> dict:
    config = {"bootstrap_servers": args.bootstrap}
    if api_version:
        config["api_version"] = parse_api_version(api_version)
    return config


def produce(args, manifest: Manifest) -> None:
    legacy = args.api_version is not None
    for codec in args.codecs:
        producer = KafkaProducer(**common_config(args, args.api_version), client_id=f"{args.label}-producer-{codec}",
                                 compression_type=None if codec == "none" else codec, linger_ms=20,
                                 # a broker that rejects the format drops the connection: fail fast
                                 retries=0 if legacy else 3, request_timeout_ms=10000)
        pending = []
        for i in range(args.count):
            value, key, headers = make_value(args.label, codec, i, args.value_size), f"k{i}", make_headers(i)
            # magic 0/1 has no headers; kafka-python refuses them there
            future = producer.send(args.topic, key=key.encode(), value=value.encode(),
                                   headers=None if legacy else headers or None)
            pending.append((future, value, key, [] if legacy else headers))
        producer.flush(30)
        for future, value, key, headers in pending:
            try:
                meta = future.get(timeout=30)
                manifest.add_produced(value=value, key=key, headers=headers, codec=codec,
                                      partition=meta.partition, offset=meta.offset, error=None)
            except Exception as exc:  # the client's verdict is what we record
                manifest.add_produced(value=value, key=key, headers=headers, codec=codec,
                                      partition=None, offset=None, error=repr(exc))
        producer.close(timeout=10)


def consume(args, manifest: Manifest, expected: set[str]) -> None:
    api_version = parse_api_version(args.consumer_api_version)
    timeouts = {"session_timeout_ms": 10000, "heartbeat_interval_ms": 2000}
    if api_version is None or api_version >= (0, 10, 1):  # KIP-62: a separate poll interval
        timeouts.update(session_timeout_ms=6000, max_poll_interval_ms=10000)
    consumer = KafkaConsumer(args.topic, **common_config(args, args.consumer_api_version),
                             client_id=f"{args.label}-consumer", group_id=args.group,
                             auto_offset_reset="earliest", enable_auto_commit=False, **timeouts)
    try:
        _consume_and_commit(consumer, manifest, expected)
    except Exception as exc:  # a broker answer the client cannot read: record it, go on
        manifest.consumer_error = repr(exc)
    finally:
        consumer.close()


def _consume_and_commit(consumer: KafkaConsumer, manifest: Manifest, expected: set[str]) -> None:
    deadline = time.monotonic() + 60
    while expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            for r in records:
                manifest.add_consumed(topic=r.topic, partition=r.partition, offset=r.offset,
                                      value=r.value)
                expected.discard(r.value.decode())
    if expected:
        manifest.notes.append(f"consumer missed {len(expected)} values")
    consumer.commit()
    for tp in sorted(consumer.assignment()):
        offset = consumer.committed(TopicPartition(tp.topic, tp.partition))
        if offset is not None and offset >= 0:
            manifest.add_committed(topic=tp.topic, partition=tp.partition, offset=offset)


def main() -> None:
    args = parse_args("kafka-python")
    manifest = Manifest("kafka-python", {"kafka-python": kafka.__version__}, args.bootstrap,
                        args.topic, None if args.no_consume else args.group, args.api_version,
                        args.consumer_api_version)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.INFO)  # the tally wants DEBUG; stderr doesn't
    logging.basicConfig(level=logging.INFO, handlers=[to_stderr])
    protocol_log = logging.getLogger(PROTOCOL_LOGGER)
    protocol_log.setLevel(logging.DEBUG)
    protocol_log.addHandler(TallyHandler(manifest))
    produce(args, manifest)
    if not args.no_consume:
        consume(args, manifest, {p["value"] for p in manifest.produced if p["delivered"]})
    emit(manifest)


if __name__ == "__main__":
    main()
