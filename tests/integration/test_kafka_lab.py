"""The lab's Apache Kafka: a fresh broker from Maven Central jars, its console clients, its dump tool.

These hold without kinspect: they prove the lab that samples/ and the oracle tests stand on.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from tests.lab.kafka import KAFKA_3, KAFKA_4, KafkaBroker

pytestmark = pytest.mark.lab

TOPIC = "lab-roundtrip"
GROUP = "lab-roundtrip-group"
LINES = [f"key-{n % 3}:value {n} é" for n in range(7)]
SEGMENT = "00000000000000000000.log"


@pytest.fixture(scope="module")
def kafka4():
    with KafkaBroker(KAFKA_4) as kafka:
        before = sorted(p.name for p in kafka.log_dir.iterdir() if p.is_dir())
        meta = (kafka.log_dir / "meta.properties").read_text()
        kafka.create_topic(TOPIC, config={"compression.type": "gzip"})
        kafka.console_producer(TOPIC, LINES, key_separator=":")
        consumed = kafka.console_consumer(TOPIC, len(LINES), group=GROUP, print_key=True)
        described = kafka.consumer_groups("--describe", "--group", GROUP)
        kafka.stop()
        dump = kafka.dump_log(kafka.partition_dir(TOPIC) / SEGMENT)
        yield SimpleNamespace(kafka=kafka, before=before, meta=meta, consumed=consumed,
                              described=described, dump=dump,
                              clean=(kafka.log_dir / ".kafka_cleanshutdown").exists())


def test_broker_starts_from_a_fresh_formatted_log_dir(kafka4):
    assert kafka4.before == ["__cluster_metadata-0"]
    assert f"cluster.id={kafka4.kafka.cluster_id}" in kafka4.meta


def test_console_consumer_reads_back_what_the_console_producer_wrote(kafka4):
    assert kafka4.consumed == [line.replace(":", "\t", 1) for line in LINES]


def test_consumer_groups_sees_the_groups_commit(kafka4):
    row = next(line.split() for line in kafka4.described.splitlines() if line.startswith(GROUP))
    assert row[1:5] == [TOPIC, "0", str(len(LINES)), str(len(LINES))]


def test_broker_stops_cleanly(kafka4):
    assert kafka4.clean
    assert not kafka4.kafka.running


def test_dump_log_reads_the_written_segment(kafka4):
    batches = [line for line in kafka4.dump.splitlines() if line.startswith("baseOffset:")]
    records = [line for line in kafka4.dump.splitlines() if line.startswith("| offset:")]
    assert batches and all("magic: 2" in b and "compresscodec: gzip" in b and "isvalid: true" in b
                           for b in batches)
    assert [re.search(r"payload: (.*)$", r).group(1) for r in records] == [
        line.split(":", 1)[1] for line in LINES]


def test_kafka_3_in_zookeeper_mode_keeps_magic_1_on_disk():
    """The legacy era of samples/: Kafka 4 cannot write magic 0/1 (KIP-896), a KRaft 3.9 cannot
    either (inter-broker protocol >= 3.0); ZooKeeper mode with an old protocol can."""
    import kafka as kafka_python
    config = {"inter.broker.protocol.version": "0.10.0", "log.message.format.version": "0.10.0"}
    with KafkaBroker(KAFKA_3, metadata="zookeeper", config=config) as kafka:
        kafka.create_topic("legacy", config={"message.format.version": "0.10.0", "compression.type": "snappy"})
        producer = kafka_python.KafkaProducer(bootstrap_servers=kafka.bootstrap, api_version=(0, 10, 1))
        for n in range(3):
            producer.send("legacy", key=b"k", value=f"v{n}".encode()).get(timeout=30)
        producer.close()
        kafka.stop()
        dump = kafka.dump_log(kafka.partition_dir("legacy") / SEGMENT)
    wrappers = [line for line in dump.splitlines() if line.startswith("offset:")]
    assert wrappers and all("magic: 1" in w and "compresscodec: snappy" in w and "isvalid: true" in w
                            for w in wrappers)
    assert re.findall(r"payload: (\S+)", dump) == ["v0", "v1", "v2"]
