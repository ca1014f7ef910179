"""Secrets over real SASL traffic: nothing secret in any output unless --show-secrets.

One Apache Kafka broker with a SASL_PLAINTEXT listener (PLAIN and SCRAM-SHA-512), captured with
tcpdump on loopback while real clients log in and Kafka's own tools change secret things:

- librdkafka (confluent-kafka) with PLAIN and with SCRAM-SHA-512: SaslAuthenticate;
- kafka-python pinned to Kafka 0.10.1: SaslHandshake v0, then raw tokens (PLAIN, SCRAM);
- kafka-configs (Java admin client, PLAIN): AlterUserScramCredentials of a new SCRAM user,
  DescribeConfigs of the broker, IncrementalAlterConfigs of the listener's sasl.jaas.config;
- kafka-delegation-tokens: create, describe, renew and expire a token (its HMAC each time);
- the broker forwarding those admin requests to its controller, inside Envelopes.

Then decode (line, -v, --json, -j2 --json, --summary), validate (text, -v, --json, --junit) and
offsets --capture run over the capture, with and without --show-secrets.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.lab.kafka import KAFKA_4, KafkaBroker
from tests.lab.pytest_fixtures import require_lab_host
from tests.lab.recorder import Recorder

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
USERS = {"alice": "alice-plain-pw", "bob": "bob-scram-pw"}
CAROL_PW = "carol-scram-pw"  # kafka-configs sends it as a salt and a salted password
DAVE_PW = "dave-jaas-pw"     # inside a sasl.jaas.config set through IncrementalAlterConfigs (first:
                             # decode -v shortens long strings)
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{user}="{password}"' for user, password in {"dave": DAVE_PW, **USERS}.items()) + ";")


def _confluent(kafka: KafkaBroker, user: str, mechanism: str) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": kafka.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": USERS[user]})
    assert 1 in admin.list_topics(timeout=30).brokers


def _kafka_python_v0(kafka: KafkaBroker, user: str, mechanism: str) -> None:
    """Kafka 0.10.1 had SaslHandshake v0 only: the tokens then go raw, without Kafka headers."""
    import kafka as kafka_python
    consumer = kafka_python.KafkaConsumer(
        bootstrap_servers=kafka.sasl_bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
        sasl_plain_username=user, sasl_plain_password=USERS[user], api_version=(0, 10, 1))
    try:
        consumer.topics()
    finally:
        consumer.close()


def _token_hmac(table: str) -> str:
    """The HMAC column of kafka-delegation-tokens' table (token id, HMAC, owner, ...)."""
    rows = [line.split() for line in table.splitlines() if re.search(r"\sUser:alice\s", line)]
    assert rows, table
    return rows[0][1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require_lab_host()
    directory = tmp_path_factory.mktemp("secrets-lab")
    capture = directory / "sasl.pcap"
    config = {"delegation.token.secret.key": "lab-token-secret-key"}
    with KafkaBroker(KAFKA_4, sasl_users=USERS, config=config) as kafka:
        controller = kafka.settings["controller.quorum.voters"].rsplit(":", 1)[1]
        bpf = f"tcp port {kafka.port} or tcp port {kafka.sasl_port} or tcp port {controller}"
        with Recorder(capture, "lo", bpf):
            _confluent(kafka, "alice", "PLAIN")
            _confluent(kafka, "bob", "SCRAM-SHA-512")
            _kafka_python_v0(kafka, "alice", "PLAIN")
            _kafka_python_v0(kafka, "bob", "SCRAM-SHA-512")
            kafka.configs("--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config",
                          f"SCRAM-SHA-512=[iterations=8192,password={CAROL_PW}]", user="alice")
            described = kafka.configs("--describe", "--entity-type", "brokers", "--entity-name", "1", "--all",
                                      user="alice")
            jaas = directory / "jaas.properties"
            jaas.write_text(f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}\n")
            kafka.configs("--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config-file",
                          str(jaas), user="alice")
            created = kafka.delegation_tokens("--create", "--max-life-time-period", "-1",
                                              "--renewer-principal", "User:bob", user="alice")
            hmac = _token_hmac(created)
            kafka.delegation_tokens("--describe", user="alice")
            kafka.delegation_tokens("--renew", "--renew-time-period", "-1", "--hmac", hmac, user="bob")
            kafka.delegation_tokens("--expire", "--expiry-time-period", "-1", "--hmac", hmac, user="alice")
    return SimpleNamespace(capture=capture, hmac=hmac, described=described, directory=directory)


def kinspect(*args: str, stdin: Path | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], cwd=REPO, capture_output=True,
                          timeout=300, input=stdin.read_bytes() if stdin else b"")
    assert done.returncode in (0, 1), (args, done.stderr.decode()[-2000:])
    assert b"Traceback" not in done.stderr
    return done.stdout.decode("utf-8", "replace")


def outputs(capture: Path, directory: Path, *flags: str) -> dict[str, str]:
    """Every output kinspect gives of the capture, by name."""
    junit = directory / f"junit{''.join(flags)}.xml"
    texts = {
        "decode": kinspect("decode", *flags, capture),
        "decode -v": kinspect("decode", "-v", *flags, capture),
        "decode --json": kinspect("decode", "--json", *flags, capture),
        "decode --json -j2": kinspect("decode", "--json", "-j2", *flags, "-", stdin=capture),
        "decode --summary": kinspect("decode", "--summary", *flags, capture),
        "validate": kinspect("validate", *flags, capture),
        "validate -v": kinspect("validate", "-v", *flags, capture),
        "validate --json": kinspect("validate", "--json", *flags, capture),
        "offsets --capture": kinspect("offsets", *flags, "--capture", capture),
        "offsets --json --capture": kinspect("offsets", "--json", *flags, "--capture", capture),
    }
    kinspect("validate", *flags, "--junit", junit, capture)
    texts["validate --junit"] = junit.read_text()
    return texts


@pytest.fixture(scope="module")
def hidden(lab):
    return outputs(lab.capture, lab.directory)


@pytest.fixture(scope="module")
def shown(lab):
    return outputs(lab.capture, lab.directory, "--show-secrets")


@pytest.fixture(scope="module")
def revealed(shown) -> list[dict]:
    return [json.loads(line) for line in shown["decode --json"].splitlines()]


def _text(value) -> str:
    return value["b64"] if isinstance(value, dict) else value


def _scram_secrets(records: list[dict]) -> list[str]:
    """SCRAM client proofs and server signatures, from SaslAuthenticate bodies and raw v0 tokens."""
    found = []
    for record in records:
        tokens = [record.get("token")] if record.get("kind") == "sasl_token" else [
            (record.get(side) or {}).get("auth_bytes") for side in ("request", "response")]
        for token in filter(None, map(_text, filter(None, tokens))):
            found += re.findall(r"(?:^|,)[pv]=([A-Za-z0-9+/=]{20,})", token)
    return found


def test_every_client_and_tool_was_seen(revealed):
    apis = {r.get("api_name") for r in revealed if r["type"] == "exchange"}
    assert {"SaslHandshake", "SaslAuthenticate", "AlterUserScramCredentials", "DescribeConfigs",
            "IncrementalAlterConfigs", "CreateDelegationToken", "DescribeDelegationToken",
            "RenewDelegationToken", "ExpireDelegationToken", "Envelope"} <= apis
    raw = [r for r in revealed if r.get("kind") == "sasl_token"]
    assert {(r["mechanism"], r["side"]) for r in raw} == {("PLAIN", "client"), ("PLAIN", "server"),
                                                          ("SCRAM-SHA-512", "client"), ("SCRAM-SHA-512", "server")}
    assert len([r for r in raw if r["mechanism"] == "SCRAM-SHA-512"]) == 4  # two rounds
    assert not [r for r in revealed if r.get("kind") == "undecodable"]
    # a proof and a signature of each client's SCRAM login at least (librdkafka logs in again
    # on its second connection only when it opens one before the test ends)
    assert len(_scram_secrets(revealed)) >= 4


def secrets_of(lab, revealed) -> dict[str, list[str]]:
    salted = [_text(u["salted_password"]) for r in revealed if r.get("api_name") == "AlterUserScramCredentials"
              for u in r["request"]["upsertions"]]
    return {"PLAIN password": [USERS["alice"]], "SCRAM proofs and signatures": _scram_secrets(revealed),
            "JAAS config password": [DAVE_PW], "delegation token HMAC": [lab.hmac, lab.hmac[:40]],
            "SCRAM salted password": salted + [s[:40] for s in salted]}


def test_no_output_holds_a_secret_by_default(lab, hidden, revealed):
    for what, values in secrets_of(lab, revealed).items():
        assert values, what
        for name, text in hidden.items():
            for value in values:
                assert value not in text, f"{what} in `kinspect {name}`"
    for name, text in hidden.items():  # never sent, only derived from: never anywhere
        assert USERS["bob"] not in text and CAROL_PW not in text, name


def test_show_secrets_shows_them(lab, shown, revealed):
    secrets = secrets_of(lab, revealed)
    for name in ("decode -v", "decode --json", "decode --json -j2"):
        for what, values in secrets.items():
            assert any(value in shown[name] for value in values), f"{what} not in `kinspect {name} --show-secrets`"
    for name in ("decode", "validate -v", "validate --json", "validate --junit"):  # the raw v0 token's note
        assert USERS["alice"] in shown[name], name


def test_redaction_keeps_the_shape_and_the_user_names(hidden):
    records = [json.loads(line) for line in hidden["decode --json"].splitlines()]
    assert hidden["decode --json -j2"] == hidden["decode --json"]
    auth = [r["request"]["auth_bytes"] for r in records if r.get("api_name") == "SaslAuthenticate"]
    assert f"\x00alice\x00<redacted {len(USERS['alice'])} bytes>" in auth
    assert any(a.startswith("n,,n=bob,r=") for a in auth)
    assert any(re.fullmatch(r"c=biws,r=\S+,p=<redacted 88 bytes>", a) for a in auth)
    raw = [r["token"] for r in records if r.get("kind") == "sasl_token" and r["side"] == "client"]
    assert f"alice\x00alice\x00<redacted {len(USERS['alice'])} bytes>" in raw  # kafka-python: authzid too
    assert any(t.startswith("n,,n=bob,r=") for t in raw)
    by_api = {r["api_name"]: r for r in records if r["type"] == "exchange"}
    assert by_api["CreateDelegationToken"]["response"]["hmac"] == "<redacted 64 bytes>"
    assert by_api["RenewDelegationToken"]["request"]["hmac"] == "<redacted 64 bytes>"
    upsert = by_api["AlterUserScramCredentials"]["request"]["upsertions"][0]
    assert upsert["name"] == "carol" and upsert["salted_password"] == "<redacted 64 bytes>"
    jaas = [c for r in records if r.get("api_name") == "IncrementalAlterConfigs"
            for c in r["request"]["resources"][0]["configs"]]
    assert jaas[0]["value"] == f"<redacted {len(JAAS)} bytes>"
    forwarded = [r for r in records if r.get("api_name") == "Envelope"]
    assert len(forwarded) >= 5 and all(r["request"]["request_data"].startswith("<redacted ") for r in forwarded)
    for name in ("decode", "decode -v", "validate -v"):
        assert "alice" in hidden[name] and "n=bob" in hidden[name], name


def test_the_broker_hides_sensitive_configs_itself(lab, revealed):
    # DescribeConfigs: the broker sends null for what it flags sensitive; kinspect keeps the null
    assert "sasl.jaas.config=null sensitive=true" in lab.described
    configs = [c for r in revealed if r.get("api_name") == "DescribeConfigs" and r["response"]
               for result in r["response"]["results"] for c in result["configs"]]
    sensitive = [c for c in configs if c["is_sensitive"]]
    assert sensitive and all(c["value"] is None for c in sensitive)
    assert any(c["config_type"] == 9 for c in sensitive)  # PASSWORD
