"""Apache Kafka in the lab: a real broker and Kafka's own tools, from Maven Central jars.

    with KafkaBroker() as kafka:                       # single-node KRaft, fresh log dir
        kafka.create_topic("t", config={"compression.type": "zstd"})
        kafka.console_producer("t", ["a", "b"])
        kafka.console_consumer("t", max_messages=2)    # -> ["a", "b"]
        kafka.dump_log(kafka.partition_dir("t", 0) / "00000000000000000000.log")

The jars come from tests/lab/kafka/pom.xml through `mvn dependency:copy-dependencies` into
~/.cache/kinspect-lab/kafka-<version>/lib (KINSPECT_LAB_CACHE overrides the root), once.
Kafka 3.9 is there for the legacy era: Kafka 4 no longer writes magic 0/1 (KIP-896), and a
3.x broker keeps magic 0/1 on disk only in ZooKeeper mode with an inter-broker protocol
below 3.0, hence `KafkaBroker(KAFKA_3, metadata="zookeeper")`.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

KAFKA_4 = "4.1.2"
KAFKA_3 = "3.9.2"

LAB_FILES = Path(__file__).resolve().parent / "kafka"
CACHE = Path(os.environ.get("KINSPECT_LAB_CACHE", Path.home() / ".cache" / "kinspect-lab"))
LOOPBACK = "127.0.0.1"


class LabError(RuntimeError):
    """The lab could not do what was asked (jars not fetched, broker not started, tool failed)."""


def kafka_lib(version: str = KAFKA_4) -> Path:
    """The directory of jars for `version`, fetched from Maven Central on first use."""
    lib = CACHE / f"kafka-{version}" / "lib"
    if lib.is_dir():
        return lib
    if shutil.which("mvn") is None:
        raise LabError("mvn is not installed: apt-get install maven")
    lib.parent.mkdir(parents=True, exist_ok=True)
    profile = "kafka4" if int(version.split(".")[0]) >= 4 else "kafka3"
    with tempfile.TemporaryDirectory(dir=lib.parent, prefix="lib-") as fetching:
        command = [
            "mvn", "-q", "-B", "-f", str(LAB_FILES / "pom.xml"), f"-Dkafka.version={version}",
            "-P", profile, "dependency:copy-dependencies", "-DincludeScope=runtime",
            f"-DoutputDirectory={fetching}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise LabError(
                f"fetching Kafka {version} from Maven Central failed ({' '.join(command)}):\n"
                + (done.stdout + done.stderr)[-4000:]
            )
        _publish(Path(fetching), lib)
    return lib


def _publish(built: Path, final: Path) -> None:
    """Rename a finished directory into place; whoever comes second keeps the first one's."""
    try:
        built.rename(final)
    except OSError:
        if not final.is_dir():
            raise
    built.mkdir(exist_ok=True)  # for TemporaryDirectory's cleanup


_HANDED_OUT: set[int] = set()
_HANDING_OUT = threading.Lock()  # a cluster's nodes pick their ports at once


def free_port() -> int:
    """A free port on loopback, never one this process was given before: a cluster picks its
    controllers' ports before any is bound, and the kernel may offer one of them again."""
    with _HANDING_OUT:
        while True:
            with socket.socket() as probe:
                probe.bind((LOOPBACK, 0))
                port = probe.getsockname()[1]
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port


def random_cluster_id() -> str:
    """A Kafka Uuid as `kafka-storage random-uuid` prints it: URL-safe base64, no padding.

    Like Kafka's Uuid.randomUuid, never one starting with "-", which command lines would take
    for an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1):
            return True
    except OSError:
        return False


class KafkaTools:
    """Kafka's own command-line tools and Java programs, run from the jars of one version."""

    def __init__(self, version: str = KAFKA_4):
        self.version = version
        self.major = int(version.split(".")[0])
        self.lib = kafka_lib(version)
        self._classes: set[str] | None = None

    @property
    def classpath(self) -> str:
        return str(self.lib / "*")

    def has_class(self, name: str) -> bool:
        if self._classes is None:
            self._classes = set()
            for jar in self.lib.glob("*.jar"):
                with zipfile.ZipFile(jar) as archive:
                    self._classes.update(archive.namelist())
        return name.replace(".", "/") + ".class" in self._classes

    def main_class(self, *candidates: str) -> str:
        """The first of `candidates` these jars have: tools moved packages between 3.x and 4.x."""
        for name in candidates:
            if self.has_class(name):
                return name
        raise LabError(f"Kafka {self.version} has none of {candidates}")

    def java_command(self, main: str, *args: str, level: str = "WARN", heap: str = "256m",
                     classpath: str | None = None, server: bool = False) -> list[str]:
        if self.major >= 4:
            logging = f"-Dlog4j2.configurationFile={LAB_FILES / 'log4j2.properties'}"
        else:
            logging = f"-Dlog4j.configuration=file:{LAB_FILES / 'log4j.properties'}"
        return [
            "java", f"-Xmx{heap}", "-XX:+UseSerialGC",
            # a tool lives seconds: the C1 compiler alone starts it sooner
            *(() if server else ("-XX:TieredStopAtLevel=1",)),
            "-Djava.awt.headless=true", logging, f"-Dkinspect.log.level={level}",
            "-cp", classpath or self.classpath, main, *map(str, args),
        ]

    def run(self, main: str, *args: str, input: str | None = None, timeout: float = 180,
            check: bool = True, cwd: Path | None = None,
            classpath: str | None = None) -> subprocess.CompletedProcess:
        command = self.java_command(main, *args, classpath=classpath)
        done = subprocess.run(command, input=input, capture_output=True, text=True,
                              timeout=timeout, cwd=cwd)
        if check and done.returncode != 0:
            raise LabError(f"{main} {' '.join(map(str, args))} exited {done.returncode}:\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        return done

    def dump_log(self, *files: Path | str, deep: bool = True, data: bool = True,
                 decoder: str | None = None, extra: tuple[str, ...] = (),
                 cwd: Path | None = None) -> str:
        """kafka-dump-log's stdout.

        decoder: offsets, transaction-log, cluster-metadata, share-group-state (4.1+).
        """
        args = ["--files", ",".join(map(str, files))]
        if deep:
            args.append("--deep-iteration")
        if data:
            args.append("--print-data-log")
        if decoder:
            args.append(f"--{decoder}-decoder")
        return self.run("kafka.tools.DumpLogSegments", *args, *extra, cwd=cwd).stdout

    def compile_java(self, source: Path) -> str:
        """Compile one lab Java program against these jars; the classpath to run it with."""
        digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
        classes = CACHE / f"kafka-{self.version}" / f"classes-{source.stem}-{digest}"
        if not classes.is_dir():
            with tempfile.TemporaryDirectory(dir=classes.parent, prefix="classes-") as building:
                done = subprocess.run(
                    ["javac", "-nowarn", "-d", building, "-cp", self.classpath, str(source)],
                    capture_output=True, text=True, timeout=300)
                if done.returncode != 0:
                    raise LabError(f"javac {source} failed:\n{done.stderr[-4000:]}")
                _publish(Path(building), classes)
        return f"{classes}{os.pathsep}{self.classpath}"


class KafkaBroker(KafkaTools):
    """One Apache Kafka broker in a fresh temporary directory; a context manager.

    metadata="kraft": combined broker+controller, formatted like `kafka-storage format`.
    metadata="zookeeper" (3.x only): a ZooKeeper beside it, for the legacy message formats.
    `config` overrides or adds server.properties entries; `port` 0 picks a free one on
    127.0.0.1. `sasl_users` {user: password} (KRaft) adds a SASL_PLAINTEXT listener on
    `sasl_port` with PLAIN and the `scram` mechanisms (SCRAM-SHA-512 unless told), all knowing
    these users (SCRAM's credentials are written at format time); `sasl_properties(user)` are a
    Java client's settings for it.
    stop() is SIGTERM and a wait, so segments and indexes are flushed and trimmed; the log dir
    stays until the context exits (or forever with keep=True or a given workdir).
    """

    def __init__(self, version: str = KAFKA_4, *, config: dict[str, object] | None = None,
                 metadata: str = "kraft", workdir: Path | None = None, keep: bool = False,
                 start_timeout: float = 240, heap: str = "768m", cluster_id: str | None = None,
                 port: int = 0, sasl_users: dict[str, str] | None = None,
                 scram: tuple[str, ...] = ("SCRAM-SHA-512",)):
        super().__init__(version)
        if metadata not in ("kraft", "zookeeper"):
            raise ValueError(f"metadata must be kraft or zookeeper, not {metadata!r}")
        if metadata == "zookeeper" and self.major >= 4:
            raise ValueError("Kafka 4 has no ZooKeeper mode")
        self.metadata = metadata
        self.overrides = dict(config or {})
        self.keep = keep or workdir is not None
        self.workdir = Path(workdir) if workdir else None
        self.start_timeout = start_timeout
        self.heap = heap
        self.cluster_id = cluster_id or random_cluster_id()
        self.requested_port = port
        self.port = 0
        self.sasl_users = dict(sasl_users or {})
        self.scram = tuple(scram)
        self.sasl_port = 0
        self.settings: dict[str, object] = {}
        self._broker: subprocess.Popen | None = None
        self._zookeeper: subprocess.Popen | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> "KafkaBroker":
        try:
            self.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        if not self.keep and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.sasl_port}"

    def sasl_properties(self, user: str, mechanism: str = "PLAIN") -> dict[str, str]:
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                "sasl.jaas.config": f'{module} required username="{user}" '
                                    f'password="{self.sasl_users[user]}";'}

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def broker_log(self) -> Path:
        return self.workdir / "broker.log"

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        return self.log_dir / f"{topic}-{partition}"

    def start(self) -> None:
        self._prepare()
        self._launch()
        self._wait_until_started()

    def _prepare(self) -> None:
        """The work and log dirs, the settings, and the storage formatted (or ZooKeeper started)."""
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"kinspect-kafka-{self.version}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        self.port = self.requested_port or free_port()
        self.sasl_port = free_port() if self.sasl_users else 0
        properties = self.workdir / "server.properties"
        if self.metadata == "kraft":
            settings = self._kraft_settings()
            _write_properties(properties, settings)
            self.run(self.main_class("kafka.tools.StorageTool", "org.apache.kafka.tools.StorageTool"),
                     "format", "--ignore-formatted", f"--cluster-id={self.cluster_id}", "-c", str(properties),
                     *(f"--add-scram={mechanism}=[name={user},password={password}]"
                       for mechanism in self.scram for user, password in self.sasl_users.items()))
        else:
            zk_port = self._start_zookeeper()
            settings = self._zookeeper_settings(zk_port)
            _write_properties(properties, settings)
        self.settings = settings

    def _launch(self) -> None:
        """The broker's JVM; from a thread that lives as long as it should: its parent-death
        signal (_die_with_parent) comes when the thread that started it ends."""
        with open(self.broker_log, "ab") as out:
            self._broker = subprocess.Popen(
                self.java_command("kafka.Kafka", str(self.workdir / "server.properties"), level="INFO",
                                  heap=self.heap, server=True),
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent)

    def stop(self, timeout: float = 120) -> None:
        """SIGTERM, then wait: Kafka's shutdown hook flushes, trims indexes, writes snapshots."""
        self._broker = _terminate(self._broker, timeout)
        self._zookeeper = _terminate(self._zookeeper, 30)

    @property
    def running(self) -> bool:
        return self._broker is not None and self._broker.poll() is None

    def _kraft_settings(self) -> dict[str, object]:
        controller_port = free_port()
        settings = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@{LOOPBACK}:{controller_port}",
            "listeners": f"PLAINTEXT://{LOOPBACK}:{self.port},CONTROLLER://{LOOPBACK}:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        }
        if self.sasl_users:
            sasl = f"SASL_PLAINTEXT://{LOOPBACK}:{self.sasl_port}"
            plain_users = " ".join(f'user_{user}="{password}"' for user, password in self.sasl_users.items())
            settings.update({
                "listeners": f"{settings['listeners']},{sasl}",
                "advertised.listeners": f"{settings['advertised.listeners']},{sasl}",
                "listener.security.protocol.map": settings["listener.security.protocol.map"]
                + ",SASL_PLAINTEXT:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": ",".join(("PLAIN", *self.scram)),
                "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};",
                **{f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config":
                   "org.apache.kafka.common.security.scram.ScramLoginModule required;" for mechanism in self.scram},
            })
        return {**settings, **self._common_settings()}

    def _zookeeper_settings(self, zk_port: int) -> dict[str, object]:
        return {
            "broker.id": 1,
            "zookeeper.connect": f"{LOOPBACK}:{zk_port}",
            "listeners": f"PLAINTEXT://{LOOPBACK}:{self.port}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{self.port}",
            **self._common_settings(),
        }

    def _common_settings(self) -> dict[str, object]:
        return {
            "log.dirs": self.log_dir,
            "num.partitions": 1,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "false",
            **self.overrides,
        }

    def _start_zookeeper(self) -> int:
        zk_port = free_port()
        config = self.workdir / "zookeeper.properties"
        _write_properties(config, {
            "dataDir": self.workdir / "zookeeper", "clientPort": zk_port,
            "clientPortAddress": LOOPBACK, "maxClientCnxns": 0, "admin.enableServer": "false",
        })
        with open(self.workdir / "zookeeper.log", "ab") as out:
            self._zookeeper = subprocess.Popen(
                self.java_command("org.apache.zookeeper.server.quorum.QuorumPeerMain", str(config),
                                  level="INFO", server=True),
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 60
        while not _accepts_connections(zk_port):
            if self._zookeeper.poll() is not None or time.monotonic() > deadline:
                raise LabError("ZooKeeper did not start:\n" + _tail(self.workdir / "zookeeper.log"))
            time.sleep(0.25)
        return zk_port

    def _wait_until_started(self) -> None:
        started = re.compile(rb"Kafka ?Server started|\[KafkaServer id=\d+\] started")
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._broker.poll() is not None:
                raise LabError(f"Kafka {self.version} exited with {self._broker.returncode} "
                               f"while starting:\n{_tail(self.broker_log)}")
            if started.search(self.broker_log.read_bytes()) and _accepts_connections(self.port):
                return
            if time.monotonic() > deadline:
                raise LabError(f"Kafka {self.version} not started after {self.start_timeout} s:\n"
                               f"{_tail(self.broker_log)}")
            time.sleep(0.25)

    # -- Kafka's tools against this broker ----------------------------------------------------

    def topics(self, *args: str) -> str:
        return self.run("org.apache.kafka.tools.TopicCommand",
                        "--bootstrap-server", self.bootstrap, *args).stdout

    def create_topic(self, name: str, partitions: int = 1,
                     config: dict[str, object] | None = None) -> None:
        args = ["--create", "--topic", name, "--partitions", str(partitions),
                "--replication-factor", "1"]
        for key, value in (config or {}).items():
            args += ["--config", f"{key}={value}"]
        self.topics(*args)

    def features(self, *args: str) -> str:
        """kafka-features; e.g. features("upgrade", "--feature", "share.version=1")."""
        return self.run("org.apache.kafka.tools.FeatureCommand",
                        "--bootstrap-server", self.bootstrap, *args).stdout

    def configs(self, *args: str, user: str | None = None) -> str:
        """kafka-configs; e.g. configs("--entity-type", "groups", "--entity-name", "g", "--describe").

        With `user`, through the SASL listener, logged in as that user with PLAIN."""
        return self._admin_tool(self.main_class("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"),
                                args, user)

    def delegation_tokens(self, *args: str, user: str) -> str:
        """kafka-delegation-tokens, through the SASL listener as `user` (tokens need an
        authenticated owner); e.g. delegation_tokens("--describe", user="alice")."""
        return self._admin_tool("org.apache.kafka.tools.DelegationTokenCommand", args, user)

    def _admin_tool(self, main: str, args: tuple[str, ...], user: str | None) -> str:
        if user is None:
            return self.run(main, "--bootstrap-server", self.bootstrap, *args).stdout
        with tempfile.TemporaryDirectory(prefix="kinspect-admin-") as scratch:
            command_config = Path(scratch) / "client.properties"
            _write_properties(command_config, self.sasl_properties(user))
            return self.run(main, "--bootstrap-server", self.sasl_bootstrap, "--command-config",
                            str(command_config), *args).stdout

    def share_groups(self, *args: str) -> str:
        """kafka-share-groups (4.1+); e.g. share_groups("--describe", "--group", "g")."""
        return self.run("org.apache.kafka.tools.consumer.group.ShareGroupCommand",
                        "--bootstrap-server", self.bootstrap, *args).stdout

    def consumer_groups(self, *args: str) -> str:
        """kafka-consumer-groups; e.g. consumer_groups("--describe", "--group", "g")."""
        return self.run("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                        "--bootstrap-server", self.bootstrap, *args).stdout

    def console_producer(self, topic: str, lines: list[str],
                         properties: dict[str, object] | None = None, key_separator: str | None = None) -> None:
        args = ["--bootstrap-server", self.bootstrap, "--topic", topic]
        for key, value in (properties or {}).items():
            args += ["--producer-property", f"{key}={value}"]
        if key_separator is not None:
            args += ["--property", "parse.key=true", "--property", f"key.separator={key_separator}"]
        main = self.main_class("org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer")
        self.run(main, *args, input="".join(line + "\n" for line in lines))

    def console_consumer(self, topic: str, max_messages: int, group: str | None = None,
                         properties: dict[str, object] | None = None,
                         timeout_ms: int = 60000, print_key: bool = False) -> list[str]:
        args = ["--bootstrap-server", self.bootstrap, "--topic", topic, "--from-beginning",
                "--max-messages", str(max_messages), "--timeout-ms", str(timeout_ms)]
        if group is not None:
            args += ["--group", group]
        if print_key:
            args += ["--property", "print.key=true", "--property", "key.separator=\t"]
        for key, value in (properties or {}).items():
            args += ["--consumer-property", f"{key}={value}"]
        main = self.main_class("org.apache.kafka.tools.consumer.ConsoleConsumer",
                               "kafka.tools.ConsoleConsumer")
        return self.run(main, *args).stdout.splitlines()

    def java_clients(self, command: str, properties: dict[str, object], spec: object,
                     timeout: float = 300) -> list[dict]:
        """Run tests/lab/kafka/LabClients.java (4.x clients): produce, consume or committed.

        Returns its events, the Java client's own view of what it sent, read and committed.
        """
        classpath = self.compile_java(LAB_FILES / "LabClients.java")
        properties = {"bootstrap.servers": self.bootstrap, **properties}
        with tempfile.TemporaryDirectory(prefix="kinspect-labclients-") as scratch:
            props_file, spec_file = Path(scratch) / "props.json", Path(scratch) / "spec.json"
            props_file.write_text(json.dumps({k: str(v) for k, v in properties.items()}))
            spec_file.write_text(json.dumps(spec))
            done = self.run("LabClients", command, str(props_file), str(spec_file),
                            classpath=classpath, timeout=timeout)
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the lab's Python dies, so no JVM outlives it."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _write_properties(path: Path, settings: dict[str, object]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))


def _terminate(process: subprocess.Popen | None, timeout: float) -> None:
    if process is None or process.poll() is not None:
        return None
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return None


def _tail(path: Path, size: int = 6000) -> str:
    try:
        return path.read_bytes()[-size:].decode(errors="replace")
    except OSError:
        return f"({path} unreadable)"


def _each(nodes: list, work) -> None:
    """work(node) for every node in threads of their own; the first failure raised once all ended."""
    with ThreadPoolExecutor(len(nodes)) as pool:
        for done in [pool.submit(work, node) for node in nodes]:
            done.result()


class ClusterNode(KafkaBroker):
    """One node of a KafkaCluster: broker and controller, with the cluster's voters. Clients
    reach it on PLAINTEXT (``port``); brokers replicate over INTERNAL, so a capture of the
    PLAINTEXT ports sees client connections only."""

    def __init__(self, node_id: int, voters: str, controller_port: int, **kwargs):
        super().__init__(**kwargs)
        self.node_id = node_id
        self.voters = voters
        self.controller_port = controller_port
        self.internal_port = 0

    def _kraft_settings(self) -> dict[str, object]:
        self.internal_port = free_port()
        return {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "controller.quorum.voters": self.voters,
            "listeners": f"PLAINTEXT://{LOOPBACK}:{self.port},INTERNAL://{LOOPBACK}:{self.internal_port},"
                         f"CONTROLLER://{LOOPBACK}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{self.port},INTERNAL://{LOOPBACK}:{self.internal_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            **self._common_settings(),
        }

    def _wait_until_started(self) -> None:
        """Not here: a node starts only once a quorum of voters runs (KafkaCluster waits)."""

    def wait_until_started(self) -> None:
        KafkaBroker._wait_until_started(self)


class KafkaCluster(KafkaTools):
    """``size`` Apache Kafka KRaft nodes (node ids 1..size), each broker and controller, one
    cluster id, replicated internal topics; a context manager. ``nodes[i].stop()`` stops one.

        with KafkaCluster(3) as cluster:
            cluster.create_topic("t", partitions=6, replication=3)
    """

    def __init__(self, size: int = 3, version: str = KAFKA_4, *, config: dict[str, object] | None = None,
                 heap: str = "512m", start_timeout: float = 300):
        super().__init__(version)
        cluster_id = random_cluster_id()
        controllers = {node: free_port() for node in range(1, size + 1)}
        voters = ",".join(f"{node}@{LOOPBACK}:{port}" for node, port in controllers.items())
        replicated = {"offsets.topic.replication.factor": min(size, 3), "default.replication.factor": min(size, 3),
                      "transaction.state.log.replication.factor": min(size, 3), "transaction.state.log.min.isr": 1,
                      "min.insync.replicas": 1, **(config or {})}
        self.nodes = [ClusterNode(node, voters, port, version=version, config=replicated, heap=heap,
                                  cluster_id=cluster_id, start_timeout=start_timeout)
                      for node, port in controllers.items()]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes if node.running)

    def start(self) -> "KafkaCluster":
        """The nodes' log dirs formatted at once (a JVM each), then their brokers started from
        this thread (see _launch); none finishes starting before a quorum of voters runs."""
        _each(self.nodes, lambda node: node._prepare())
        for node in self.nodes:
            node._launch()
        _each(self.nodes, lambda node: node.wait_until_started())
        return self

    def stop(self, timeout: float = 20) -> None:
        """All at once: stopped one after another, the last ones lose their quorum and wait for
        it until killed."""
        threads = [threading.Thread(target=node.stop, args=(timeout,)) for node in self.nodes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def __enter__(self) -> "KafkaCluster":
        try:
            return self.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
        for node in self.nodes:
            node.__exit__(*exc)

    def create_topic(self, name: str, partitions: int = 1, replication: int = 3) -> None:
        self.run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", self.bootstrap, "--create",
                 "--topic", name, "--partitions", str(partitions), "--replication-factor", str(replication))


class TlsKafkaBroker(KafkaBroker):
    """A single-node KRaft broker with an SSL listener on ``ssl_port`` besides PLAINTEXT, from
    tests/lab/certs.py's stores; ``client_auth="required"`` makes it mTLS.

    With ``sasl_users``, also a SASL_SSL listener on ``sasl_ssl_port`` (besides KafkaBroker's
    SASL_PLAINTEXT one): the same mechanisms and users, over TLS with the same stores, server
    authentication only (Kafka applies the broker-wide ssl.client.auth to SSL listeners only,
    KIP-684; listener.name.sasl_ssl.ssl.client.auth=none says so explicitly)."""

    def __init__(self, keystore: Path, truststore: Path, password: str, client_auth: str = "required",
                 suite_listeners: dict[str, str] | None = None, **kwargs):
        """``suite_listeners``: {listener name: cipher suite}, more SSL listeners that each allow
        that one suite (``suite_ports[name]``): the broker picks the suite, whatever the client
        offers (Python's ssl cannot choose among TLS 1.3 suites)."""
        super().__init__(**kwargs)
        self.keystore, self.truststore, self.password = keystore, truststore, password
        self.client_auth = client_auth
        self.ssl_port = 0
        self.sasl_ssl_port = 0
        self.suite_listeners = dict(suite_listeners or {})
        self.suite_ports: dict[str, int] = {}

    @property
    def ssl_bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.ssl_port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.sasl_ssl_port}"

    def _kraft_settings(self) -> dict[str, object]:
        settings = super()._kraft_settings()
        self.ssl_port = free_port()
        ssl_listener = f"SSL://{LOOPBACK}:{self.ssl_port}"
        settings.update({
            "listeners": f"{settings['listeners']},{ssl_listener}",
            "advertised.listeners": f"{settings['advertised.listeners']},{ssl_listener}",
            "listener.security.protocol.map": f"{settings['listener.security.protocol.map']},SSL:SSL",
            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": self.keystore,
            "ssl.keystore.password": self.password, "ssl.key.password": self.password,
            "ssl.truststore.type": "PKCS12", "ssl.truststore.location": self.truststore,
            "ssl.truststore.password": self.password, "ssl.client.auth": self.client_auth,
        })
        for name, suite in self.suite_listeners.items():
            port = self.suite_ports[name] = free_port()
            listener = f"{name.upper()}://{LOOPBACK}:{port}"
            settings["listeners"] += f",{listener}"
            settings["advertised.listeners"] += f",{listener}"
            settings["listener.security.protocol.map"] += f",{name.upper()}:SSL"
            settings[f"listener.name.{name.lower()}.ssl.cipher.suites"] = suite
        if self.sasl_users:
            settings.update(self._sasl_ssl_settings(settings))
        return settings

    def _sasl_ssl_settings(self, settings: dict[str, object]) -> dict[str, object]:
        """SASL_SSL beside SASL_PLAINTEXT: the JAAS configs are per listener name, so the
        SASL_PLAINTEXT ones are copied under listener.name.sasl_ssl."""
        self.sasl_ssl_port = free_port()
        listener = f"SASL_SSL://{LOOPBACK}:{self.sasl_ssl_port}"
        prefix = "listener.name.sasl_plaintext."
        jaas = {f"listener.name.sasl_ssl.{key.removeprefix(prefix)}": value
                for key, value in settings.items() if key.startswith(prefix) and key.endswith(".sasl.jaas.config")}
        return {
            "listeners": f"{settings['listeners']},{listener}",
            "advertised.listeners": f"{settings['advertised.listeners']},{listener}",
            "listener.security.protocol.map": f"{settings['listener.security.protocol.map']},SASL_SSL:SASL_SSL",
            "listener.name.sasl_ssl.ssl.client.auth": "none",
            **jaas,
        }
