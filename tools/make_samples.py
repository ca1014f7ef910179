"""Regenerate samples/ (and pcaps/java-*.pcap): real segments written by Apache Kafka in the lab.

    python tools/make_samples.py                      # every run below, replacing what is there
    python tools/make_samples.py --only main,legacy   # some of them

Runs (each a fresh broker from tests/lab/kafka.py, stopped cleanly before its files are copied):
  main    Kafka 4.x KRaft: a topic per codec, record shapes, LogAppendTime, idempotent and
          transactional producers, a compacted topic, classic / consumer-protocol / regex groups,
          transactional offset commits, deleted groups and offsets, a share group (KIP-932),
          __transaction_state, __share_group_state, __cluster_metadata with snapshots.
                                                                   -> samples/kafka-<v>/
  expiry  Kafka 4.x with offsets.retention.minutes=1: expired offsets and groups.
                                                                   -> samples/kafka-<v>-expiry/
  legacy  Kafka 3.9 in ZooKeeper mode, inter-broker protocol 0.10.0: magic 0 and 1 message sets
          (none, gzip, snappy, lz4) and a magic-1 __consumer_offsets.  -> samples/kafka-<v>-legacy/
  pcaps   Java clients (console producer/consumer, transactions, consumer-groups) on lo
          with tcpdump.                                            -> pcaps/java-*.pcap

Each sample directory holds logs/ (the broker's log dir: partition directories as the broker
left them, empty internal partitions left out), `<file>.dump.txt` beside every file that
kafka-dump-log reads (from the same jars), manifest.json (every step in order with the clients'
own view: what was sent where, what was consumed, commits, committed()), and the
kafka-consumer-groups outputs.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.lab.kafka import KAFKA_3, KAFKA_4, KafkaBroker, LabError, free_port  # noqa: E402

SAMPLES = REPO / "samples"
PCAPS = REPO / "pcaps"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
DUMPABLE = (".log", ".index", ".timeindex", ".snapshot", ".txnindex", ".checkpoint")
DECODER = {"__consumer_offsets": "offsets", "__transaction_state": "transaction-log",
           "__cluster_metadata": "cluster-metadata", "__share_group_state": "share-group-state"}
# Batches leave the Java producer only on flush(): a step list decides the batch boundaries.
BATCHING = {"linger.ms": 600000, "batch.size": 1048576}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Manifest:
    """Every step of a run in order, with what Kafka's tools and the clients reported."""

    def __init__(self, broker: KafkaBroker, command: str):
        self.data = {
            "kafka": broker.version, "metadata": broker.metadata, "made_by": command,
            "cluster_id": broker.cluster_id if broker.metadata == "kraft" else None,
            "broker_config": {}, "steps": [],
        }
        self.broker = broker
        self.lock = threading.Lock()

    def step(self, kind: str, **fields) -> dict:
        entry = {"step": kind, "at_ms": int(time.time() * 1000), **fields}
        with self.lock:
            self.data["steps"].append(entry)
        return entry

    def create_topic(self, name: str, partitions: int = 1, config: dict | None = None) -> None:
        self.broker.create_topic(name, partitions, config)
        self.step("create_topic", topic=name, partitions=partitions, config=config or {})

    def java(self, command: str, name: str, properties: dict, spec) -> list[dict]:
        events = self.broker.java_clients(command, properties, spec)
        self.step(f"java_{command}", name=name, properties=properties, spec=spec, events=events)
        return events

    def tool(self, label: str, *args: str, command: str = "kafka-consumer-groups") -> str:
        run = {"kafka-consumer-groups": self.broker.consumer_groups, "kafka-features": self.broker.features,
               "kafka-configs": self.broker.configs, "kafka-share-groups": self.broker.share_groups}[command]
        output = run(*args)
        self.step(command, label=label, args=list(args), output=output)
        return output

    def write(self, directory: Path) -> None:
        (directory / "manifest.json").write_text(json.dumps(self.data, indent=1, ensure_ascii=False) + "\n")


# -- copying and dumping ------------------------------------------------------------------------


def has_data(partition: Path) -> bool:
    return any(f.stat().st_size > 0 for f in partition.glob("*.log"))


def copy_log_dir(broker: KafkaBroker, target: Path) -> None:
    """The broker's log dir after a clean shutdown; internal partitions only where they hold data."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for entry in sorted(broker.log_dir.iterdir()):
        if entry.is_file():
            shutil.copy2(entry, target / entry.name)
        elif not entry.name.startswith("__") or entry.name == "__cluster_metadata-0" or has_data(entry):
            shutil.copytree(entry, target / entry.name)


def dump_all(broker: KafkaBroker, logs: Path) -> None:
    """`<file>.dump.txt` beside each file kafka-dump-log reads: one JVM per directory."""
    directories = [logs] + sorted(p for p in logs.iterdir() if p.is_dir())
    for directory in directories:
        files = sorted(f.name for f in directory.iterdir()
                       if f.is_file() and f.suffix in DUMPABLE)
        if directory == logs:
            files = [f for f in files if f == "bootstrap.checkpoint"]
        if not files:
            continue
        topic = directory.name.rsplit("-", 1)[0]
        output = broker.dump_log(*files, decoder=DECODER.get(topic), cwd=directory)
        for name, text in split_dumps(output).items():
            (directory / f"{name}.dump.txt").write_text(text)


def split_dumps(output: str) -> dict[str, str]:
    parts: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines(keepends=True):
        match = re.match(r"Dumping (\S+)$", line.rstrip("\n"))
        if match:
            current = Path(match.group(1)).name
            parts[current] = []
        if current is not None:
            parts[current].append(line)
    return {name: "".join(lines) for name, lines in parts.items()}


def finish(broker: KafkaBroker, manifest: Manifest, directory: Path) -> None:
    broker.stop()
    manifest.step("stop", how="SIGTERM, waited for exit (clean shutdown)",
                  clean_shutdown_marker=(broker.log_dir / ".kafka_cleanshutdown").exists())
    manifest.data["broker_config"] = {k: str(v) for k, v in broker.settings.items()
                                      if k not in ("log.dirs",)}
    copy_log_dir(broker, directory / "logs")
    dump_all(broker, directory / "logs")
    manifest.write(directory)
    (directory / "broker.log.txt").write_text(quiet_broker_log(broker.broker_log))


def quiet_broker_log(path: Path) -> str:
    """The broker's WARN and ERROR lines (its full INFO log is large and says little more)."""
    lines = path.read_text(errors="replace").splitlines()
    return "".join(line + "\n" for line in lines if re.search(r"\] (WARN|ERROR) ", line))


# -- record content -----------------------------------------------------------------------------


def codec_script(topic: str, codec: str) -> list[dict]:
    """15 records in 3 batches; the same content in every codec topic, so decoded values compare."""
    steps = []
    for batch in range(3):
        for i in range(5):
            n = batch * 5 + i
            steps.append({"send": {
                "topic": topic,
                "key": None if n % 7 == 3 else f"key-{n % 4}",
                "value": f"record {n} of 15 (batch {batch}), compressed with {codec}: "
                         + "the quick brown fox jumps over the lazy dog " * (1 + n % 3),
                "headers": [["n", str(n)], ["batch", str(batch)]] if n % 2 == 0 else [],
            }})
        steps.append({"flush": True})
    return steps


SHAPES = [
    {"key": "plain", "value": "key, value, two headers", "headers": [["h1", "a"], ["h2", "b"]]},
    {"key": None, "value": "null key"},
    {"key": "null-value", "value": None},
    {"key": None, "value": None},
    {"key": "", "value": "", "headers": [["", ""]]},
    {"key": "header-null-value", "value": "a header whose value is null", "headers": [["nothing", None]]},
    {"key": "duplicate-headers", "value": "the same header key twice", "headers": [["dup", "1"], ["dup", "2"]]},
    {"key": {"b64": "AAH+/w=="}, "value": {"b64": "//79AAECAwQFBgcICQ=="}, "headers": [["bin", {"b64": "gIE="}]]},
    {"key": "ключ", "value": "值 — ünïcödé 😀", "headers": [["émoji", "🦀"]]},
    {"key": "old-timestamp", "value": "explicit CreateTime 2023-11-14T22:13:20Z", "timestamp": 1700000000000},
    {"key": "zero-timestamp", "value": "explicit CreateTime 0", "timestamp": 0},
    {"key": "json", "value": "{\"id\": 7, \"tags\": [\"a\", \"b\"], \"ok\": true}"},
    {"key": "big", "value": "0123456789abcdef" * 256},
]


def shapes_script(topic: str) -> list[dict]:
    steps = []
    for index, shape in enumerate(SHAPES):
        steps.append({"send": {"topic": topic, **shape}})
        if index in (3, 8, len(SHAPES) - 1):
            steps.append({"flush": True})
    return steps


def simple_script(topic: str, prefix: str, batches: int, per_batch: int, partitions: int = 1,
                  key=lambda n: f"k{n}") -> list[dict]:
    steps = []
    for batch in range(batches):
        for i in range(per_batch):
            n = batch * per_batch + i
            steps.append({"send": {"topic": topic, "partition": n % partitions,
                                   "key": key(n), "value": f"{prefix} {n}"}})
        steps.append({"flush": True})
    return steps


def transaction_script(topic: str, plan: list[tuple[str, int, int]]) -> list[dict]:
    """plan: (commit|abort, records to partition 0, records to partition 1) per transaction."""
    steps = []
    for number, (outcome, p0, p1) in enumerate(plan):
        steps.append({"begin": True})
        for partition, count in ((0, p0), (1, p1)):
            for i in range(count):
                steps.append({"send": {"topic": topic, "partition": partition, "key": f"txn{number}",
                                       "value": f"transaction {number} ({outcome}) p{partition} #{i}"}})
        steps.append({outcome: True})
    return steps


# -- the runs -----------------------------------------------------------------------------------


def wait_for(what: str, condition, timeout: float, interval: float = 1.0) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise LabError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - start


def cleaner_checkpoint(broker: KafkaBroker) -> dict[str, int]:
    path = broker.log_dir / "cleaner-offset-checkpoint"
    entries = {}
    for line in path.read_text().splitlines()[2:] if path.exists() else []:
        topic, partition, offset = line.split()
        entries[f"{topic}-{partition}"] = int(offset)
    return entries


def consume_concurrently(manifest: Manifest, members: list[tuple[str, dict, dict]]) -> None:
    with ThreadPoolExecutor(len(members)) as pool:
        for future in [pool.submit(manifest.java, "consume", *member) for member in members]:
            future.result()


def run_main(command: str) -> Path:
    directory = SAMPLES / f"kafka-{KAFKA_4}"
    config = {
        "log.cleaner.backoff.ms": 1000,
        # a metadata snapshot (.checkpoint) every 40 s, idle NoOp records every 5 s instead of 0.5 s
        "metadata.log.max.snapshot.interval.ms": 40000,
        "metadata.max.idle.interval.ms": 5000,
    }
    with KafkaBroker(KAFKA_4, config=config) as broker:
        log(f"main: Kafka {broker.version} at {broker.bootstrap}, {broker.workdir}")
        m = Manifest(broker, command)
        small_index = {"index.interval.bytes": 256}

        for codec in CODECS:
            topic = f"codec-{codec}"
            m.create_topic(topic, config=small_index)
            m.java("produce", topic, {"compression.type": codec, "enable.idempotence": "false",
                                      "acks": "1", **BATCHING}, codec_script(topic, codec))
        m.create_topic("record-shapes", config=small_index)
        m.java("produce", "record-shapes", {"compression.type": "none", **BATCHING},
               shapes_script("record-shapes"))
        m.create_topic("log-append-time", config={"message.timestamp.type": "LogAppendTime"})
        for codec in ("none", "gzip"):
            m.java("produce", f"log-append-time-{codec}", {"compression.type": codec, **BATCHING},
                   simple_script("log-append-time", f"LogAppendTime {codec}", 1, 4))

        m.create_topic("idempotent", config=small_index)
        for producer in ("a", "b"):
            m.java("produce", f"idempotent-{producer}",
                   {"enable.idempotence": "true", "acks": "all", "compression.type": "lz4", **BATCHING},
                   simple_script("idempotent", f"idempotent producer {producer} record", 3, 4))

        m.create_topic("transactions", partitions=2)
        m.java("produce", "lab-txn", {"transactional.id": "lab-txn", **BATCHING},
               transaction_script("transactions", [("commit", 3, 2), ("abort", 2, 1), ("commit", 2, 0)]))
        m.java("produce", "lab-txn-2", {"transactional.id": "lab-txn-2", "compression.type": "zstd", **BATCHING},
               transaction_script("transactions", [("abort", 2, 2), ("commit", 1, 1)]))
        m.create_topic("txn-out")
        m.java("produce", "lab-txn-offsets", {"transactional.id": "lab-txn-offsets", **BATCHING}, [
            {"begin": True}, {"send": {"topic": "txn-out", "key": "t1", "value": "offsets committed"}},
            {"offsets": {"group": "group-txn", "offsets": [{"topic": "codec-none", "partition": 0, "offset": 5}]}},
            {"commit": True},
            {"begin": True}, {"send": {"topic": "txn-out", "key": "t2", "value": "offsets aborted"}},
            {"offsets": {"group": "group-txn", "offsets": [{"topic": "codec-none", "partition": 0, "offset": 10},
                                                           {"topic": "codec-gzip", "partition": 0, "offset": 3}]}},
            {"abort": True},
            {"begin": True}, {"send": {"topic": "txn-out", "key": "t3", "value": "offsets committed again"}},
            {"offsets": {"group": "group-txn", "offsets": [{"topic": "codec-lz4", "partition": 0, "offset": 15,
                                                            "metadata": "txn"}]}},
            {"commit": True},
        ])

        compacted_run(m)
        share_group_run(m)

        codec_topics = [f"codec-{c}" for c in CODECS]
        consume_concurrently(m, [
            ("group-classic", {"group.id": "group-classic", "group.protocol": "classic",
                               "client.id": f"classic-{i}", "max.poll.records": 5},
             {"topics": codec_topics, "expect": 75, "idle_ms": 8000, "commit_every": 5, "record_delay_ms": 200,
              "commit_metadata": f"classic member {i}"}) for i in (1, 2)])
        consume_concurrently(m, [
            ("group-consumer", {"group.id": "group-consumer", "group.protocol": "consumer",
                                "client.id": f"consumer-{i}", "max.poll.records": 5},
             {"topics": codec_topics, "expect": 75, "idle_ms": 8000, "commit_every": 5, "record_delay_ms": 200,
              "commit_metadata": f"consumer-protocol member {i}"}) for i in (1, 2)])
        m.java("consume", "group-regex", {"group.id": "group-regex", "group.protocol": "consumer"},
               {"pattern": "codec-(gzip|zstd)", "expect": 30, "timeout_ms": 90000})
        m.java("consume", "group-read-committed",
               {"group.id": "group-read-committed", "isolation.level": "read_committed"},
               {"topics": ["transactions", "txn-out"], "expect": 10, "idle_ms": 5000})
        for group, protocol in (("group-deleted", "classic"), ("group-consumer-deleted", "consumer")):
            m.java("consume", group, {"group.id": group, "group.protocol": protocol},
                   {"topics": ["codec-none", "record-shapes"], "expect": 28})
            m.tool(f"delete {group}", "--delete", "--group", group)
        m.tool("delete the offsets of one topic", "--delete-offsets", "--group", "group-classic",
               "--topic", "codec-zstd")

        groups = ["group-classic", "group-consumer", "group-regex", "group-read-committed", "group-txn",
                  "group-deleted", "group-consumer-deleted"]
        record_group_views(m, groups, codec_topics + ["record-shapes", "transactions", "txn-out"])
        wait_for_snapshot(m, broker)
        finish(broker, m, directory)
    log(f"main: written {directory}")
    return directory


def compacted_run(m: Manifest) -> None:
    """Three segments rolled by time, tombstones among them, then the cleaner run over them."""
    broker = m.broker
    m.create_topic("compacted", config={
        "cleanup.policy": "compact", "segment.ms": 3000, "min.cleanable.dirty.ratio": 0,
        "min.compaction.lag.ms": 0, "delete.retention.ms": 86400000, "index.interval.bytes": 64})
    rounds = [
        [(f"k{n}", f"k{n} v1") for n in range(6)],
        [("k0", "k0 v2"), ("k1", "k1 v2"), ("k2", "k2 v2"), ("k3", None), ("k4", None)],
        [("k5", "k5 v3"), ("k0", "k0 v3"), ("k6", "k6 v1")],
        [("k7", "rolls the last round out of the active segment")],
    ]
    for number, pairs in enumerate(rounds):
        if number:
            time.sleep(3.5)
        script = [{"send": {"topic": "compacted", "key": k, "value": v}} for k, v in pairs]
        m.java("produce", f"compacted-round-{number}", {**BATCHING}, script + [{"flush": True}])
    dirty_end = 14  # offsets 0..13 are the three rounds before the last, active segment
    waited = wait_for("the log cleaner on compacted-0",
                      lambda: cleaner_checkpoint(broker).get("compacted-0", 0) >= dirty_end, 120)
    m.step("wait", what="log cleaner compacted compacted-0", seconds=round(waited, 1),
           cleaner_offset_checkpoint=cleaner_checkpoint(broker).get("compacted-0"))
    m.java("consume", "compacted-view", {"group.id": "compacted-reader"},
           {"topics": ["compacted"], "expect": 100, "idle_ms": 5000, "no_final_commit": True})


def share_group_run(m: Manifest) -> None:
    """KIP-932 share groups (preview in 4.1): records 10-15 and __share_group_state."""
    m.tool("enable share groups", "upgrade", "--feature", "share.version=1", command="kafka-features")
    m.create_topic("share-work", partitions=2)
    m.java("produce", "share-work", {**BATCHING}, simple_script("share-work", "share work", 2, 6, partitions=2))
    m.tool("share group reads from the start", "--entity-type", "groups", "--entity-name", "group-share",
           "--alter", "--add-config", "share.auto.offset.reset=earliest", command="kafka-configs")
    m.java("share", "group-share", {"group.id": "group-share", "client.id": "share-member"},
           {"topics": ["share-work"], "expect": 10, "release_first": True, "reject_every": 5})
    m.tool("describe share group", "--describe", "--group", "group-share", command="kafka-share-groups")
    m.tool("describe share group state", "--describe", "--group", "group-share", "--state",
           command="kafka-share-groups")


def record_group_views(m: Manifest, groups: list[str], topics: list[str]) -> None:
    """What Kafka's tools and each group's committed() say, after everything happened."""
    partitions = [[t, 0] for t in topics] + [["transactions", 1]]
    for group in groups:
        m.java("committed", group, {"group.id": group}, {"partitions": partitions})
    m.tool("list", "--list")
    m.tool("describe offsets", "--describe", "--all-groups")
    m.tool("describe members", "--describe", "--all-groups", "--members", "--verbose")
    m.tool("describe state", "--describe", "--all-groups", "--state")


def wait_for_snapshot(m: Manifest, broker: KafkaBroker) -> None:
    metadata = broker.partition_dir("__cluster_metadata")
    waited = wait_for("a __cluster_metadata snapshot", lambda: any(metadata.glob("*.checkpoint")), 120)
    m.step("wait", what="a __cluster_metadata snapshot (.checkpoint)", seconds=round(waited, 1),
           snapshots=sorted(p.name for p in metadata.glob("*.checkpoint")))


def run_expiry(command: str) -> Path:
    directory = SAMPLES / f"kafka-{KAFKA_4}-expiry"
    config = {"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 2000,
              "metadata.max.idle.interval.ms": 5000}
    with KafkaBroker(KAFKA_4, config=config) as broker:
        log(f"expiry: Kafka {broker.version} at {broker.bootstrap}")
        m = Manifest(broker, command)
        m.create_topic("expiring", partitions=2)
        m.java("produce", "expiring", {**BATCHING}, simple_script("expiring", "expiring", 2, 6, partitions=2))
        for group, protocol in (("expired-classic", "classic"), ("expired-consumer", "consumer")):
            m.java("consume", group, {"group.id": group, "group.protocol": protocol},
                   {"topics": ["expiring"], "expect": 12, "commit_every": 4})
        m.tool("describe before expiry", "--describe", "--all-groups")
        wait_for("expired offsets (groups gone from --list)",
                 lambda: not [g for g in broker.consumer_groups("--list").split() if g.startswith("expired-")],
                 240, interval=3)
        m.step("wait", what="offsets.retention.minutes passed: the groups' offsets expired and the groups went away")
        for group in ("expired-classic", "expired-consumer"):
            m.java("committed", group, {"group.id": group}, {"partitions": [["expiring", 0], ["expiring", 1]]})
        m.tool("list after expiry", "--list")
        finish(broker, m, directory)
    log(f"expiry: written {directory}")
    return directory


def run_legacy(command: str) -> Path:
    """Magic 0 and 1 on disk: ZooKeeper mode, inter-broker protocol 0.10.0, old clients."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # kafka-python

    directory = SAMPLES / f"kafka-{KAFKA_3}-legacy"
    config = {"inter.broker.protocol.version": "0.10.0", "log.message.format.version": "0.10.0"}
    with KafkaBroker(KAFKA_3, metadata="zookeeper", config=config) as broker:
        log(f"legacy: Kafka {broker.version} (ZooKeeper) at {broker.bootstrap}")
        m = Manifest(broker, command)
        topics = []
        for magic, fmt, api in ((0, "0.9.0", (0, 9)), (1, "0.10.0", (0, 10, 1))):
            for codec in ("none", "gzip", "snappy", "lz4"):
                topic = f"legacy-v{magic}-{codec}"
                topics.append(topic)
                # kafka-python sends uncompressed; the broker (de)compresses to the topic's codec
                m.create_topic(topic, config={"message.format.version": fmt,
                                              "compression.type": "producer" if codec == "none" else codec,
                                              "index.interval.bytes": 128})
                legacy_produce(m, KafkaProducer, topic, api, None)
        for codec in ("gzip", "snappy"):
            topic = f"legacy-v1-client-{codec}"
            topics.append(topic)
            m.create_topic(topic, config={"message.format.version": "0.10.0"})
            legacy_produce(m, KafkaProducer, topic, (0, 10, 1), codec)
        topic = "legacy-v1-log-append-time"
        topics.append(topic)
        m.create_topic(topic, config={"message.format.version": "0.10.0", "compression.type": "gzip",
                                      "message.timestamp.type": "LogAppendTime"})
        legacy_produce(m, KafkaProducer, topic, (0, 10, 1), None)

        # kafka-python reads magic-0 LZ4 only with the xxhash package: that topic is left to Java.
        readable = [t for t in topics if t != "legacy-v0-lz4"]
        consumer = KafkaConsumer(*readable, bootstrap_servers=broker.bootstrap, api_version=(0, 10, 1),
                                 group_id="legacy-group", client_id="legacy-consumer",
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 consumer_timeout_ms=10000)
        consumed = [{"topic": r.topic, "partition": r.partition, "offset": r.offset,
                     "timestamp": r.timestamp, "timestamp_type": r.timestamp_type,
                     "key": text(r.key), "value": text(r.value)} for r in consumer]
        consumer.commit()
        committed = [{"topic": t, "partition": 0, "offset": consumer.committed(TopicPartition(t, 0))}
                     for t in readable]
        consumer.close()
        m.step("kafka_python_consume", name="legacy-group", api_version="0.10.1",
               records=consumed, committed=committed)
        for topic in topics:
            lines = broker.console_consumer(topic, 12, group="legacy-console", print_key=True)
            m.step("console_consumer", topic=topic, group="legacy-console", output=lines)
        m.tool("describe offsets", "--describe", "--all-groups")
        m.tool("describe state", "--describe", "--all-groups", "--state")
        finish(broker, m, directory)
    log(f"legacy: written {directory}")
    return directory


def legacy_produce(m: Manifest, producer_class, topic: str, api: tuple, codec: str | None) -> None:
    producer = producer_class(bootstrap_servers=m.broker.bootstrap, api_version=api,
                              compression_type=codec, linger_ms=100000, delivery_timeout_ms=200000,
                              batch_size=1048576,
                              client_id=f"kafka-python-{topic}")
    sent = []
    for batch in range(3):
        futures = []
        for i in range(4):
            n = batch * 4 + i
            key = None if n % 5 == 2 else f"key-{n % 3}".encode()
            value = None if n == 6 else f"{topic} record {n} (batch {batch}) {'lorem ipsum ' * (n % 3)}".encode()
            futures.append((key, value, producer.send(topic, value=value, key=key)))
        producer.flush()
        for key, value, future in futures:
            meta = future.get(timeout=30)
            sent.append({"partition": meta.partition, "offset": meta.offset, "timestamp": meta.timestamp,
                         "key": text(key), "value": text(value)})
    producer.close()
    m.step("kafka_python_produce", name=topic, api_version=".".join(map(str, api)),
           compression=codec or "none", sent=sent)


def text(data: bytes | None):
    return None if data is None else data.decode()


# -- Java clients on the wire -------------------------------------------------------------------


class Tcpdump:
    def __init__(self, path: Path, port: int):
        self.argv = ["tcpdump", "-i", "lo", "-s", "0", "-U", "-Z", "root", "-w", str(path), f"tcp port {port}"]
        self.process = None

    def __enter__(self) -> "Tcpdump":
        self.process = subprocess.Popen(self.argv, stderr=subprocess.PIPE, text=True)
        line = self.process.stderr.readline()  # "listening on lo, ..." once it captures
        if "listening" not in line:
            raise LabError(f"tcpdump did not start: {line}")
        return self

    def __exit__(self, *exc) -> None:
        time.sleep(1)
        self.process.send_signal(signal.SIGINT)
        self.process.wait(30)


def run_pcaps(command: str) -> list[Path]:
    port = 9092 if free_port_is(9092) else free_port()
    written = []
    with KafkaBroker(KAFKA_4, port=port) as broker:
        log(f"pcaps: Kafka {broker.version} at {broker.bootstrap}")
        broker.create_topic("java-lab", partitions=2)

        def capture(name: str, summary: str, action) -> None:
            path = PCAPS / f"java-{name}.pcap"
            with Tcpdump(path, broker.port) as tcpdump:
                details = action()
            size = path.stat().st_size
            if size > 300_000:
                raise LabError(f"{path} is {size} bytes, over the 300 KB budget")
            (PCAPS / f"java-{name}.clients.json").write_text(json.dumps({
                "file": path.name, "summary": summary, "made_by": command,
                "broker": {"name": "apache-kafka", "version": broker.version, "bootstrap": broker.bootstrap},
                "capture": {"argv": tcpdump.argv[:-3] + ["-w", path.name, tcpdump.argv[-1]]},
                **details}, indent=1, ensure_ascii=False) + "\n")
            written.append(path)
            log(f"pcaps: {path.name} {size} bytes")

        def produce(lines: list[str], **options) -> dict:
            broker.console_producer("java-lab", lines, **options)
            return {"input": lines}

        def consume(group: str, **options) -> dict:
            return {"output": broker.console_consumer("java-lab", 20, group=group, print_key=True, **options)}

        def transactions() -> dict:
            return {"events": broker.java_clients("produce", {"transactional.id": "java-txn", **BATCHING}, [
                {"begin": True}, {"send": {"topic": "java-lab", "partition": 0, "key": "a", "value": "committed"}},
                {"offsets": {"group": "java-txn-group", "offsets": [{"topic": "java-lab", "partition": 0, "offset": 1}]}},
                {"commit": True},
                {"begin": True}, {"send": {"topic": "java-lab", "partition": 1, "key": "b", "value": "aborted"}},
                {"abort": True}])}

        capture("console-producer",
                "kafka-console-producer: 10 keyed lines (parse.key, ':' separator), default idempotent producer",
                lambda: produce([f"key-{n % 3}:console producer line {n}" for n in range(10)], key_separator=":"))
        capture("console-producer-zstd", "kafka-console-producer with compression.type=zstd, 10 lines",
                lambda: produce([f"zstd line {n}" for n in range(10)], properties={"compression.type": "zstd"}))
        capture("console-consumer", "kafka-console-consumer in classic group java-console, 20 records",
                lambda: consume("java-console"))
        capture("console-consumer-kip848",
                "kafka-console-consumer with group.protocol=consumer (KIP-848 ConsumerGroupHeartbeat)",
                lambda: consume("java-console-848", properties={"group.protocol": "consumer"}))
        capture("transactions", "LabClients.java: transactional producer, one commit and one abort, "
                "with offsets sent to the transaction (TxnOffsetCommit)", transactions)
        capture("consumer-groups-describe", "kafka-consumer-groups --describe --all-groups (admin client)",
                lambda: {"output": broker.consumer_groups("--describe", "--all-groups")})
    return written


def free_port_is(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


RUNS = {"main": run_main, "expiry": run_expiry, "legacy": run_legacy, "pcaps": run_pcaps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(RUNS), help=f"comma-separated: {', '.join(RUNS)}")
    parser.add_argument("--samples", type=Path, default=REPO / "samples", help="where sample directories go")
    parser.add_argument("--pcaps", type=Path, default=REPO / "pcaps", help="where java-*.pcap go")
    options = parser.parse_args()
    global SAMPLES, PCAPS
    SAMPLES, PCAPS = options.samples, options.pcaps
    names = options.only.split(",")
    unknown = set(names) - set(RUNS)
    if unknown:
        parser.error(f"unknown runs: {sorted(unknown)}")
    command = "python tools/make_samples.py" + ("" if options.only == parser.get_default("only")
                                                 else f" --only {options.only}")
    for name in names:
        RUNS[name](command)


if __name__ == "__main__":
    main()
