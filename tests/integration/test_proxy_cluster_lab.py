"""kinspect proxy in front of a three-broker Apache Kafka 4 KRaft cluster (issue 13's tests).

Clients bootstrap to the proxy only. The brokers replicate over a listener of their own, so the
client-facing ports see clients alone: a capture of SYNs to them must show the proxy's upstream
connections (their source ports are in its log) and nothing else. Topics have leaders on every
broker; a producer keeps producing while one broker stops, its partitions' leadership moves,
and every value arrives; consumer groups coordinated by different brokers work.
"""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import confluent_kafka as ck
import pytest

from kinspect.groups.partition import partition_for
from kinspect.wire.encode import encode_request
from kinspect.wire.messages import decode_body
from tests.integration.test_proxy_lab import Proxy, _json_lines, _read_frame, free_base
from tests.lab.kafka import KafkaCluster
from tests.lab.pytest_fixtures import require_lab_host
from tests.lab.recorder import Recorder
from tests.lab.runner import run_client

pytestmark = pytest.mark.lab

UPSTREAM = re.compile(r"-> (?:bootstrap|broker \d+) 127\.0\.0\.1:(\d+) from 127\.0\.0\.1:(\d+): connected")


@pytest.fixture(scope="module")
def cluster():
    require_lab_host()
    with KafkaCluster(3) as c:
        yield c


def _syns(pcap) -> list[tuple[int, int]]:
    """(source port, destination port) of every connection attempt in the capture."""
    out = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-e", "tcp.srcport", "-e", "tcp.dstport",
                          "-Y", "tcp.flags.syn == 1 && tcp.flags.ack == 0"], capture_output=True, text=True,
                         check=True)
    return [tuple(map(int, line.split())) for line in out.stdout.splitlines() if line.strip()]


def _offsets_leaders(cluster) -> dict[int, int]:
    """__consumer_offsets partition -> leader: the topic made (a FindCoordinator straight to a
    broker, before the test's capture), then described by kafka-topics."""
    deadline = time.monotonic() + 90
    while True:
        with socket.create_connection(("127.0.0.1", cluster.nodes[0].port), timeout=30) as s:
            s.sendall(encode_request(10, 3, 1, "setup", {"key": "setup", "key_type": 0}))
            frame = _read_frame(s)
        body, _ = decode_body(10, 3, "response", frame, start=9)  # size, correlation id, empty tags
        if body["error_code"] == 0:
            break
        assert time.monotonic() < deadline, body
        time.sleep(1)
    described = cluster.run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", cluster.bootstrap,
                            "--describe", "--topic", "__consumer_offsets").stdout
    return {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"Partition: (\d+)\s+Leader: (\d+)", described)}


def _records_held(bootstrap: str, topic: str, partitions: int) -> int:
    """How many records the topic holds: the sum of its partitions' end offsets (nothing deleted,
    no transactions' markers)."""
    reader = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets", "client.id": "end-offsets"})
    try:
        return sum(reader.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)[1]
                   for p in range(partitions))
    finally:
        reader.close()


def _group_on(leaders: dict[int, int], broker: int, prefix: str) -> str:
    """A group name whose coordinator is ``broker`` (its __consumer_offsets partition's leader)."""
    return next(name for i in range(10_000) if leaders[partition_for(name := f"{prefix}-{i}", len(leaders))] == broker)


def test_clients_of_a_three_broker_cluster_reach_every_broker_through_the_proxy_only(cluster, tmp_path):
    topic = "spread"
    cluster.create_topic(topic, partitions=6, replication=3)
    leaders = _offsets_leaders(cluster)
    assert set(leaders.values()) == {1, 2, 3}
    groups = {"rdk": _group_on(leaders, 1, "g-rdk"), "kp": _group_on(leaders, 2, "g-kp"),
              "java": _group_on(leaders, 3, "g-java")}
    base = free_base()
    bootstrap = f"127.0.0.1:{base}"
    broker_ports = [node.port for node in cluster.nodes]
    recorder = Recorder(tmp_path / "syns.pcap", "lo", " or ".join(f"dst port {p}" for p in broker_ports)
                        + " and tcp[tcpflags] & tcp-syn != 0")
    proxy = Proxy(["--listen", bootstrap, "--upstream", cluster.nodes[0].bootstrap, "--json"]).start()
    delivered, failed = [], []
    with recorder:
        # at once (the suite's time): librdkafka and kafka-python, each producing and consuming in a
        # group of its own, and Kafka's Java console producer
        java_values = [f"java-console-{i}" for i in range(10)]
        producer = cluster.main_class("org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer")
        with ThreadPoolExecutor(3) as pool:
            clients = [
                pool.submit(run_client, "librdkafka_client", ["--bootstrap", bootstrap, "--topic", topic, "--codecs",
                                                              "none,zstd", "--count", "12", "--label", "cluster-rdk",
                                                              "--group", groups["rdk"]]),
                pool.submit(run_client, "kafka_python_client", ["--bootstrap", bootstrap, "--topic", topic,
                                                                "--codecs", "none", "--count", "12", "--label",
                                                                "cluster-kp", "--group", groups["kp"]]),
                pool.submit(cluster.run, producer, "--bootstrap-server", bootstrap, "--topic", topic,
                            input="".join(v + "\n" for v in java_values)),
            ]
            manifests = [c.result() for c in clients[:2]]
            clients[2].result()
        # a producer going on while broker 2 stops: leadership moves, nothing is lost
        p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "client.id": "cluster-moving", "message.timeout.ms": 60000,
                         "enable.idempotence": True})

        def report(err, msg):
            (failed if err else delivered).append(msg.value().decode() if not err else str(err))

        stop_at = 150
        stopping = threading.Thread(target=cluster.nodes[1].stop, daemon=True)
        for i in range(400):
            p.produce(topic, key=str(i).encode(), value=f"moving-{i}".encode(), on_delivery=report)
            p.poll(0.01)
            if i == stop_at:
                stopping.start()
        assert p.flush(90) == 0
        # every value back, read by a Java console consumer in a group of its own: every record the
        # topic holds (its end offsets, through the proxy), not what came before 6 s of silence
        consumer = cluster.main_class("org.apache.kafka.tools.consumer.ConsoleConsumer", "kafka.tools.ConsoleConsumer")
        expected = {p_["value"] for m in manifests for p_ in m["produced"]} | set(java_values) | set(delivered)
        held = _records_held(bootstrap, topic, 6)
        consumed = cluster.run(consumer, "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning",
                               "--group", groups["java"], "--max-messages", str(held), "--timeout-ms", "60000",
                               check=False).stdout.splitlines()
    # broker 2 stopped and the proxy saw it close before the proxy stops (the consumer no longer
    # waits out 6 s of silence, which used to give the broker that time)
    stopping.join(120)
    proxy.log_has(r"broker 2 .*closed by broker", timeout=30)
    code, out = proxy.stop()
    assert code == 0, "\n".join(proxy.stderr)
    assert failed == [] and len(delivered) == 400
    for m in manifests:
        values = {p_["value"] for p_ in m["produced"] if p_["delivered"]}
        assert len(values) == len(m["produced"]) > 0
        assert values <= {c["value"] for c in m["consumed"]}, m["notes"]
    assert set(consumed) == expected
    moving = [v for v in consumed if v.startswith("moving-")]
    assert len(moving) == len(set(moving)) == 400  # idempotent: each once, none lost while leadership moved

    records = _json_lines(out)
    exchanges = [r for r in records if r["type"] == "exchange"]
    ports = {node.node_id: proxy_port for node, proxy_port in
             ((n, base + 1 + n.node_id) for n in cluster.nodes)}
    # leaders on all three brokers, as the clients saw them: at the proxy's ports
    leaders = set()
    for r in exchanges:
        if r["api_name"] == "Metadata" and r["response"]:
            assert {(b["host"], b["port"]) for b in r["response"]["brokers"]} <= \
                {("127.0.0.1", port) for port in ports.values()}
            leaders |= {part["leader_id"] for t in r["response"]["topics"] if t["name"] == topic
                        for part in t["partitions"]}
    assert leaders == {1, 2, 3}
    # every client connection went to the proxy: the brokers' client ports saw only the
    # proxy's own upstream connections
    upstream_ports = {int(m.group(2)) for line in proxy.stderr if (m := UPSTREAM.search(line))}
    syns = _syns(recorder.output)
    assert syns and {src for src, dst in syns} <= upstream_ports, (syns, upstream_ports)
    assert {int(r["conn"].rsplit(":", 1)[1]) for r in exchanges} <= {base, *ports.values()}
    # coordinators on more than one broker, each group worked
    coordinators = set()
    for r in exchanges:
        if r["api_name"] == "FindCoordinator" and r["response"]:
            body = r["response"]
            for entry in body.get("coordinators") or [body]:
                if entry.get("node_id", -1) >= 0:
                    assert (entry["host"], entry["port"]) == ("127.0.0.1", ports[entry["node_id"]])
                    coordinators.add(entry["node_id"])
    assert coordinators == {1, 2, 3}, coordinators  # a group coordinated by each broker worked
    # the move was seen: NOT_LEADER_OR_FOLLOWER (or a broker gone) and KIP-951 endpoints rewritten
    moved = [r for r in exchanges if r["api_name"] == "Produce" and r["response"]
             and r["response"].get("node_endpoints")]
    for r in moved:
        assert {(e["host"], e["port"]) for e in r["response"]["node_endpoints"]} <= \
            {("127.0.0.1", port) for port in ports.values()}
    assert not any("relayed unchanged" in line and "warning" in line for line in proxy.stderr)
    assert any(re.search(r"broker 2 .*closed by broker", line) for line in proxy.stderr)
    assert records[-1]["kind"] == "proxy" and records[-1]["skipped_bytes"] == 0
