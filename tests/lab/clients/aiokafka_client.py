"""aiokafka lab client: one producer per codec, then a committing group.

Request counts come from aiokafka's DEBUG log on "aiokafka.conn": one line per request written,
"Request to 127.0.0.1:9092 3: ProduceRequest_v7(...)", and per response read, "Response from
127.0.0.1:9092 3: ProduceResponse_v7(...)". aiokafka calls ListOffsets "OffsetRequest" and
ApiVersions "ApiVersionRequest"; tests/lab/api_names.py knows both spellings.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time

import aiokafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from tests.lab.clients.common import Manifest, emit, make_headers, make_value, parse_args

SENT = re.compile(r"Request to \S+ \d+: (\w+)Request_v(\d+)")
RECEIVED = re.compile(r"Response from \S+ \d+: (\w+)Response_v(\d+)")
CONN_LOGGER = "aiokafka.conn"


class TallyHandler(logging.Handler):
    def __init__(self, manifest: Manifest):
        super().__init__(logging.DEBUG)
        self.manifest = manifest

    def emit(self, record: logging.LogRecord) -> None:
        self.manifest.tally.scan(record.getMessage(), SENT, RECEIVED)


async def produce(args, manifest: Manifest) -> None:
    for codec in args.codecs:
        producer = AIOKafkaProducer(bootstrap_servers=args.bootstrap, linger_ms=20,
                                    client_id=f"{args.label}-producer-{codec}",
                                    compression_type=None if codec == "none" else codec)
        await producer.start()
        try:
            sends = []
            for i in range(args.count):
                value, key, headers = make_value(args.label, codec, i, args.value_size), f"k{i}", make_headers(i)
                future = await producer.send(args.topic, key=key.encode(), value=value.encode(),
                                             headers=headers or None)
                sends.append((future, value, key, headers))
            for future, value, key, headers in sends:
                try:
                    meta = await future
                    manifest.add_produced(value=value, key=key, headers=headers, codec=codec,
                                          partition=meta.partition, offset=meta.offset, error=None)
                except Exception as exc:  # the client's verdict is what we record
                    manifest.add_produced(value=value, key=key, headers=headers, codec=codec,
                                          partition=None, offset=None, error=repr(exc))
        finally:
            await producer.stop()


async def consume(args, manifest: Manifest, expected: set[str]) -> None:
    consumer = AIOKafkaConsumer(args.topic, bootstrap_servers=args.bootstrap,
                                client_id=f"{args.label}-consumer", group_id=args.group,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=6000, heartbeat_interval_ms=2000,
                                max_poll_interval_ms=10000)
    await consumer.start()
    try:
        deadline = time.monotonic() + 60
        while expected and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                for r in records:
                    manifest.add_consumed(topic=r.topic, partition=r.partition, offset=r.offset,
                                          value=r.value)
                    expected.discard(r.value.decode())
        if expected:
            manifest.notes.append(f"consumer missed {len(expected)} values")
        await consumer.commit()
        for tp in sorted(consumer.assignment()):
            offset = await consumer.committed(tp)
            if offset is not None and offset >= 0:
                manifest.add_committed(topic=tp.topic, partition=tp.partition, offset=offset)
    finally:
        await consumer.stop()


async def run(args, manifest: Manifest) -> None:
    await produce(args, manifest)
    if not args.no_consume:
        await consume(args, manifest, {p["value"] for p in manifest.produced if p["delivered"]})


def main() -> None:
    args = parse_args("aiokafka")
    if args.api_version or args.consumer_api_version:
        sys.exit("aiokafka lab client: --api-version is not supported (aiokafka >= 0.11 needs 0.10+ brokers)")
    manifest = Manifest("aiokafka", {"aiokafka": aiokafka.__version__}, args.bootstrap, args.topic,
                        None if args.no_consume else args.group, None)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.INFO)  # the tally wants DEBUG; stderr doesn't
    logging.basicConfig(level=logging.INFO, handlers=[to_stderr])
    conn_log = logging.getLogger(CONN_LOGGER)
    conn_log.setLevel(logging.DEBUG)
    conn_log.addHandler(TallyHandler(manifest))
    asyncio.run(run(args, manifest))
    emit(manifest)


if __name__ == "__main__":
    main()
