"""Issue 15 live: ``kinspect sniff --keylog FILE`` on lo (ring backend) while real clients speak
TLS to Apache Kafka's SSL listener (mTLS, test_tls_lab.py's broker and clients).

FILE does not exist when sniff starts: kafka-python creates it (SSLContext.keylog_filename,
TLS 1.2 AES-128-GCM), then aiokafka appends to it (TLS 1.3) while the capture runs, so sniff
must read it again as it grows. Every produced value must be in sniff's JSON, every exchange
marked ``tls``, and the exchanges must be those ``decode --keylog`` finds in a tcpdump capture
of the same traffic (connection, api key, version, correlation id), with nothing left
undecrypted.
"""

from __future__ import annotations

import time

import pytest

from tests.integration.test_sniff_lab import Sniff, _keys
from tests.integration.test_tls_lab import PARTITIONS, PASSWORD, TOPIC, _aiokafka, _context, _kafka_python, kinspect
from tests.lab.certs import CertificateAuthority
from tests.lab.kafka import TlsKafkaBroker
from tests.lab.kinspect_child import json_lines
from tests.lab.pytest_fixtures import require_lab_host
from tests.lab.recorder import Recorder

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory):
    require_lab_host()
    tmp = tmp_path_factory.mktemp("tls-sniff-lab")
    ca = CertificateAuthority(tmp / "ca")
    keystore, truststore = ca.broker_stores(PASSWORD)
    client = ca.issue("lab-client", ["kinspect-lab-client"])
    with TlsKafkaBroker(keystore, truststore, PASSWORD) as broker:
        broker.create_topic(TOPIC, partitions=PARTITIONS)
        yield broker, ca, client


def test_sniff_decrypts_with_a_key_log_written_while_it_captures(tls_broker, tmp_path):
    broker, ca, client = tls_broker
    keylog = tmp_path / "sslkeys.log"  # not there yet: the first client's OpenSSL creates it
    port = broker.ssl_port
    bpf = f"tcp port {port}"
    values = {"kafka-python": [f"live-kp-{i}-" + "v" * i for i in range(15)],
              "aiokafka": [f"live-aio-{i}" for i in range(15)]}
    recorder = Recorder(tmp_path / "tcpdump.pcap", "lo", bpf)
    with recorder:
        sniff = Sniff(["lo", "--backend", "ring", "--filter", bpf, "--keylog", str(keylog), "--json"]).start()
        assert not keylog.exists()
        _kafka_python(broker.ssl_bootstrap, _context(ca, client, keylog, "1.2", "ECDHE-ECDSA-AES128-GCM-SHA256"),
                      values["kafka-python"], "live-kp")
        size_between = keylog.stat().st_size
        _aiokafka(broker.ssl_bootstrap, _context(ca, client, keylog, "1.3"), values["aiokafka"], "live-aio")
        assert keylog.stat().st_size > size_between  # it grew while sniff ran
        time.sleep(1.0)  # the last responses are printed within a tick
    code, out = sniff.stop()
    assert code == 0, "\n".join(sniff.stderr)
    assert "Traceback" not in "\n".join(sniff.stderr)
    records = json_lines(out)
    exchanges = [r for r in records if r["type"] == "exchange"]
    assert len(exchanges) > 20
    assert [v for vs in values.values() for v in vs if v not in out] == []
    assert [r for r in exchanges if "tls" not in r] == []
    assert {r["tls"]["version"] for r in exchanges} == {"TLS 1.2", "TLS 1.3"}
    tls_trouble = [r for r in records if r["type"] == "notice" and r.get("kind", "").startswith("tls_")]
    assert tls_trouble == []

    done = kinspect("decode", "--json", "-j1", "--keylog", keylog, recorder.output)
    assert done.returncode == 0, done.stderr
    expected = [r for r in json_lines(done.stdout) if r["type"] == "exchange"]
    assert _keys(exchanges) == _keys(expected)
