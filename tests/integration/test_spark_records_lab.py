"""Spark's records table on a real capture holding a tombstone and an empty value (issue 30's
blind spot): an Apache Kafka 4 broker on loopback, recorded with tcpdump while confluent-kafka
(librdkafka) produces a tombstone (null value), an empty value and a 3-byte value with a header,
then reads them back. Spark's records rows are checked against what the producer sent, as
literal values: a null value's value_size is null, an empty one's 0.

``record(directory)`` made tests/unit/spark/data/tombstones.pcap, which test_job.py checks the
same way without the lab.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from tests.lab.kafka import KAFKA_4, KafkaBroker
from tests.lab.pytest_fixtures import require_lab_host
from tests.lab.recorder import Recorder

pytestmark = pytest.mark.lab

TOPIC = "lab-tombstones"
# key -> (value, headers) as produced, in this order, in one batch
PRODUCED = {b"tombstone": (None, None), b"empty": (b"", None), b"full": (b"abc", [("h", b"1")])}
# what the records table must say of each, for the Produce request and the Fetch response alike:
# (key, value_size, header_count), in offset order
EXPECTED = [(b"tombstone", None, 0), (b"empty", 0, 0), (b"full", 3, 1)]


def _clients(bootstrap: str) -> dict:
    """Produce PRODUCED in one batch, then consume it back; what the consumer saw."""
    import confluent_kafka as ck
    producer = ck.Producer({"bootstrap.servers": bootstrap, "client.id": "lab-tombstones-producer",
                            "linger.ms": 500, "compression.codec": "none"})
    for key, (value, headers) in PRODUCED.items():
        producer.produce(TOPIC, key=key, value=value, headers=headers)
    assert producer.flush(30) == 0
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "client.id": "lab-tombstones-consumer",
                            "group.id": "lab-tombstones", "auto.offset.reset": "earliest",
                            "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    seen: dict = {}
    deadline = time.monotonic() + 60
    while len(seen) < len(PRODUCED) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen[message.key()] = (message.offset(), message.value())
    consumer.close()
    return seen


def record(directory: Path) -> Path:
    """tombstones.pcap (and its manifest) recorded into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    capture = directory / "tombstones.pcap"
    with KafkaBroker(KAFKA_4) as kafka:
        kafka.create_topic(TOPIC)
        with Recorder(capture, "lo", f"tcp port {kafka.port}") as recorder:
            seen = _clients(kafka.bootstrap)
    assert {key: value for key, (_, value) in seen.items()} == {key: value for key, (value, _) in PRODUCED.items()}
    assert sorted(offset for offset, _ in seen.values()) == [0, 1, 2]
    import confluent_kafka as ck
    summary = (f"Apache Kafka {KAFKA_4} on loopback: confluent-kafka produces to {TOPIC}, in one batch, a "
               f"tombstone (null value), an empty value and a 3-byte value with a header, then a consumer group "
               f"reads them back")
    manifest = {"file": capture.name, "summary": summary,
                "command": "python -c 'from pathlib import Path; from tests.integration.test_spark_records_lab "
                           "import record; record(Path(\"tests/unit/spark/data\"))'",
                "broker": {"name": "apache-kafka", "version": KAFKA_4}, "capture": {"argv": [*recorder.argv()[:-1], capture.name]},
                "client": {"confluent-kafka": ck.__version__, "librdkafka": ck.libversion()[0]},
                "produced": [{"key": key.decode(), "value": None if value is None else value.decode(),
                              "headers": [[k, v.decode()] for k, v in headers or ()]}
                             for key, (value, headers) in PRODUCED.items()],
                "consumed": {key.decode(): offset for key, (offset, _) in seen.items()}}
    (directory / "tombstones.manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return capture


def records_rows(capture: Path, out: Path) -> dict[str, list[tuple]]:
    """`kinspect spark --records` over ``capture``: (key, value_size, header_count) by side, in
    offset order."""
    done = subprocess.run([sys.executable, "-P", "-m", "kinspect", "spark", str(capture), "--out", str(out),
                           "--master", "local[1]", "--records"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = ds.dataset(out / "records", format="parquet").to_table().to_pylist()
    sides: dict[str, list[tuple]] = {}
    for row in sorted(rows, key=lambda r: (r["side"], r["correlation_id"], r["offset"])):
        if row["topic"] == TOPIC:
            sides.setdefault(row["side"], []).append((row["key"], row["value_size"], row["header_count"]))
    return sides


def test_a_tombstones_value_size_is_null_and_an_empty_values_is_zero(tmp_path):
    require_lab_host()
    capture = record(tmp_path / "capture")
    sides = records_rows(capture, tmp_path / "out")
    assert sides["request"] == EXPECTED  # the producer's batch
    assert sides["response"][-3:] == EXPECTED  # the consumer's Fetch (once at least)
    assert set(sides["response"]) == set(EXPECTED)
