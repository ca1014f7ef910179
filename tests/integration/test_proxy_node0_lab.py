"""kinspect proxy in front of an Apache Kafka broker whose node id is 0 (issue 30, blind spots).

Strimzi and Bitnami number their brokers from 0, but no capture, built body or lab broker used
node 0, so a rewrite that skipped a falsy node id (``if node_id:``) passed every test. Here a
real KRaft broker has node.id=0; a raw Metadata request and real clients (librdkafka, and
FindCoordinator through a consumer group) go through the proxy: broker 0's address reaches them
as the proxy's listener on BASE+1, never as the broker's own, and every value arrives through it.
"""

from __future__ import annotations

import socket
import time

import confluent_kafka as ck
import pytest

from tests.integration.test_proxy_lab import Proxy, _json_lines, free_base
from tests.lab.kafka import KafkaBroker
from tests.lab.pytest_fixtures import require_lab_host
from tests.unit.proxy.crafted import metadata_brokers, metadata_request, read_frame

pytestmark = pytest.mark.lab


class NodeZeroBroker(KafkaBroker):
    """The lab's single KRaft broker, as node 0 (its own controller quorum says so too)."""

    def _kraft_settings(self) -> dict[str, object]:
        settings = super()._kraft_settings()
        settings["node.id"] = 0
        settings["controller.quorum.voters"] = settings["controller.quorum.voters"].replace("1@", "0@", 1)
        return settings


@pytest.fixture(scope="module")
def broker():
    require_lab_host()
    with NodeZeroBroker() as b:
        yield b


def test_broker_node_0_is_reached_through_its_listener_only(broker):
    base = free_base()
    proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json"]).start()
    try:
        # the raw response, as a client reads it: node 0 at the proxy's BASE+1
        with socket.create_connection(("127.0.0.1", base), timeout=30) as s:
            s.sendall(metadata_request(1))
            named = metadata_brokers(read_frame(s))
        assert named == [(0, "127.0.0.1", base + 1)]
        assert proxy.log_has(rf"broker 0 \(127\.0\.0\.1:{broker.port}\) listens on 127\.0\.0\.1:{base + 1}")

        topic, group = "node-zero", "node-zero-group"
        broker.create_topic(topic, partitions=2)
        values = [f"value-{i}" for i in range(20)]
        producer = ck.Producer({"bootstrap.servers": f"127.0.0.1:{base}", "client.id": "node0-producer"})
        delivered = []
        for value in values:
            producer.produce(topic, value=value.encode(), on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(60) == 0
        assert delivered == [None] * len(values)
        consumer = ck.Consumer({"bootstrap.servers": f"127.0.0.1:{base}", "group.id": group,
                                "auto.offset.reset": "earliest", "client.id": "node0-consumer",
                                "session.timeout.ms": 6000})
        consumer.subscribe([topic])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value().decode())
        consumer.close()
        assert sorted(got) == sorted(values)
    finally:
        code, out = proxy.stop()
    assert code == 0, "\n".join(proxy.stderr)
    exchanges = [r for r in _json_lines(out) if r["type"] == "exchange" and r["response"]]
    # every address a client learnt is broker 0's listener: in Metadata and FindCoordinator alike
    learnt = set()
    for r in exchanges:
        if r["api_name"] == "Metadata":
            learnt |= {(b["node_id"], b["host"], b["port"]) for b in r["response"]["brokers"]}
        elif r["api_name"] == "FindCoordinator":
            body = r["response"]
            for entry in body.get("coordinators") or [body]:
                if entry.get("error_code") == 0:
                    learnt.add((entry["node_id"], entry["host"], entry["port"]))
    assert learnt == {(0, "127.0.0.1", base + 1)}
    assert {r["api_name"] for r in exchanges} >= {"Metadata", "FindCoordinator", "Produce", "Fetch"}
    # the clients' connections to broker 0 went through its listener
    assert proxy.log_has(rf"-> broker 0 127\.0\.0\.1:{broker.port} from")
    assert not any("Traceback" in line for line in proxy.stderr)
