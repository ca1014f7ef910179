"""Issue 15 from the JVM: Kafka's own console producer and consumer (Apache Kafka 4.x, Java 17)
speak TLS 1.3 to the lab's SSL listener (mTLS, keytool stores), their secrets written by the
extract-tls-secrets agent (``name.neykov:extract-tls-secrets`` from Maven Central, run as
``-javaagent:JAR=KEYLOG``), captured with tcpdump on lo. ``decode --keylog`` must find every
produced value in the Produce requests and again in the Fetch responses, every exchange marked
TLS 1.3, and nothing left undecrypted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.integration.test_tls_lab import PASSWORD, kinspect
from tests.lab.certs import CertificateAuthority
from tests.lab.kafka import CACHE, LabError, TlsKafkaBroker
from tests.lab.kinspect_child import json_lines
from tests.lab.pytest_fixtures import require_lab_host
from tests.lab.recorder import Recorder

pytestmark = pytest.mark.lab

AGENT = "name.neykov:extract-tls-secrets:4.0.0"
TOPIC = "tls-jvm"


def agent_jar() -> Path:
    """The agent's jar, fetched from Maven Central with mvn on first use and cached beside the
    lab's Kafka jars (as tests/lab/kafka.py caches those)."""
    group, artifact, version = AGENT.split(":")
    jar = CACHE / f"{artifact}-{version}.jar"
    if jar.is_file():
        return jar
    if shutil.which("mvn") is None:
        raise LabError("mvn is not installed: apt-get install maven")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE, prefix="agent-") as fetching:
        command = ["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={AGENT}", f"-DoutputDirectory={fetching}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        fetched = Path(fetching) / f"{artifact}-{version}.jar"
        if done.returncode != 0 or not fetched.is_file():
            raise LabError(f"fetching {AGENT} from Maven Central failed ({' '.join(command)}):\n"
                           + (done.stdout + done.stderr)[-4000:])
        os.replace(fetched, jar)
    return jar


def _client_properties(keystore: Path, truststore: Path) -> dict[str, str]:
    return {"security.protocol": "SSL", "ssl.protocol": "TLSv1.3", "ssl.enabled.protocols": "TLSv1.3",
            "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(truststore),
            "ssl.truststore.password": PASSWORD,
            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": PASSWORD, "ssl.key.password": PASSWORD}


def _with_agent(command: list[str], jar: Path, keylog: Path) -> list[str]:
    assert command[0] == "java"
    return [command[0], f"-javaagent:{jar}={keylog}", *command[1:]]


def _run(command: list[str], input: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(command, input=input, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done


def test_console_clients_with_the_agent_decode_with_its_key_log(tmp_path):
    require_lab_host()
    jar = agent_jar()
    ca = CertificateAuthority(tmp_path / "ca")
    keystore, truststore = ca.broker_stores(PASSWORD)
    client_store, _ = ca.java_stores(ca.issue("jvm-client", ["kinspect-jvm-client"]), PASSWORD)
    properties = _client_properties(client_store, truststore)
    keylog = tmp_path / "jvm-keys.log"
    values = [f"jvm-{i}-" + "w" * i for i in range(25)]
    with TlsKafkaBroker(keystore, truststore, PASSWORD) as broker:
        broker.create_topic(TOPIC, partitions=2)
        port = broker.ssl_port
        producer_main = broker.main_class("org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer")
        consumer_main = broker.main_class("org.apache.kafka.tools.consumer.ConsoleConsumer",
                                          "kafka.tools.ConsoleConsumer")
        produce = ["--bootstrap-server", broker.ssl_bootstrap, "--topic", TOPIC]
        for key, value in properties.items():
            produce += ["--producer-property", f"{key}={value}"]
        consume = ["--bootstrap-server", broker.ssl_bootstrap, "--topic", TOPIC, "--from-beginning",
                   "--max-messages", str(len(values)), "--timeout-ms", "60000", "--group", "jvm-group"]
        for key, value in properties.items():
            consume += ["--consumer-property", f"{key}={value}"]
        capture = tmp_path / "jvm-tls.pcap"
        with Recorder(capture, "lo", f"tcp port {port}"):
            _run(_with_agent(broker.java_command(producer_main, *produce), jar, keylog),
                 input="".join(v + "\n" for v in values))
            got = _run(_with_agent(broker.java_command(consumer_main, *consume), jar, keylog)).stdout.splitlines()
    assert sorted(got) == sorted(values)
    lines = keylog.read_text().split()
    assert "CLIENT_TRAFFIC_SECRET_0" in lines and "SERVER_TRAFFIC_SECRET_0" in lines  # TLS 1.3 from the JVM

    done = kinspect("decode", "--json", "-j1", "--keylog", keylog, capture)
    assert done.returncode == 0, done.stderr
    records = json_lines(done.stdout)
    assert not [r for r in records if r["type"] == "notice" and r["kind"].startswith("tls")]
    exchanges = [r for r in records if r["type"] == "exchange"]
    assert exchanges and all(r["tls"]["version"] == "TLS 1.3" for r in exchanges)
    produced = json.dumps([r["request"] for r in exchanges if r["api_name"] == "Produce"])
    fetched = json.dumps([r["response"] for r in exchanges if r["api_name"] == "Fetch"])
    assert [v for v in values if json.dumps(v)[1:-1] not in produced] == []
    assert [v for v in values if json.dumps(v)[1:-1] not in fetched] == []
    clients = {r["client_id"] for r in exchanges}
    assert any(c.startswith("console-producer") for c in clients), clients
    assert any(c.startswith("console-consumer") for c in clients), clients
