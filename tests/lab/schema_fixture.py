"""Records the schema fixtures: a capture and a broker log dir holding values made by
confluent-kafka's real serializers, and the registry's `_schemas` topic (tests/lab/registry.py).

    python -m tests.lab.schema_fixture            # root: tcpdump on lo
        -> tests/data/schemas/schemas-confluent.pcap, its .manifest.json,
           samples/schemas/logs/{_schemas-0, lab-avro-0, ...}

The broker is Apache Kafka from Maven Central (tests/lab/kafka.py), single-node KRaft; the
capture is tcpdump's, on loopback, of every connection to the broker: the registry's Produce
requests to `_schemas`, the clients' Produce requests, and a consumer's Fetch responses.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.lab.kafka import KafkaBroker
from tests.lab.recorder import Recorder
from tests.lab.registry import LabRegistry
from tests.lab.schema_clients import consume_all, dumps, produce_all, proto_sources

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "data" / "schemas" / "schemas-confluent.pcap"
MANIFEST = ROOT / "tests" / "data" / "schemas" / "schemas-confluent.manifest.json"
LOGS = ROOT / "samples" / "schemas" / "logs"
TOPICS = ("lab-avro", "lab-proto", "lab-json", "lab-headers", "lab-retired", "lab-plain")


def record(capture: Path = CAPTURE, manifest_path: Path = MANIFEST, logs: Path = LOGS) -> dict:
    config = {"log.segment.bytes": 1 << 20, "num.partitions": 1, "auto.create.topics.enable": True,
              "log.flush.interval.messages": 1}
    with KafkaBroker(config=config) as broker:
        broker.create_topic("_schemas", 1, config={"cleanup.policy": "compact"})
        for topic in TOPICS:
            broker.create_topic(topic, 1)
        recorder = Recorder(capture, "lo", f"tcp port {broker.port}")
        with recorder:
            with LabRegistry(broker.bootstrap, proto_sources=proto_sources()) as registry:
                manifest = produce_all(broker.bootstrap, registry)
            consumed = consume_all(broker.bootstrap, ["_schemas", *TOPICS],
                                   len(manifest["records"]) + len(manifest["registry_records"]))
        kafka_version = broker.version
        broker.stop()
        if logs.exists():
            shutil.rmtree(logs)
        logs.mkdir(parents=True)
        for topic in ("_schemas", *TOPICS):
            source = broker.partition_dir(topic, 0)
            target = logs / source.name
            target.mkdir()
            for entry in source.iterdir():
                if entry.suffix in (".log", ".index", ".timeindex") or entry.name == "partition.metadata":
                    shutil.copyfile(entry, target / entry.name)
    manifest.update({
        "file": capture.name,
        "command": "python -m tests.lab.schema_fixture",
        "broker": {"name": "apache-kafka", "version": kafka_version},
        "registry": "tests/lab/registry.py (Confluent's REST API; _schemas in the KafkaStore format)",
        "serializers": f"confluent-kafka {__import__('confluent_kafka').__version__[0]}: "
                       "schema_registry.avro.AvroSerializer, protobuf.ProtobufSerializer, "
                       "json_schema.JSONSerializer",
        "capture": {"tool": "tcpdump", "interface": "lo", "argv": [
            capture.name if a == str(capture) else a for a in recorder.argv()]},
        "consumed": consumed,
        "log_dir": str(logs.relative_to(ROOT)),
    })
    manifest_path.write_text(dumps(manifest) + "\n")
    return manifest


if __name__ == "__main__":
    result = record()
    print(f"{len(result['records'])} records, {len(result['registry_records'])} _schemas records, "
          f"{result['consumed']} consumed -> {CAPTURE}", file=sys.stderr)
