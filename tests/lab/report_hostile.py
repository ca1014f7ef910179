"""A capture whose names are hostile in HTML, recorded from real clients against a real broker.

    python -m tests.lab.report_hostile record OUT_DIR     # ~40 s; root (tcpdump, a namespace)

Apache Kafka 4.1.2 (KRaft, one node) on the loopback of a network namespace of its own;
librdkafka (confluent-kafka) clients whose client ids and consumer group ids hold markup,
quotes and terminal escapes, producing to a real topic and to topic names the broker refuses
(it answers INVALID_TOPIC_EXCEPTION or UNKNOWN_TOPIC_OR_PARTITION, and the names travel in the
requests and answers all the same). Writes OUT_DIR/report-hostile.pcap and OUT_DIR/manifest.json
(the names, as sent, and the port). tests/integration/test_report_browser.py renders its report
in Chromium and checks that every name shows as text and nothing of it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CAPTURE = "report-hostile.pcap"
MANIFEST = "manifest.json"
TOPIC = "plain-topic"
CLIENT_IDS = ["<script>window.pwned=1</script>", "</title><h1 id=pwned>x</h1>",
              "\"'><img src=x onerror=window.pwned=2>", "\x1b[31mred\x1b]0;title\x07</script>"]
GROUP_IDS = ["</script><script>window.pwned=3</script>", "<!--\"'&amp;--><b>group</b>\x1b[2J"]
REFUSED_TOPICS = ["<script>window.pwned=4</script>", "</title></script>\"'"]


def record(out: Path) -> Path:
    from tests.lab.enter_netns import entered
    from tests.lab.netns import loopback_namespace

    with loopback_namespace() as side, entered(side.netns):
        return _record(out)


def _record(out: Path) -> Path:
    from confluent_kafka import Consumer, Producer

    from tests.lab.kafka import KafkaBroker
    from tests.lab.recorder import Recorder

    out.mkdir(parents=True, exist_ok=True)
    capture = out / CAPTURE
    capture.unlink(missing_ok=True)
    refused = {}
    with KafkaBroker() as broker:
        broker.create_topic(TOPIC, 1)
        with Recorder(capture, "lo", f"tcp port {broker.port}"):
            for client_id in CLIENT_IDS:
                producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id,
                                     "linger.ms": 5})
                for n in range(5):
                    producer.produce(TOPIC, key=client_id.encode(), value=f"<b>{n}</b>{client_id}".encode())
                producer.flush(30)
                del producer
            producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": CLIENT_IDS[0],
                                 "message.timeout.ms": 3000})
            for topic in REFUSED_TOPICS:
                errors = []
                try:
                    producer.produce(topic, value=b"x", on_delivery=lambda e, m: errors.append(str(e)))
                except Exception as e:  # noqa: BLE001 - the client refusing it is the answer we keep
                    errors.append(f"client: {e}")
                producer.flush(10)
                refused[topic] = errors
            del producer  # its threads end before the broker does
            for group_id in GROUP_IDS:
                consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id,
                                     "client.id": CLIENT_IDS[1], "auto.offset.reset": "earliest",
                                     "enable.auto.commit": False})
                consumer.subscribe([TOPIC])
                got, deadline = 0, time.monotonic() + 30
                while got < 20 and time.monotonic() < deadline:
                    message = consumer.poll(0.5)
                    if message is not None and not message.error():
                        got += 1
                consumer.commit(asynchronous=False)
                consumer.close()
            time.sleep(1)
        port = broker.port
    manifest = {"capture": CAPTURE, "kafka": "4.1.2", "port": port, "topic": TOPIC, "client_ids": CLIENT_IDS,
                "group_ids": GROUP_IDS, "refused_topics": REFUSED_TOPICS, "refused_answers": refused,
                "network": "the loopback of a network namespace of its own (tests/lab/netns.py)"}
    path = out / MANIFEST
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    os.chmod(capture, 0o644)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["record"])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    print(record(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
