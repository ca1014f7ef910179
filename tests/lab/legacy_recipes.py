"""Recipes recorded against Apache Kafka (not Tansu): the legacy message formats from a broker
that really stores and serves them, and v2 batches from Kafka 4.

Kafka 3.9.2 runs in ZooKeeper mode with inter.broker.protocol.version and
log.message.format.version 0.10.0 (tests/lab/kafka.py, as tools/make_samples.py runs it), so
it keeps magic 0/1 on disk and in Fetch responses. Each kafka-python client is pinned to one
protocol level and has a topic of its own, whose message.format.version decides the magic on
disk; the broker converts on the way in (produce) and down-converts on the way out (Fetch v0/v1
carry magic 0 only). What each client's requests and fetched message sets must carry is in
its `expect`. Kafka 4.1.2 (KRaft) serves the librdkafka run: record batches v2, every codec.

record(recipe, directory) writes <name>.<pcap|pcapng> and <name>.kafka-manifest.json, in the shape
tests/lab/recipes.py gives its manifests, so tests/lab/checks.py and fixture_readme read both.
The name is not *.manifest.json on purpose: in pcaps/ that suffix marks the Tansu captures of
tools/record_pcaps.py, which its README and tests describe (the Java captures use
*.clients.json for the same reason).
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

from tests.lab import capinfo
from tests.lab.enter_netns import entered
from tests.lab.kafka import KAFKA_3, KAFKA_4, KafkaBroker
from tests.lab.netns import lab_network
from tests.lab.recipes import ALL_CODECS, _loopback_mtu, _tool_version
from tests.lab.recorder import PacketsDropped, Recorder
from tests.lab.runner import run_client

LEGACY_CODECS = "none,gzip,snappy,lz4"  # zstd needs magic 2
LEGACY_BROKER = {"inter.broker.protocol.version": "0.10.0", "log.message.format.version": "0.10.0"}
VETH_PORT, VETH_CONTROLLER_PORT = 9092, 9093
WARM_UP_GROUP = "lab-warm-up"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


@dataclass(frozen=True)
class LabClient:
    """One client script run against its own topic, and what its traffic must show."""

    module: str                              # under tests.lab.clients
    args: tuple[str, ...]
    topic: str
    partitions: int
    topic_config: tuple[tuple[str, str], ...]
    produce_magic: int                       # of every message set in its Produce requests
    fetch_magic: int                         # of every message set in its Fetch responses

    def expect(self) -> dict:
        return {"delivered": True, "consumed": True, "topic": self.topic,
                "partitions": self.partitions, "topic_config": dict(self.topic_config),
                "produce_magic": self.produce_magic, "fetch_magic": self.fetch_magic}


def kafka_python_pinned(api_version: str, topic_format: str, *, codecs: str = LEGACY_CODECS,
                        count: int = 5, value_size: int = 0,
                        log_append_time: bool = False) -> LabClient:
    """kafka-python with api_version pinned; its topic stores message.format.version
    `topic_format` ("0.9.0": magic 0 on disk, "0.10.0": magic 1).

    Produce v0/v1 (0.8.2, 0.9) send magic 0, Produce v2 (0.10.x) magic 1. Fetch v0/v1 (0.8.2,
    0.9) get magic 0, down-converted if need be; Fetch v2/v3 (0.10.0, 0.10.1) get what is on
    disk. Before 0.9 there is no group management: that client assigns itself the partitions.
    log_append_time: the topic's message.timestamp.type is LogAppendTime (magic 1 on disk:
    the broker stamps each wrapper, its inner messages take the wrapper's time).
    """
    level = _version(api_version)
    label = f"kafka-python-{api_version}" + ("-log-append-time" if log_append_time else "")
    disk_magic = 0 if _version(topic_format) < (0, 10) else 1
    topic_config = (("message.format.version", topic_format),)
    if log_append_time:
        topic_config += (("message.timestamp.type", "LogAppendTime"),)
    return LabClient(
        module="kafka_python_client" if level >= (0, 9) else "kafka_python_assigned_client",
        args=("--api-version", api_version, "--label", label, "--codecs", codecs,
              "--count", str(count), "--value-size", str(value_size)),
        topic=f"lab-{label}", partitions=2, topic_config=topic_config,
        produce_magic=0 if level < (0, 10) else 1,
        fetch_magic=0 if level < (0, 10) else disk_magic)


def librdkafka(*, codecs: str = ALL_CODECS, count: int = 5, value_size: int = 0) -> LabClient:
    return LabClient("librdkafka_client", ("--codecs", codecs, "--count", str(count),
                                           "--value-size", str(value_size)),
                     topic="lab-librdkafka", partitions=4, topic_config=(),
                     produce_magic=2, fetch_magic=2)


@dataclass(frozen=True)
class KafkaRecipe:
    name: str
    summary: str
    kafka: str                  # KAFKA_3 (ZooKeeper, legacy formats) or KAFKA_4 (KRaft)
    network: str                # "loopback" or "veth" (two namespaces, MTU 1500)
    tool: str                   # "tcpdump" or "dumpcap"
    fmt: str                    # "pcap" or "pcapng"
    clients: tuple[LabClient, ...]
    linktype: str | None = None

    @property
    def metadata(self) -> str:
        return "zookeeper" if self.kafka == KAFKA_3 else "kraft"

    @property
    def broker_config(self) -> dict[str, object]:
        return dict(LEGACY_BROKER) if self.kafka == KAFKA_3 else {}

    @property
    def encapsulation(self) -> str:
        return "linux-sll2" if self.linktype == "LINUX_SLL2" else "ether"

    @property
    def filename(self) -> str:
        return f"{self.name}.{self.fmt}"


LEGACY_PINS = (("0.8.2", "0.10.0"), ("0.9", "0.9.0"), ("0.10.0", "0.9.0"), ("0.10.1", "0.10.0"))

RECIPES: tuple[KafkaRecipe, ...] = (
    KafkaRecipe(
        "kafka39-legacy",
        "kafka-python pinned to 0.8.2 (Produce v0, Fetch v0, assigned partitions, OffsetCommit v1), "
        "0.9 (Produce v1, Fetch v1, JoinGroup v0), 0.10.0 (Produce v2, Fetch v2) and 0.10.1 "
        "(Produce v2, Fetch v3, JoinGroup v1, and once more to a LogAppendTime topic), each with "
        "codecs none, gzip, snappy, lz4, against "
        "Apache Kafka 3.9.2 in ZooKeeper mode keeping magic 0/1: magic 0 and 1 message sets with "
        "nested compressed wrappers in Produce requests and Fetch responses, lz4 with magic 0's "
        "broken header checksum (KIP-57), converted on the way in and down-converted on the way out",
        KAFKA_3, "loopback", "tcpdump", "pcap",
        tuple(kafka_python_pinned(api, fmt) for api, fmt in LEGACY_PINS)
        + (kafka_python_pinned("0.10.1", "0.10.0", log_append_time=True),)),
    KafkaRecipe(
        "kafka39-legacy-mtu1500",
        "kafka-python pinned to 0.9 (magic 0) and 0.10.1 (magic 1), codecs none, gzip, snappy, lz4, "
        "2000-byte values, against Apache Kafka 3.9.2 (ZooKeeper mode, legacy formats) over the "
        "MTU 1500 veth: Produce requests and Fetch responses span many TCP segments",
        KAFKA_3, "veth", "dumpcap", "pcapng",
        (kafka_python_pinned("0.9", "0.9.0", count=4, value_size=2000),
         kafka_python_pinned("0.10.1", "0.10.0", count=4, value_size=2000))),
    KafkaRecipe(
        "kafka41-librdkafka-mtu1500",
        "librdkafka producers, one per codec (none, gzip, snappy, lz4, zstd), and a committing "
        "consumer group against Apache Kafka 4.1.2 (KRaft) over the MTU 1500 veth: v2 record "
        "batches, 700-byte values",
        KAFKA_4, "veth", "tcpdump", "pcap",
        (librdkafka(count=4, value_size=700),)),
)

BY_NAME = {r.name: r for r in RECIPES}
MANIFEST_SUFFIX = ".kafka-manifest.json"


def manifest_name(name: str) -> str:
    return name + MANIFEST_SUFFIX


def record(recipe: KafkaRecipe, directory: Path, log_dir: Path | None = None,
           attempts: int = 3) -> Path:
    """Record one capture; return its manifest's path. A capture with kernel drops is redone."""
    for attempt in range(1, attempts + 1):
        try:
            return _record_once(recipe, directory, log_dir)
        except PacketsDropped:
            if attempt == attempts:
                raise


def _veth_listeners(recipe: KafkaRecipe, address: str) -> dict[str, object]:
    """Listen on every address of the broker's namespace (the tools use 127.0.0.1 there),
    advertise the veth address the clients reach."""
    config = {"listeners": f"PLAINTEXT://0.0.0.0:{VETH_PORT}",
              "advertised.listeners": f"PLAINTEXT://{address}:{VETH_PORT}"}
    if recipe.metadata == "kraft":
        controller = f"127.0.0.1:{VETH_CONTROLLER_PORT}"
        config.update({"listeners": f"{config['listeners']},CONTROLLER://{controller}",
                       "controller.quorum.voters": f"1@{controller}"})
    return config


def _prepare(broker: KafkaBroker, recipe: KafkaRecipe) -> None:
    """Topics, then the group coordinator, before the capture starts."""
    for client in recipe.clients:
        broker.create_topic(client.topic, client.partitions, dict(client.topic_config))
    if recipe.metadata == "zookeeper":
        _load_group_coordinator(broker.bootstrap, recipe.clients[0].topic)


def _load_group_coordinator(bootstrap: str, topic: str) -> None:
    """One commit by a warm-up group. In ZooKeeper mode the first FindCoordinator creates
    __consumer_offsets, and the controller then sends LeaderAndIsr and UpdateMetadata to the
    broker through the client listener: on loopback that would be in the capture, from no client."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=WARM_UP_GROUP,
                             client_id=WARM_UP_GROUP, enable_auto_commit=False)
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.commit({partition: OffsetAndMetadata(0, "", -1)})
    finally:
        consumer.close()
    time.sleep(1)  # the controller's last UpdateMetadata follows the leader election


def _record_once(recipe: KafkaRecipe, directory: Path, log_dir: Path | None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    capture = directory / recipe.filename
    capture.unlink(missing_ok=True)
    log_dir = log_dir or directory / f"{recipe.name}.logs"
    with ExitStack() as stack:
        if recipe.network == "veth":
            net = stack.enter_context(lab_network())
            config = {**recipe.broker_config, **_veth_listeners(recipe, net.broker.address)}
            with entered(net.broker.netns):
                broker = stack.enter_context(KafkaBroker(recipe.kafka, metadata=recipe.metadata,
                                                         config=config, port=VETH_PORT))
                _prepare(broker, recipe)
            bootstrap = f"{net.broker.address}:{VETH_PORT}"
            client_prefix, interface, mtu = net.client.exec_prefix(), net.client.interface, net.mtu
        elif recipe.network == "loopback":
            broker = stack.enter_context(KafkaBroker(recipe.kafka, metadata=recipe.metadata,
                                                     config=recipe.broker_config))
            _prepare(broker, recipe)
            bootstrap = broker.bootstrap
            client_prefix, interface, mtu = [], "lo", _loopback_mtu()
        else:
            raise ValueError(f"unknown network {recipe.network!r}")
        if recipe.linktype == "LINUX_SLL2":
            interface = "any"
        port = int(bootstrap.rsplit(":", 1)[1])
        recorder = Recorder(capture, interface, f"tcp port {port}", tool=recipe.tool,
                            fmt=recipe.fmt, linktype=recipe.linktype, exec_prefix=client_prefix)
        with recorder:
            clients = []
            for i, run in enumerate(recipe.clients):
                client = run_client(run.module, ["--bootstrap", bootstrap, *run.args],
                                    exec_prefix=client_prefix,
                                    log_path=log_dir / f"{i}-{run.module}.log")
                client["expect"] = run.expect()
                clients.append(client)
        broker_settings = {k: str(v) for k, v in broker.settings.items() if k != "log.dirs"}
    manifest = {
        "file": recipe.filename,
        "summary": recipe.summary,
        "command": f"python tools/record_legacy_pcaps.py --only {recipe.name}",
        "broker": {"name": "apache-kafka", "version": f"Apache Kafka {recipe.kafka}",
                   "bootstrap": bootstrap, "storage": _storage(recipe),
                   "metadata": recipe.metadata, "config": broker_settings},
        "capture": {"tool": _tool_version(recipe.tool),
                    "argv": [recipe.filename if a == str(capture) else a for a in recorder.argv()],
                    "network": recipe.network, "interface": interface, "mtu": mtu,
                    "bpf": recorder.bpf, "format": recipe.fmt, "encapsulation": recipe.encapsulation},
        "file_info": capinfo.describe(capture).to_dict(),
        "clients": clients,
    }
    manifest_path = directory / manifest_name(recipe.name)
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest_path


def _storage(recipe: KafkaRecipe) -> str:
    if recipe.metadata == "zookeeper":
        return ("ZooKeeper mode, log dir on disk, "
                + ", ".join(f"{k}={v}" for k, v in LEGACY_BROKER.items()))
    return "KRaft (combined broker and controller), log dir on disk"
