"""kafka-python lab client for protocol levels without group management (Kafka 0.8.x).

`--api-version 0.8.2`: Produce v0 (magic 0), Fetch v0, ListOffsets v0, Metadata v0,
FindCoordinator v0, OffsetCommit v1 and OffsetFetch v1 (offsets kept by Kafka, not ZooKeeper).
There is no JoinGroup before 0.9, so the consumer assigns itself every partition of the topic,
reads everything back, commits under the group id and asks committed(). Producing and the
request tally are kafka_python_client's; the manifest has the same shape.
"""

from __future__ import annotations

import logging
import sys
import time

import kafka
from kafka import KafkaConsumer, TopicPartition

from tests.lab.clients.common import Manifest, emit, parse_args
from tests.lab.clients.kafka_python_client import (PROTOCOL_LOGGER, TallyHandler, common_config,
                                                   produce)


def consume_assigned(args, manifest: Manifest, expected: set[str]) -> None:
    consumer = KafkaConsumer(**common_config(args, args.consumer_api_version),
                             client_id=f"{args.label}-consumer", group_id=args.group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        partitions = sorted(consumer.partitions_for_topic(args.topic) or ())
        consumer.assign([TopicPartition(args.topic, p) for p in partitions])
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
            offset = consumer.committed(tp)
            if offset is not None and offset >= 0:
                manifest.add_committed(topic=tp.topic, partition=tp.partition, offset=offset)
    except Exception as exc:  # the client's verdict is what we record
        manifest.consumer_error = repr(exc)
    finally:
        consumer.close()


def main() -> None:
    args = parse_args("kafka-python")
    manifest = Manifest("kafka-python", {"kafka-python": kafka.__version__}, args.bootstrap,
                        args.topic, None if args.no_consume else args.group, args.api_version,
                        args.consumer_api_version)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.INFO)
    logging.basicConfig(level=logging.INFO, handlers=[to_stderr])
    protocol_log = logging.getLogger(PROTOCOL_LOGGER)
    protocol_log.setLevel(logging.DEBUG)
    protocol_log.addHandler(TallyHandler(manifest))
    produce(args, manifest)
    if not args.no_consume:
        consume_assigned(args, manifest, {p["value"] for p in manifest.produced if p["delivered"]})
    emit(manifest)


if __name__ == "__main__":
    main()
