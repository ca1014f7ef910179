"""Issue 15 in the lab: Apache Kafka 4.x with an SSL listener (mTLS: keytool stores from
tests/lab/certs.py), kafka-python and aiokafka speaking TLS to it with SSLContext.keylog_filename,
TLS 1.2 and TLS 1.3 forced in turn (TLS 1.2: AES-128-GCM for kafka-python, ChaCha20-Poly1305 for
aiokafka; TLS 1.3: OpenSSL's first choice, AES-256-GCM), captured with tcpdump on loopback; then
aiokafka with each other AEAD suite (TLS 1.2 AES-256-GCM; TLS 1.3 AES-128-GCM and ChaCha20-Poly1305,
each on a broker listener that allows only that suite).

With the key log, kinspect finds every produced value, its requests per (api key, version,
correlation id, client id) equal tshark's decrypting with the same key log (on the API versions
tshark 4.0 dissects), and ``offsets --capture --keylog`` equals what the clients' committed()
says. Without it, each TLS connection is one notice and decode says what to pass.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.lab.certs import CertificateAuthority
from tests.lab.kafka import TlsKafkaBroker
from tests.lab.pytest_fixtures import require_lab_host
from tests.lab.recorder import Recorder
from tests.tshark_oracle import kinspect_requests

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "lab-secret"
TOPIC = "tls-lab"
PARTITIONS = 3
SUITE_LISTENERS = {"tls13aes128": "TLS_AES_128_GCM_SHA256", "tls13chacha": "TLS_CHACHA20_POLY1305_SHA256"}
# recording → (TLS version, client's TLS 1.2 cipher, listener allowing one TLS 1.3 suite)
MORE_SUITES = {"1.2-aes256": ("1.2", "ECDHE-ECDSA-AES256-GCM-SHA384", None),
               "1.3-aes128": ("1.3", None, "tls13aes128"), "1.3-chacha": ("1.3", None, "tls13chacha")}
CIPHERS = {"1.2": {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"},
           "1.3": {"TLS_AES_256_GCM_SHA384"}, "1.2-aes256": {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"},
           "1.3-aes128": {"TLS_AES_128_GCM_SHA256"}, "1.3-chacha": {"TLS_CHACHA20_POLY1305_SHA256"}}


def _context(ca, client, keylog: Path, version: str, cipher: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca.cert))
    ctx.load_cert_chain(str(client.cert), str(client.key))
    ctx.minimum_version = ctx.maximum_version = (ssl.TLSVersion.TLSv1_3 if version == "1.3"
                                                 else ssl.TLSVersion.TLSv1_2)
    if cipher:
        ctx.set_ciphers(cipher)
    ctx.keylog_filename = str(keylog)
    return ctx


def _kafka_python(bootstrap: str, ctx: ssl.SSLContext, values: list[str], group: str) -> dict:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    producer = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=ctx,
                             client_id=f"{group}-producer")
    for i, value in enumerate(values):
        producer.send(TOPIC, key=str(i).encode(), value=value.encode())
    producer.flush(60)
    producer.close()
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=ctx,
                             group_id=group, client_id=f"{group}-consumer", auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=8000)
    got = [m.value.decode() for m in consumer]
    consumer.commit()
    committed = {p: consumer.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
    consumer.close()
    assert set(values) <= set(got)
    return committed


def _aiokafka(bootstrap: str, ctx: ssl.SSLContext, values: list[str], group: str) -> dict:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=ctx,
                                    client_id=f"{group}-producer")
        await producer.start()
        for i, value in enumerate(values):
            await producer.send_and_wait(TOPIC, value.encode(), key=str(i).encode())
        await producer.stop()
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=ctx,
                                    group_id=group, client_id=f"{group}-consumer", auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        got: list = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not set(values) <= set(got):
            batch = await consumer.getmany(timeout_ms=1000)
            got += [m.value.decode() for records in batch.values() for m in records]
        await consumer.commit()
        committed = {p: await consumer.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
        await consumer.stop()
        assert set(values) <= set(got)
        return committed

    return asyncio.run(run())


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require_lab_host()
    tmp = tmp_path_factory.mktemp("tls-lab")
    ca = CertificateAuthority(tmp / "ca")
    keystore, truststore = ca.broker_stores(PASSWORD)
    client = ca.issue("lab-client", ["kinspect-lab-client"])
    recordings = {}
    with TlsKafkaBroker(keystore, truststore, PASSWORD, suite_listeners=SUITE_LISTENERS) as broker:
        broker.create_topic(TOPIC, partitions=PARTITIONS)
        port = broker.ssl_port
        for version in ("1.2", "1.3"):
            keylog = tmp / f"keys-{version}.log"
            capture = tmp / f"tls-{version}.pcap"
            values = {"kafka-python": [f"kp-{version}-{i}-" + "v" * i for i in range(20)],
                      "aiokafka": [f"aio-{version}-{i}" for i in range(20)]}
            group_kp, group_aio = f"kp-group-{version}", f"aio-group-{version}"
            with Recorder(capture, "lo", f"tcp port {port}"):
                kp = _kafka_python(broker.ssl_bootstrap,
                                   _context(ca, client, keylog, version,
                                            "ECDHE-ECDSA-AES128-GCM-SHA256" if version == "1.2" else None),
                                   values["kafka-python"], group_kp)
                aio = _aiokafka(broker.ssl_bootstrap,
                                _context(ca, client, keylog, version,
                                         "ECDHE-ECDSA-CHACHA20-POLY1305" if version == "1.2" else None),
                                values["aiokafka"], group_aio)
            recordings[version] = {"capture": capture, "keylog": keylog, "port": port, "values": values,
                                   "committed": {group_kp: kp, group_aio: aio}}
        # the other AEAD suites, each with aiokafka: TLS 1.2 AES-256-GCM chosen by the client, the
        # TLS 1.3 suites by listeners that allow one suite each
        for name, (version, cipher, listener) in MORE_SUITES.items():
            keylog, capture = tmp / f"keys-{name}.log", tmp / f"tls-{name}.pcap"
            suite_port = broker.suite_ports[listener] if listener else port
            values = {"kafka-python": [], "aiokafka": [f"aio-{name}-{i}-" + "s" * i for i in range(12)]}
            group = f"aio-group-{name}"
            with Recorder(capture, "lo", f"tcp port {suite_port}"):
                aio = _aiokafka(f"127.0.0.1:{suite_port}", _context(ca, client, keylog, version, cipher),
                                values["aiokafka"], group)
            recordings[name] = {"capture": capture, "keylog": keylog, "port": suite_port, "values": values,
                                "committed": {group: aio}}
    return recordings


def kinspect(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def _records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def tshark_tls_requests(capture: Path, keylog: Path, port: int) -> Counter:
    """(api_key, api_version, correlation_id, client_id) of each request tshark dissects inside
    the TLS it decrypts with the key log (Decode As: TCP port → TLS, TLS port → Kafka)."""
    cmd = ["tshark", "-n", "-r", str(capture), "-o", f"tls.keylog_file:{keylog}",
           "-d", f"tcp.port=={port},tls", "-d", f"tls.port=={port},kafka", "-Y", "kafka && tcp.dstport == "
           f"{port}", "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=\x1f"]
    for field in ("kafka.api_key", "kafka.api_version", "kafka.correlation_id", "kafka.client_id"):
        cmd += ["-e", field]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    found: Counter = Counter()
    for line in text.splitlines():
        keys, versions, correlations, clients = (line.split("\t") + [""] * 4)[:4]
        if not versions:
            continue
        keys, versions, correlations = keys.split("\x1f"), versions.split("\x1f"), correlations.split("\x1f")
        clients = clients.split("\x1f") if clients else []
        for i, version in enumerate(versions):
            found[(int(keys[i]), int(version), int(correlations[i]), (clients[i] if i < len(clients) else "") or None)] += 1
    return found


@pytest.mark.parametrize("name", list(CIPHERS))
def test_decrypted_capture_holds_every_value_and_agrees_with_tshark(lab, name):
    rec = lab[name]
    version = name.split("-")[0]
    done = kinspect("decode", "--json", "--keylog", rec["keylog"], rec["capture"])
    assert done.returncode == 0, done.stderr
    records = _records(done.stdout)
    # a consumer that closes with a Fetch in flight cuts the broker's answer (a "resync" notice,
    # as in plaintext): the TLS layer itself has nothing to say
    assert not [r for r in records if r["type"] == "notice" and r["kind"].startswith("tls")]
    exchanges = [r for r in records if r["type"] == "exchange"]
    assert exchanges and all(r["tls"]["version"] == f"TLS {version}" for r in exchanges)
    assert {r["tls"]["cipher"] for r in exchanges} == CIPHERS[name]
    produced = json.dumps([r["request"] for r in exchanges if r["api_name"] == "Produce"])
    for value in rec["values"]["kafka-python"] + rec["values"]["aiokafka"]:
        assert json.dumps(value)[1:-1] in produced, value
    ours = kinspect_requests(exchanges)
    theirs = tshark_tls_requests(rec["capture"], rec["keylog"], rec["port"])
    assert theirs, "tshark decrypted nothing"
    readable = {(k, v) for k, v, _, _ in theirs}  # the API versions tshark 4.0 dissects
    assert Counter({key: n for key, n in ours.items() if key[:2] in readable}) == theirs


@pytest.mark.parametrize("name", list(CIPHERS))
def test_offsets_from_the_capture_equal_the_clients_committed(lab, name):
    rec = lab[name]
    for group, committed in rec["committed"].items():
        done = kinspect("offsets", group, "--capture", rec["capture"], "--keylog", rec["keylog"], "--json")
        assert done.returncode == 0, done.stderr
        rows = {r["partition"]: r["current_offset"] for r in _records(done.stdout) if r["type"] == "offset"}
        assert rows == {p: offset for p, offset in committed.items() if offset is not None}, group


def test_without_the_key_log_each_connection_is_one_notice(lab):
    rec = lab["1.3"]
    done = kinspect("decode", "--json", rec["capture"])
    records = _records(done.stdout)
    notices = [r for r in records if r["type"] == "notice"]
    assert notices and {n["kind"] for n in notices} == {"tls_no_keys"}
    assert len({n["conn"] for n in notices}) == len(notices)
    with_keys = _records(kinspect("decode", "--json", "--keylog", rec["keylog"], rec["capture"]).stdout)
    assert {n["conn"] for n in notices} == {r["conn"] for r in with_keys if r["type"] == "exchange"}
    assert not [r for r in records if r["type"] == "exchange"]
    assert "--keylog FILE" in done.stderr and "no Kafka traffic found" not in done.stderr


def test_injected_secrets_decode_without_the_flag(lab, tmp_path):
    rec = lab["1.2"]
    injected = tmp_path / "with-secrets.pcapng"
    subprocess.run(["editcap", "--inject-secrets", f"tls,{rec['keylog']}", str(rec["capture"]), str(injected)],
                   check=True)
    plain = _records(kinspect("decode", "--json", "--keylog", rec["keylog"], rec["capture"]).stdout)
    done = kinspect("decode", "--json", injected)
    assert done.returncode == 0, done.stderr
    assert kinspect_requests(_records(done.stdout)) == kinspect_requests(plain)
