"""SASL over TLS through kinspect proxy (issue 13): clients do SASL through the proxy, and the
proxy speaks TLS (--upstream-tls --upstream-ca) to an Apache Kafka broker's SASL_SSL listener, so
the broker sees SASL over TLS while the proxy decodes the plaintext between its two sockets.

One TlsKafkaBroker with sasl_users (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 on SASL_SSL, server
authentication only). Two proxies in a chain, client -> R -> P -> broker, each rewriting broker
addresses: P, the one under test, speaks TLS to the broker and decodes with the default
redaction; R, in front of it on plaintext, decodes the same bytes with --show-secrets, so every
secret R shows (PLAIN passwords, SCRAM proofs and signatures) is one P must not show in any byte
of its stdout (--json) or stderr. The helpers are test_proxy_sasl_lab's.

- librdkafka with PLAIN (a consumer group: FindCoordinator rewritten) and SCRAM-SHA-512;
- aiokafka with SCRAM-SHA-256.

Each client consumes byte-identical values to those it produced.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.test_proxy_lab import Proxy, _json_lines
from tests.integration.test_proxy_sasl_lab import (SCRAM, USERS, _aiokafka, _bases, _librdkafka, _rdk_security,
                                                   _values, assert_delivered, assert_no_secret_shown,
                                                   stop_front_first)
from tests.lab.certs import CertificateAuthority
from tests.lab.kafka import KAFKA_4, TlsKafkaBroker
from tests.lab.pytest_fixtures import require_lab_host

pytestmark = pytest.mark.lab

PASSWORD = "lab-secret"
TOPICS = ("ssl-rdk-plain", "ssl-rdk-sha512", "ssl-aio-sha256")


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return CertificateAuthority(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(ca):
    require_lab_host()
    keystore, truststore = ca.broker_stores(PASSWORD)
    with TlsKafkaBroker(keystore, truststore, PASSWORD, client_auth="none", version=KAFKA_4, sasl_users=USERS,
                        scram=SCRAM) as kafka:
        for topic in TOPICS:
            kafka.create_topic(topic)
        yield kafka


def _addresses(exchanges: list[dict]) -> set[tuple[str, int]]:
    """Every (host, port) the Metadata and FindCoordinator answers name (v0-v3 or v4+ coordinators)."""
    named = set()
    for r in exchanges:
        response = r["response"]
        if r["api_name"] == "Metadata" and response:
            named |= {(b["host"], b["port"]) for b in response["brokers"]}
        elif r["api_name"] == "FindCoordinator" and response:
            for c in response.get("coordinators") or [response]:
                if c.get("error_code", 0) == 0:
                    named.add((c["host"], c["port"]))
    return named


def test_sasl_clients_through_a_proxy_that_speaks_tls_to_a_sasl_ssl_listener(broker, ca):
    front, tls = _bases(2)
    # P: TLS to the broker's SASL_SSL listener, redacting; R: plaintext to P, revealing
    proxy = Proxy(["--listen", f"127.0.0.1:{tls}", "--upstream", broker.sasl_ssl_bootstrap, "--upstream-tls",
                   "--upstream-ca", str(ca.cert), "--json"]).start()
    revealing = Proxy(["--listen", f"127.0.0.1:{front}", "--upstream", f"127.0.0.1:{tls}", "--json",
                       "--show-secrets"]).start()
    bootstrap = f"127.0.0.1:{front}"
    sent = {name: _values(name) for name in TOPICS}
    try:
        got = {
            "ssl-rdk-plain": _librdkafka(bootstrap, _rdk_security("alice", "PLAIN"), "ssl-rdk-plain",
                                         sent["ssl-rdk-plain"], group="sasl-ssl-group"),
            "ssl-rdk-sha512": _librdkafka(bootstrap, _rdk_security("bob", "SCRAM-SHA-512"), "ssl-rdk-sha512",
                                          sent["ssl-rdk-sha512"], group="sasl-ssl-group-512"),
            "ssl-aio-sha256": _aiokafka(bootstrap, "bob", "SCRAM-SHA-256", "ssl-aio-sha256",
                                        sent["ssl-aio-sha256"]),
        }
    finally:  # stopped whatever happened: no proxy outlives the test
        out_r, out = stop_front_first(revealing, proxy)
    assert_delivered(sent, got)

    records, revealed = _json_lines(out), _json_lines(out_r)
    exchanges = [r for r in records if r["type"] == "exchange"]
    apis = {r["api_name"] for r in exchanges}
    assert {"SaslHandshake", "SaslAuthenticate", "Produce", "Fetch", "FindCoordinator", "JoinGroup",
            "OffsetCommit"} <= apis, apis
    sasl = [r for r in exchanges if r["api_name"].startswith("Sasl")]
    assert all(r["response"] is not None and r["response"]["error_code"] == 0 for r in sasl)
    mechanisms = {r["request"]["mechanism"] for r in sasl if r["api_name"] == "SaslHandshake"}
    assert mechanisms == {"PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"}, mechanisms
    # the same exchanges, seen by both proxies: P decoded the plaintext of its TLS session whole
    assert sorted(r["api_name"] for r in exchanges) == \
        sorted(r["api_name"] for r in revealed if r["type"] == "exchange")
    assert not [r for r in records + revealed if r["type"] == "notice" and r["kind"] != "proxy"]
    assert records[-1]["kind"] == "proxy" and records[-1]["skipped_bytes"] == 0

    # addresses: each proxy's answers name its own listeners only, never a broker port; R's
    # clients (the real ones) connected to R only, and P's client (R) to P only
    broker_ports = {broker.port, broker.ssl_port, broker.sasl_port, broker.sasl_ssl_port}
    for seen, base in ((exchanges, tls), (revealed, front)):
        answered = [r for r in seen if r["type"] == "exchange"]
        assert _addresses(answered) == {("127.0.0.1", base + 2)}  # node 1 on BASE+1+1
        assert {int(r["conn"].rsplit(":", 1)[1]) for r in answered} == {base, base + 2}
        assert not any(f'"port": {port}' in json.dumps([r["response"] for r in answered]) for port in broker_ports)
    assert any("with TLS" in line for line in proxy.stderr), proxy.stderr
    assert not any("with TLS" in line for line in revealing.stderr)

    # secrets: what R shows, P does not, in any byte it wrote (3 SCRAM connections at least)
    tokens = assert_no_secret_shown(records, revealed, proxy.stderr, out, scram_logins=3)
    assert sum(",p=<redacted" in t for t in tokens) >= 3  # every SCRAM client-final, its proof hidden
    assert not any("Traceback" in line for line in proxy.stderr + revealing.stderr)
