"""kinspect proxy with TLS (issue 13's tests): clients speak TLS to the proxy (--listen-tls), and
the proxy speaks mTLS to an Apache Kafka broker's SSL listener (keytool trust store, client
authentication required). The values arrive intact, and the proxy decodes them from the
plaintext it sees between the two TLS sessions.
"""

from __future__ import annotations

import asyncio
import ssl
import time

import confluent_kafka as ck
import pytest

from tests.integration.test_proxy_lab import Proxy, _json_lines, free_base
from tests.lab.certs import CertificateAuthority
from tests.lab.kafka import TlsKafkaBroker
from tests.lab.pytest_fixtures import require_lab_host
from tests.lab.tansu import TansuBroker

pytestmark = pytest.mark.lab

PASSWORD = "lab-secret"


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return CertificateAuthority(tmp_path_factory.mktemp("certs"))


def _librdkafka(bootstrap: str, ca_path, topic: str, values: list[str], group: str) -> list[str]:
    tls = {"security.protocol": "SSL", "ssl.ca.location": str(ca_path)}
    producer = ck.Producer({"bootstrap.servers": bootstrap, "client.id": f"{group}-producer", **tls})
    for i, value in enumerate(values):
        producer.produce(topic, key=str(i).encode(), value=value.encode())
    assert producer.flush(60) == 0
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                            "client.id": f"{group}-consumer", "session.timeout.ms": 6000, **tls})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < len(values) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value().decode())
    consumer.close()
    return got


def _kafka_python(bootstrap: str, ca_path, topic: str, values: list[str]) -> list[str]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    tls = {"security_protocol": "SSL", "ssl_cafile": str(ca_path)}
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="tls-kafka-python", **tls)
    for value in values:
        producer.send(topic, value=value.encode())
    producer.flush(60)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="tls-kafka-python-consumer",
                             consumer_timeout_ms=10000, **tls)
    partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    got = [m.value.decode() for m in consumer]
    consumer.close()
    return got


def _aiokafka(bootstrap: str, ca_path, topic: str, values: list[str]) -> list[str]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run():
        context = ssl.create_default_context(cafile=str(ca_path))
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context,
                                    client_id="tls-aiokafka")
        await producer.start()
        for value in values:
            await producer.send_and_wait(topic, value.encode())
        await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context,
                                    client_id="tls-aiokafka-consumer", auto_offset_reset="earliest")
        await consumer.start()
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or [0]]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        got = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=1000)
            got += [m.value.decode() for records in batch.values() for m in records]
            if all(v in got for v in values):
                break
        await consumer.stop()
        return got

    return asyncio.run(run())


def test_clients_speak_tls_to_the_proxy_and_their_values_arrive_decoded(ca):
    require_lab_host()
    server = ca.issue("proxy", ["localhost", "127.0.0.1"])
    base = free_base()
    bootstrap = f"127.0.0.1:{base}"
    with TansuBroker() as broker:
        proxy = Proxy(["--listen", bootstrap, "--listen-tls", str(server.cert), str(server.key),
                       "--upstream", broker.bootstrap, "--json"]).start()
        assert any("(TLS)" in line for line in proxy.stderr)
        rdk = [f"tls-librdkafka-{i}" for i in range(10)]
        kp = [f"tls-kafka-python-{i}" for i in range(5)]
        aio = [f"tls-aiokafka-{i}" for i in range(5)]
        assert sorted(_librdkafka(bootstrap, ca.cert, "tls-rdk", rdk, "tls-group")) == sorted(rdk)
        assert sorted(_kafka_python(bootstrap, ca.cert, "tls-kp", kp)) == sorted(kp)
        assert set(aio) <= set(_aiokafka(bootstrap, ca.cert, "tls-aio", aio))
        code, out = proxy.stop()
    assert code == 0, "\n".join(proxy.stderr)
    records = _json_lines(out)
    text = "\n".join(line for line in out.splitlines() if '"Produce"' in line or '"Fetch"' in line)
    assert all(v in text for v in rdk + kp + aio)
    assert records[-1]["kind"] == "proxy" and records[-1]["skipped_bytes"] == 0
    assert not [r for r in records if r["type"] == "notice" and r["kind"] != "proxy"]


def test_the_proxy_speaks_mtls_to_a_kafka_ssl_listener(ca):
    require_lab_host()
    broker_cert = ca.issue("broker", ["localhost", "127.0.0.1"])
    client_cert = ca.issue("proxy-client", ["kinspect-proxy"])
    proxy_cert = ca.issue("proxy-listener", ["localhost", "127.0.0.1"])
    keystore, truststore = ca.java_stores(broker_cert, PASSWORD)
    base = free_base()
    bootstrap = f"127.0.0.1:{base}"
    with TlsKafkaBroker(keystore, truststore, PASSWORD) as broker:
        broker.create_topic("mtls", partitions=2)
        # without a client certificate the broker refuses the proxy: said, and the client closed
        refused = Proxy(["--listen", bootstrap, "--upstream", broker.ssl_bootstrap, "--upstream-ca", str(ca.cert),
                         "--json", "--drain-timeout", "1"]).start()
        p = ck.Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 3000})
        errors = []
        p.produce("mtls", value=b"never", on_delivery=lambda err, msg: errors.append(err))
        p.flush(10)
        assert len(errors) == 1 and errors[0] is not None
        refused.stop()
        assert any("closed by broker" in line or "cannot connect" in line for line in refused.stderr), refused.stderr
        # with it: TLS on both sides of the proxy, plaintext decoded in the middle
        proxy = Proxy(["--listen", bootstrap, "--listen-tls", str(proxy_cert.cert), str(proxy_cert.key),
                       "--upstream", broker.ssl_bootstrap, "--upstream-tls", "--upstream-ca", str(ca.cert),
                       "--upstream-cert", str(client_cert.cert), str(client_cert.key), "--json"]).start()
        values = [f"mtls-{i}-" + "v" * 2000 for i in range(20)]
        assert sorted(_librdkafka(bootstrap, ca.cert, "mtls", values, "mtls-group")) == sorted(values)
        code, out = proxy.stop()
    assert code == 0, "\n".join(proxy.stderr)
    records = _json_lines(out)
    exchanges = [r for r in records if r["type"] == "exchange"]
    produced = [rec["value"] for r in exchanges if r["api_name"] == "Produce"
                for t in r["request"]["topic_data"] for p_ in t["partition_data"]
                for batch in p_["records"] for rec in batch["records"]]
    assert sorted(produced) == sorted(values)
    # answered ones: a Metadata request librdkafka sends as the proxy stops goes out unanswered
    metadata = [r for r in exchanges if r["api_name"] == "Metadata" and r["response"]]
    assert metadata and all(b["port"] == base + 1 + b["node_id"] for r in metadata for b in r["response"]["brokers"])
    assert any(f"with TLS" in line for line in proxy.stderr)
