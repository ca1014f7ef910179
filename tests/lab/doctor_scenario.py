"""The doctor's lab scenario: real clients against Apache Kafka 3.9.2, each problem at a known
moment, recorded on loopback, with the oracles' answers in a manifest.

    python -m tests.lab.doctor_scenario record OUT_DIR     # ~2 minutes; root (tcpdump)

writes OUT_DIR/doctor-scenario.pcap, OUT_DIR/logs/ (the broker's log dir after a clean stop,
empty internal partitions and the metadata log left out) and OUT_DIR/manifest.json.

Kafka 3.9.2 (KRaft, one node), the clients and tcpdump all run in a network namespace that
holds only its own loopback. Kafka 3.9.2: it still accepts the protocol versions Kafka 4 removed, which a
kafka-python producer pinned to api_version 0.10.1 uses. What happens (seconds from the start):

- healthy-producer writes 20 records/s to ``events`` throughout; group ``healthy-app`` (one
  librdkafka consumer, auto-commit) keeps up and leaves cleanly at the end;
- ``stalled-producer`` writes 100 records/s to ``stalled`` for 46 s; group ``stalled-app``
  consumes for 6 s, then leaves: it lags while production goes on (stalled ~40 s);
- group ``rebalance-app`` on ``orders``: member A joins at 0, B at 5, C at 10; B leaves cleanly at
  18; C is killed (SIGKILL) at 24 and its 6 s session times out; A leaves at 40;
- ``legacy-producer``: kafka-python pinned to api_version 0.10.1 (Produce v2 and ApiVersions v0);
- ``throttled-producer`` writes to ``quota`` under a client quota (producer_byte_rate 2048 for
  its client id): the broker throttles it; its librdkafka statistics count the throttle;
- ``doomed-txn``: a librdkafka transactional producer commits one transaction to ``txn``,
  begins a second, writes 5 records and is killed (SIGKILL) at 12 with it open (timeout 300 s).

Oracles, after the recording and before the broker stops: kafka-consumer-groups --describe
(lag), tshark's JoinGroup generation ids (rebalances), kafka-transactions describe,
describe-producers and find-hanging (the open transaction), and the clients' own statistics
(librdkafka's throttle window sums).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CAPTURE = "doctor-scenario.pcap"
MANIFEST = "manifest.json"
KAFKA = "3.9.2"
TOPICS = {"events": 2, "stalled": 1, "orders": 3, "legacy": 1, "quota": 1, "txn": 1, "warm-up": 1}
QUOTA_BYTES = 2048
SESSION_MS = 6000
TXN_TIMEOUT_MS = 300_000
BROKER = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.replication.factor": 1,
          "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
          "offsets.topic.num.partitions": 5, "transaction.state.log.num.partitions": 3}


# -- the clients, each run as `python -m tests.lab.doctor_scenario client ROLE ...` ------------

def _say(event: dict) -> None:
    print(json.dumps(event), flush=True)


def _consumer(args) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                         "client.id": args.client_id, "auto.offset.reset": "earliest",
                         "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 1000,
                         "auto.commit.interval.ms": 1000})
    consumer.subscribe([args.topic])
    consumed = 0
    deadline = time.monotonic() + args.seconds
    _say({"event": "started", "client_id": args.client_id, "time": time.time()})
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            consumed += 1
    _say({"event": "closing", "client_id": args.client_id, "consumed": consumed, "time": time.time()})
    consumer.close()
    _say({"event": "closed", "client_id": args.client_id, "time": time.time()})


def _producer(args) -> None:
    from confluent_kafka import Producer

    throttle = {"sum": 0, "cnt": 0, "max": 0}

    def stats(text: str) -> None:
        for broker in json.loads(text).get("brokers", {}).values():
            window = broker.get("throttle") or {}
            throttle["sum"] += window.get("sum", 0)
            throttle["cnt"] += window.get("cnt", 0)
            throttle["max"] = max(throttle["max"], window.get("max", 0))

    producer = Producer({"bootstrap.servers": args.bootstrap, "client.id": args.client_id,
                         "linger.ms": 50, "statistics.interval.ms": 500, "stats_cb": stats,
                         "acks": "all"})
    delivered = []
    sent = 0
    started = time.monotonic()
    _say({"event": "started", "client_id": args.client_id, "time": time.time()})
    while time.monotonic() - started < args.seconds:
        due = int((time.monotonic() - started) * args.rate)
        while sent < due:
            producer.produce(args.topic, value=f"{args.client_id}-{sent:06d}".ljust(args.size, ".").encode(),
                             key=str(sent % 7).encode(),
                             on_delivery=lambda err, msg: delivered.append(None if err else msg.offset()))
            sent += 1
        producer.poll(0.02)
    producer.flush(60)
    time.sleep(1.2)  # one more statistics window, so the last throttle is counted
    producer.poll(0.6)
    _say({"event": "done", "client_id": args.client_id, "sent": sent,
          "delivered": sum(1 for d in delivered if d is not None), "throttle": throttle, "time": time.time()})


def _legacy(args) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=args.bootstrap, client_id=args.client_id,
                             api_version=(0, 10, 1), linger_ms=20)
    futures = [producer.send(args.topic, key=b"k", value=f"legacy-{i}".encode()) for i in range(args.count)]
    producer.flush(30)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    _say({"event": "done", "client_id": args.client_id, "offsets": offsets, "time": time.time()})


def _transactional(args) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": args.bootstrap, "client.id": args.client_id,
                         "transactional.id": args.transactional_id,
                         "transaction.timeout.ms": TXN_TIMEOUT_MS})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(args.topic, key=b"ok", value=f"committed-{i}".encode())
    producer.commit_transaction(30)
    _say({"event": "committed", "time": time.time()})
    producer.begin_transaction()
    for i in range(5):
        producer.produce(args.topic, key=b"doomed", value=f"never-ended-{i}".encode())
    producer.flush(30)
    _say({"event": "open", "time": time.time()})
    if args.seconds:
        time.sleep(args.seconds)
        producer.commit_transaction(30)
        _say({"event": "committed", "time": time.time()})
        return
    while True:  # killed here, mid-transaction
        time.sleep(1)


def client_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="doctor_scenario client")
    parser.add_argument("role", choices=["consumer", "producer", "legacy", "transactional"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group")
    parser.add_argument("--seconds", type=float, default=0)
    parser.add_argument("--rate", type=float, default=10)
    parser.add_argument("--size", type=int, default=40)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--transactional-id")
    args = parser.parse_args(argv)
    {"consumer": _consumer, "producer": _producer, "legacy": _legacy,
     "transactional": _transactional}[args.role](args)


# -- the scenario ---------------------------------------------------------------------------

class _Client:
    """One client process; its JSON lines are read as they come (a killed one says what it did)."""

    def __init__(self, role: str, bootstrap: str, *args: str):
        self.argv = [sys.executable, "-m", "tests.lab.doctor_scenario", "client", role,
                     "--bootstrap", bootstrap, *args]
        self.process = subprocess.Popen(self.argv, cwd=REPO, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.events: list[dict] = []
        self.stderr = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def kill(self) -> float:
        self.process.send_signal(signal.SIGKILL)
        return time.time()

    def wait(self, timeout: float = 120) -> dict:
        code = self.process.wait(timeout)
        self._reader.join(5)
        self.stderr = self.process.stderr.read()[-3000:]
        return {"argv": ["python" if a == sys.executable else a for a in self.argv],
                "exit": code, "events": self.events}


def _create_topics(bootstrap: str) -> None:
    """TOPICS, by one CreateTopics request (kafka-topics would start a JVM for each)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for done in admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in TOPICS.items()]).values():
        done.result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the broker's metadata has every partition led
        topics = admin.list_topics(timeout=10).topics
        if all(name in topics and len(topics[name].partitions) == partitions
               and all(p.leader >= 0 for p in topics[name].partitions.values())
               for name, partitions in TOPICS.items()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the topics {sorted(TOPICS)} had no leader after 60 s")


def _warm_up(bootstrap: str) -> None:
    """The group and transaction coordinators loaded before the recording starts."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "warm-up", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("warm-up", 0, 0)], asynchronous=False)
    consumer.close()
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "warm-up-txn"})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce("warm-up", b"x")
    producer.commit_transaction(60)


def _generations(capture: Path, port: int) -> list[int]:
    """tshark's generation ids of the rebalance group's successful JoinGroup responses."""
    out = subprocess.run(["tshark", "-r", str(capture), "-d", f"tcp.port=={port},kafka", "-Y",
                          "kafka.api_key == 11 && kafka.request_frame && kafka.error == 0",
                          "-T", "fields", "-e", "kafka.generation_id"],
                         capture_output=True, text=True, timeout=300)
    ids = set()
    for line in out.stdout.split():
        for value in line.split(","):
            if value.lstrip("-").isdigit() and int(value) >= 0:
                ids.add(int(value))
    return sorted(ids)


def _lags(text: str) -> list[dict]:
    """kafka-consumer-groups --describe's table as rows."""
    rows, header = [], None
    for line in text.splitlines():
        cells = line.split()
        if cells[:2] == ["GROUP", "TOPIC"]:
            header = cells
        elif header and len(cells) >= len(header) - 3 and cells[0] != "Consumer":
            rows.append(dict(zip(header, cells)))
    return rows


def record(out: Path) -> Path:
    """Everything runs in a network namespace of its own (its loopback only): on the host's lo,
    another program's connection from the broker's port number landed in the capture."""
    from tests.lab.enter_netns import entered
    from tests.lab.netns import loopback_namespace

    with loopback_namespace() as side, entered(side.netns):
        return _record(out)


def _record(out: Path) -> Path:
    from tests.lab.kafka import KafkaBroker
    from tests.lab.recorder import Recorder

    out.mkdir(parents=True, exist_ok=True)
    capture = out / CAPTURE
    capture.unlink(missing_ok=True)
    timeline: list[dict] = []
    started = None

    def mark(what: str, moment: float | None = None) -> None:
        moment = moment or time.time()
        timeline.append({"what": what, "time": moment, "at_s": round(moment - started, 3)})

    with KafkaBroker(KAFKA, config=BROKER) as broker:
        bootstrap, port = broker.bootstrap, broker.port
        with ThreadPoolExecutor(1) as pool:  # the quota (kafka-configs: a JVM to start) while the topics are made
            quota = pool.submit(broker.configs, "--alter", "--add-config", f"producer_byte_rate={QUOTA_BYTES}",
                                "--entity-type", "clients", "--entity-name", "throttled-producer")
            _create_topics(bootstrap)
            _warm_up(bootstrap)
            quota.result()
        recorder = Recorder(capture, "lo", f"tcp port {port}")
        with recorder:
            started = time.time()
            mark("recording started")
            c = {}
            c["healthy-producer"] = _Client("producer", bootstrap, "--client-id", "healthy-producer",
                                            "--topic", "events", "--rate", "20", "--seconds", "44")
            c["healthy-app"] = _Client("consumer", bootstrap, "--client-id", "healthy-consumer",
                                       "--group", "healthy-app", "--topic", "events", "--seconds", "48")
            c["stalled-producer"] = _Client("producer", bootstrap, "--client-id", "stalled-producer",
                                            "--topic", "stalled", "--rate", "100", "--seconds", "46")
            c["stalled-app"] = _Client("consumer", bootstrap, "--client-id", "stalled-consumer",
                                       "--group", "stalled-app", "--topic", "stalled", "--seconds", "6")
            c["member-a"] = _Client("consumer", bootstrap, "--client-id", "member-a", "--group",
                                    "rebalance-app", "--topic", "orders", "--seconds", "40")
            mark("member-a, healthy and stalled clients started")
            c["throttled-producer"] = _Client("producer", bootstrap, "--client-id", "throttled-producer",
                                              "--topic", "quota", "--rate", "40", "--size", "200",
                                              "--seconds", "8")
            time.sleep(1)
            c["legacy-producer"] = _Client("legacy", bootstrap, "--client-id", "legacy-producer",
                                           "--topic", "legacy", "--count", "10")
            time.sleep(1)
            c["doomed"] = _Client("transactional", bootstrap, "--client-id", "doomed-producer",
                                  "--topic", "txn", "--transactional-id", "doomed-txn")
            time.sleep(3)
            c["member-b"] = _Client("consumer", bootstrap, "--client-id", "member-b", "--group",
                                    "rebalance-app", "--topic", "orders", "--seconds", "13")
            mark("member-b started")
            time.sleep(5)
            c["member-c"] = _Client("consumer", bootstrap, "--client-id", "member-c", "--group",
                                    "rebalance-app", "--topic", "orders", "--seconds", "600")
            mark("member-c started")
            time.sleep(2)
            if not any(e["event"] == "open" for e in c["doomed"].events):
                time.sleep(5)
            mark("doomed-txn producer killed", c["doomed"].kill())
            time.sleep(12)
            mark("member-c killed", c["member-c"].kill())
            results = {}
            for name in ("healthy-producer", "healthy-app", "stalled-producer", "stalled-app", "member-a",
                         "member-b", "throttled-producer", "legacy-producer", "member-c", "doomed"):
                results[name] = c[name].wait(180)
            mark("clients done")
            time.sleep(2)
        mark("recording stopped")
        # Kafka's tools, each a JVM to start, asked at once: nothing moves now that the clients are done
        transactions = "org.apache.kafka.tools.TransactionsCommand"
        with ThreadPoolExecutor(4) as pool:
            groups = {group: pool.submit(broker.consumer_groups, "--describe", "--group", group)
                      for group in ("healthy-app", "stalled-app", "rebalance-app")}
            asked = {
                "transactions_describe": pool.submit(broker.run, transactions, "--bootstrap-server", bootstrap,
                                                     "describe", "--transactional-id", "doomed-txn"),
                "describe_producers": pool.submit(broker.run, transactions, "--bootstrap-server", bootstrap,
                                                  "describe-producers", "--topic", "txn", "--partition", "0"),
                "find_hanging": pool.submit(broker.run, transactions, "--bootstrap-server", bootstrap,
                                            "find-hanging", "--broker-id", "1")}
            generations = pool.submit(_generations, capture, port)
            oracles = {"consumer_groups": {group: _lags(done.result()) for group, done in groups.items()},
                       **{name: done.result().stdout for name, done in asked.items()},
                       "generation_ids": generations.result()}
        broker_settings = {k: str(v) for k, v in broker.settings.items() if k != "log.dirs"}
        broker.stop()
        logs = out / "logs"
        shutil.rmtree(logs, ignore_errors=True)
        _copy_log_dir(broker.log_dir, logs)
    manifest = {"capture": CAPTURE, "kafka": KAFKA, "port": port, "broker_config": broker_settings,
                "quota": {"client_id": "throttled-producer", "producer_byte_rate": QUOTA_BYTES},
                "session_timeout_ms": SESSION_MS, "transaction_timeout_ms": TXN_TIMEOUT_MS,
                "timeline": timeline, "clients": results, "oracles": oracles,
                "recorder": recorder.argv()[:-1] + [recorder.bpf],
                "network": "the loopback of a network namespace of its own (tests/lab/netns.py)"}
    path = out / MANIFEST
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    os.chmod(capture, 0o644)
    return path


def _copy_log_dir(source: Path, target: Path) -> None:
    """The partitions that hold data and the root files; empty internal partitions and the
    metadata log (large, not what doctor reads) are left out."""
    target.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        if path.is_file():
            shutil.copy2(path, target / path.name)
            continue
        if path.name.startswith("__cluster_metadata"):
            continue
        logs = list(path.glob("*.log"))
        if path.name.startswith("__") and all(p.stat().st_size == 0 for p in logs):
            continue
        shutil.copytree(path, target / path.name)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["client"]:
        client_main(argv[1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["record"])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    print(record(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
