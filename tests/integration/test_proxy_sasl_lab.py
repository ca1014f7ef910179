"""SASL through kinspect proxy (issue 13): the proxy does not authenticate itself; the SASL
exchanges pass through it, are decoded, and their secrets are redacted in every output.

One Apache Kafka broker with a SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
Two proxies in a chain, client -> A -> B -> broker, each rewriting broker addresses (so each
learns the broker's own listener from Metadata and opens a listener for it on demand): A decodes
with the default redaction, B with --show-secrets. They decode the same bytes, so every secret B
shows (PLAIN passwords, SCRAM proofs and signatures) is one A must not show, in any byte of its
stdout (--json) or stderr. Through the chain:

- librdkafka with PLAIN (a consumer group: FindCoordinator rewritten), SCRAM-SHA-256, SCRAM-SHA-512;
- kafka-python with SCRAM-SHA-512, aiokafka with SCRAM-SHA-256 (SaslHandshake v1, SaslAuthenticate);
- kafka-python pinned to Kafka 0.10.1: SaslHandshake v0 and raw tokens, after which the relay
  must still follow the frames (the Metadata response that follows is rewritten).

Each client consumes byte-identical values to those it produced. Then SASL_SSL: librdkafka speaks
TLS to a proxy (--listen-tls, -v text output) that speaks SASL_PLAINTEXT to the broker.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import time

import confluent_kafka as ck
import pytest

from tests.integration.test_proxy_lab import Proxy, _json_lines, free_base
from tests.lab.certs import CertificateAuthority
from tests.lab.kafka import KAFKA_4, KafkaBroker
from tests.lab.pytest_fixtures import require_lab_host

pytestmark = pytest.mark.lab

USERS = {"alice": "alice-plain-pw-7f3c", "bob": "bob-scram-pw-91ab"}
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _values(label: str, n: int = 12) -> list[bytes]:
    """Binary values (every byte value, not UTF-8), distinct per client."""
    rng = random.Random(label)
    return [label.encode() + b"\x00" + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
            for _ in range(n)]


def _rdk_security(user: str, mechanism: str, protocol: str = "SASL_PLAINTEXT", **more) -> dict:
    return {"security.protocol": protocol, "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": USERS[user], **more}


def _librdkafka(bootstrap: str, security: dict, topic: str, values: list[bytes], group: str | None) -> list[bytes]:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "client.id": f"{topic}-producer", **security})
    for i, value in enumerate(values):
        producer.produce(topic, key=str(i).encode(), value=value)
    assert producer.flush(60) == 0
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"{topic}-unused",
                            "auto.offset.reset": "earliest", "client.id": f"{topic}-consumer",
                            "enable.auto.commit": group is not None, "session.timeout.ms": 6000, **security})
    if group is not None:
        consumer.subscribe([topic])
    else:
        consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < len(values) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.close()
    return got


def _kafka_python(bootstrap: str, user: str, mechanism: str, topic: str, values: list[bytes]) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    security = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                "sasl_plain_username": user, "sasl_plain_password": USERS[user]}
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=f"{topic}-producer", **security)
    for value in values:
        producer.send(topic, value=value)
    producer.flush(60)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id=f"{topic}-consumer", consumer_timeout_ms=5000,
                             **security)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    got = [m.value for m in consumer]
    consumer.close()
    return got


def _kafka_python_v0(bootstrap: str, user: str, mechanism: str) -> set[str]:
    """Kafka 0.10.1 had SaslHandshake v0 only: raw tokens, then Metadata (v1: produce and fetch at
    that level are gone from Kafka 4). The topics the client learned."""
    import kafka as kafka_python
    consumer = kafka_python.KafkaConsumer(
        bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
        sasl_plain_username=user, sasl_plain_password=USERS[user], api_version=(0, 10, 1),
        client_id=f"v0-{mechanism.lower()}")
    try:
        return consumer.topics()
    finally:
        consumer.close()


def _aiokafka(bootstrap: str, user: str, mechanism: str, topic: str, values: list[bytes]) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    security = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                "sasl_plain_username": user, "sasl_plain_password": USERS[user]}

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=f"{topic}-producer", **security)
        await producer.start()
        for value in values:
            await producer.send_and_wait(topic, value)
        await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id=f"{topic}-consumer",
                                    auto_offset_reset="earliest", **security)
        await consumer.start()
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=1000)
            got += [m.value for records in batch.values() for m in records]
        await consumer.stop()
        return got

    return asyncio.run(run())


def _bases(n: int) -> list[int]:
    """n port ranges that do not overlap (each proxy's brokers listen on BASE+1+node id)."""
    bases: list[int] = []
    while len(bases) < n:
        base = free_base(16)
        if all(abs(base - other) > 16 for other in bases):
            bases.append(base)
    return bases


def _every_text(records: list[dict]) -> str:
    """The records as JSON, and every {"b64": ...} value decoded, as text."""
    blobs = []

    def walk(node):
        if isinstance(node, dict):
            if set(node) == {"b64"}:
                blobs.append(base64.b64decode(node["b64"]).decode("latin-1"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(records)
    return json.dumps(records) + "\n".join(blobs)


def _sasl_tokens(records: list[dict]) -> list[str]:
    """The SASL tokens of the SaslAuthenticate exchanges and the raw v0 tokens, as text."""
    out = []
    for r in records:
        if r["type"] == "notice" and r.get("kind") == "sasl_token":
            out.append(r["token"])
        elif r["type"] == "exchange" and r["api_name"] == "SaslAuthenticate":
            out += [(r[side] or {}).get("auth_bytes") for side in ("request", "response")]
    texts = []
    for token in filter(None, out):
        texts.append(base64.b64decode(token["b64"]).decode("latin-1") if isinstance(token, dict) else token)
    return texts


def _scram_secrets(records: list[dict]) -> list[str]:
    """Client proofs (p=) and server signatures (v=) of the SCRAM exchanges."""
    import re
    return [m for token in _sasl_tokens(records) for m in re.findall(r"(?:^|,)[pv]=([A-Za-z0-9+/=]{20,})", token)]


def stop_front_first(front: Proxy, back: Proxy) -> tuple[str, str]:
    """Both proxies of a chain stopped, the one the clients talk to first, each exiting 0: their stdouts."""
    try:
        code_front, out_front = front.stop()
    finally:
        code_back, out_back = back.stop()
    assert code_front == 0 and code_back == 0, "\n".join(front.stderr + back.stderr)
    return out_front, out_back


def assert_delivered(sent: dict, got: dict) -> None:
    for name, values in sent.items():
        assert sorted(got[name]) == sorted(values), name  # byte-identical, each once


def assert_no_secret_shown(records: list, revealed: list, stderr: list, out: str, scram_logins: int) -> list:
    """What the revealing proxy shows (the PLAIN password; a SCRAM proof and signature per login, at
    least ``scram_logins`` logins), the redacting one (``records``, ``stderr``, ``out``) does not, in
    any byte it wrote. Returns its SASL tokens."""
    scram = _scram_secrets(revealed)
    assert len(scram) >= 2 * scram_logins
    assert USERS["alice"] in _every_text(revealed)  # PLAIN carries the password itself
    shown = _every_text(records) + "\n".join(stderr) + out
    for secret in [USERS["alice"], USERS["bob"], *scram]:
        assert secret not in shown
    tokens = _sasl_tokens(records)
    assert tokens and all("<redacted" in t for t in tokens if t.startswith(("\x00", "c=", "v=")) or ",p=" in t)
    assert any(t.startswith("\x00alice\x00<redacted") for t in tokens)  # PLAIN keeps its user name
    return tokens


@pytest.fixture(scope="module")
def broker():
    require_lab_host()
    with KafkaBroker(KAFKA_4, sasl_users=USERS, scram=SCRAM) as kafka:
        for topic in ("rdk-plain", "rdk-sha256", "rdk-sha512", "kp-sha512", "aio-sha256", "rdk-ssl"):
            kafka.create_topic(topic)
        yield kafka


def test_sasl_clients_through_two_proxies_get_their_values_and_no_secret_is_shown(broker):
    outer, inner = _bases(2)
    revealing = Proxy(["--listen", f"127.0.0.1:{inner}", "--upstream", broker.sasl_bootstrap, "--json",
                       "--show-secrets"]).start()
    proxy = Proxy(["--listen", f"127.0.0.1:{outer}", "--upstream", f"127.0.0.1:{inner}", "--json"]).start()
    bootstrap = f"127.0.0.1:{outer}"
    sent = {name: _values(name) for name in ("rdk-plain", "rdk-sha256", "rdk-sha512", "kp-sha512", "aio-sha256")}
    try:
        got = {
            "rdk-plain": _librdkafka(bootstrap, _rdk_security("alice", "PLAIN"), "rdk-plain", sent["rdk-plain"],
                                     group="sasl-group"),
            "rdk-sha256": _librdkafka(bootstrap, _rdk_security("bob", "SCRAM-SHA-256"), "rdk-sha256",
                                      sent["rdk-sha256"], group=None),
            "rdk-sha512": _librdkafka(bootstrap, _rdk_security("bob", "SCRAM-SHA-512"), "rdk-sha512",
                                      sent["rdk-sha512"], group=None),
            "kp-sha512": _kafka_python(bootstrap, "bob", "SCRAM-SHA-512", "kp-sha512", sent["kp-sha512"]),
            "aio-sha256": _aiokafka(bootstrap, "bob", "SCRAM-SHA-256", "aio-sha256", sent["aio-sha256"]),
        }
        for mechanism in ("PLAIN", "SCRAM-SHA-512"):
            assert "rdk-plain" in _kafka_python_v0(bootstrap, "alice" if mechanism == "PLAIN" else "bob", mechanism)
    finally:  # whatever happened: no proxy outlives the test
        out, out_b = stop_front_first(proxy, revealing)
    assert_delivered(sent, got)

    records, revealed = _json_lines(out), _json_lines(out_b)
    exchanges = [r for r in records if r["type"] == "exchange"]
    apis = {(r["api_name"], r["api_version"]) for r in exchanges}
    assert ("SaslHandshake", 0) in apis and ("SaslHandshake", 1) in apis
    assert {"SaslAuthenticate", "Produce", "Fetch", "FindCoordinator", "JoinGroup"} <= {a for a, _ in apis}
    # the raw v0 tokens, both mechanisms, both sides, seen by both proxies as tokens
    for seen in (records, revealed):
        raw = {(r["mechanism"], r["side"]) for r in seen if r.get("kind") == "sasl_token"}
        assert raw == {("PLAIN", "client"), ("PLAIN", "server"), ("SCRAM-SHA-512", "client"),
                       ("SCRAM-SHA-512", "server")}, raw
    assert not [r for r in records + revealed if r["type"] == "notice" and r["kind"] not in ("sasl_token", "proxy")]
    # every Metadata answer names the outer proxy's listeners only, the v0 clients' too (after raw tokens)
    metadata = [r for r in exchanges if r["api_name"] == "Metadata" and r["response"]]
    assert {r["client_id"] for r in metadata} >= {"v0-plain", "v0-scram-sha-512"}
    assert {(b["host"], b["port"]) for r in metadata for b in r["response"]["brokers"]} == {("127.0.0.1", outer + 2)}
    assert all(r["response"] is not None for r in exchanges if r["api_name"].startswith("Sasl"))

    # secrets: what B shows, A does not, in any byte it wrote (4 clients' connections at least)
    assert_no_secret_shown(records, revealed, proxy.stderr, out, scram_logins=5)
    assert not any("Traceback" in line for line in proxy.stderr + revealing.stderr)
    assert any(" 0 that named brokers relayed unchanged" in line for line in proxy.stderr)


def test_sasl_ssl_clients_to_a_tls_terminating_proxy(broker, tmp_path):
    ca = CertificateAuthority(tmp_path / "certs")
    server = ca.issue("proxy", ["localhost", "127.0.0.1"])
    (base,) = _bases(1)
    proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--listen-tls", str(server.cert), str(server.key),
                   "--upstream", broker.sasl_bootstrap, "-v"]).start()
    values = _values("rdk-ssl")
    security = _rdk_security("alice", "PLAIN", "SASL_SSL", **{"ssl.ca.location": str(ca.cert)})
    got = _librdkafka(f"127.0.0.1:{base}", security, "rdk-ssl", values, group=None)
    code, out = proxy.stop()
    assert code == 0, "\n".join(proxy.stderr)
    assert sorted(got) == sorted(values)
    assert "SaslAuthenticate" in out and "<redacted" in out and "Produce" in out
    assert USERS["alice"] not in out + "\n".join(proxy.stderr)
    assert not any("Traceback" in line for line in proxy.stderr)
