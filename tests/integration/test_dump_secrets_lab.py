"""Secrets in a real KRaft metadata log: nothing secret in any output of dump unless --show-secrets.

One Apache Kafka broker with SASL users (their SCRAM credentials written at format time, into
bootstrap.checkpoint and then the metadata log); kafka-configs adds a SCRAM user and sets the
listener's sasl.jaas.config, passwords inside, which KRaft keeps in clear in a ConfigRecord; a
metadata snapshot (.checkpoint) is taken with them. Then kinspect dump (table, --json, --format
kafka; --data in every --decode, --no-internal, --records) runs over __cluster_metadata-0 and
bootstrap.checkpoint with and without --show-secrets, and --format kafka --show-secrets is
checked against kafka-dump-log (which prints the secrets) byte for byte.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.lab.kafka import KAFKA_4, KafkaBroker, LabError

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
USERS = {"alice": "alice-dump-pw", "bob": "bob-dump-pw"}
CAROL_PW = "carol-dump-scram-pw"
DAVE_PW = "dave-dump-jaas-pw"
JAAS_NAME = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{user}="{password}"' for user, password in {"dave": DAVE_PW, **USERS}.items())
        + ";")
PASSWORDS = (DAVE_PW, *USERS.values())  # in the JAAS config's text
SCRAM_KEYS = ("salt", "stored_key", "server_key")


def _snapshot_with(metadata: Path, secret: bytes, timeout: float = 90) -> Path:
    """The first .checkpoint the controller writes that holds the secret (taken every second)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for snapshot in sorted(metadata.glob("*.checkpoint")):
            if secret in snapshot.read_bytes():
                return snapshot
        time.sleep(0.5)
    raise LabError(f"no metadata snapshot with the new configs after {timeout} s")


@pytest.fixture(scope="module")
def lab():
    # a directory of its own: pytest's numbered temporary directories are removed by later runs
    with tempfile.TemporaryDirectory(prefix="kinspect-dump-secrets-") as temporary:
        yield _write_metadata(Path(temporary))


def _write_metadata(directory: Path) -> SimpleNamespace:
    config = {"metadata.log.max.snapshot.interval.ms": 1000}
    with KafkaBroker(KAFKA_4, sasl_users=USERS, config=config, workdir=directory / "kafka") as kafka:
        kafka.configs("--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config",
                      f"SCRAM-SHA-512=[iterations=8192,password={CAROL_PW}]", user="alice")
        settings = directory / "jaas.properties"
        settings.write_text(f"{JAAS_NAME}={JAAS}\nlog.retention.ms=604800001\n")
        kafka.configs("--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config-file",
                      str(settings), user="alice")
        snapshot = _snapshot_with(kafka.log_dir / "__cluster_metadata-0", DAVE_PW.encode())
    logs = kafka.log_dir
    files = [Path("__cluster_metadata-0") / "00000000000000000000.log", snapshot.relative_to(logs)]
    return SimpleNamespace(kafka=kafka, logs=logs, files=files, bootstrap=Path("bootstrap.checkpoint"))


def kinspect(lab, *args) -> str:
    return kinspect_bytes(lab, *args).decode("utf-8", "replace")


def kinspect_bytes(lab, *args) -> bytes:
    done = subprocess.run([sys.executable, "-m", "kinspect", "dump", *map(str, args)], cwd=lab.logs,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, (args, done.stderr.decode()[-2000:])
    return done.stdout


def kafka_dump_log(lab, *files: Path, decoder: str | None = None) -> bytes:
    """kafka-dump-log's stdout as bytes (text mode would turn a CR in a raw value into a newline)."""
    args = ["--files", ",".join(map(str, files)), "--deep-iteration", "--print-data-log"]
    args += [f"--{decoder}-decoder"] if decoder else []
    done = subprocess.run(lab.kafka.java_command("kafka.tools.DumpLogSegments", *args), cwd=lab.logs,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout


def _metadata(text: str) -> list[dict]:
    """The decoded metadata records of dump --json --data's batches."""
    records = [r for line in text.splitlines() for r in json.loads(line).get("records") or ()]
    return [r["value"] for r in records if isinstance(r.get("value"), dict) and "record_name" in r["value"]]


def _raw(value) -> bytes:
    return base64.b64decode(value["b64"]) if isinstance(value, dict) else value.encode()


def _forms(secret: bytes) -> set[str]:
    forms = {secret.hex(), base64.b64encode(secret).decode()}
    try:
        forms.add(secret.decode())
    except UnicodeDecodeError:
        pass
    return forms


@pytest.fixture(scope="module")
def revealed(lab) -> dict:
    """The metadata records as --show-secrets shows them, and every form of each secret."""
    records = _metadata(kinspect(lab, "--json", "--data", "--show-secrets", *lab.files, lab.bootstrap))
    scram = [r["data"] for r in records if r["record_name"] == "UserScramCredentialRecord"]
    jaas = [r["data"]["value"] for r in records
            if r["record_name"] == "ConfigRecord" and r["data"]["name"] == JAAS_NAME]
    secrets = {_raw(user[key]) for user in scram for key in SCRAM_KEYS} | {p.encode() for p in PASSWORDS}
    return {"scram": scram, "jaas": jaas, "forms": set().union(*map(_forms, secrets))}


def test_the_lab_wrote_the_secrets_where_dump_reads_them(lab, revealed):
    users = {user["name"] for user in revealed["scram"]}
    assert users == {"alice", "bob", "carol"}
    assert revealed["jaas"] and all(value == JAAS for value in revealed["jaas"])
    in_bootstrap = _metadata(kinspect(lab, "--json", "--data", "--show-secrets", lab.bootstrap))
    assert sum(r["record_name"] == "UserScramCredentialRecord" for r in in_bootstrap) == 2


OUTPUTS = [["--data"], ["--data", "--decode", "text"], ["--data", "--decode", "hex"],
           ["--data", "--decode", "json"], ["--json", "--data"], ["--format", "kafka", "--data"],
           ["--data", "--no-internal"],
           ["--json", "--data", "--no-internal"], ["--format", "kafka", "--data", "--no-internal"],
           ["--records"], ["--json", "--records"], ["--format", "kafka"]]


@pytest.mark.parametrize("args", OUTPUTS, ids=" ".join)
def test_no_dump_output_shows_a_secret_unless_asked(lab, revealed, args):
    hidden = kinspect(lab, *args, *lab.files, lab.bootstrap)
    leaked = sorted(form for form in revealed["forms"] if form in hidden)
    assert not leaked
    if "--data" in args:
        assert "<redacted" in hidden
        shown = kinspect(lab, *args, "--show-secrets", *lab.files, lab.bootstrap)
        assert "<redacted" not in shown
        # (the table shortens long values to 200 characters; JSON writes raw bytes that are not UTF-8
        # in base64)
        if args[0] == "--format" or args == ["--json", "--data"]:
            assert DAVE_PW in shown


def test_json_keeps_the_shape_user_names_and_iterations(lab):
    records = _metadata(kinspect(lab, "--json", "--data", *lab.files))
    scram = [r["data"] for r in records if r["record_name"] == "UserScramCredentialRecord"]
    assert {user["name"] for user in scram} == {"alice", "bob", "carol"}
    assert {user["iterations"] for user in scram if user["name"] == "carol"} == {8192}
    for user in scram:
        for key in SCRAM_KEYS:
            assert user[key].startswith("<redacted ") and user[key].endswith(" bytes>")
    configs = {r["data"]["name"]: r["data"]["value"] for r in records if r["record_name"] == "ConfigRecord"}
    assert configs[JAAS_NAME] == f"<redacted {len(JAAS)} bytes>"
    assert configs["log.retention.ms"] == "604800001"


def test_kafka_format_with_show_secrets_is_kafka_dump_logs(lab):
    files = (*lab.files, lab.bootstrap)
    theirs = kafka_dump_log(lab, *files, decoder="cluster-metadata")
    assert DAVE_PW.encode() in theirs  # kafka-dump-log prints the secrets
    assert kinspect_bytes(lab, "--format", "kafka-exact", "--data", "--show-secrets", *files) == theirs
    hidden = kinspect_bytes(lab, "--format", "kafka-exact", "--data", *files)
    different = [ours for ours, line in zip(hidden.split(b"\n"), theirs.split(b"\n")) if ours != line]
    assert hidden.count(b"\n") == theirs.count(b"\n")
    assert different and all(b"<redacted" in line for line in different)
    # without a decoder: raw values, SCRAM keys as Java reads random bytes (not as Python would)
    raw = kafka_dump_log(lab, lab.bootstrap)
    shown = kinspect_bytes(lab, "--format", "kafka-exact", "--data", "--no-internal", "--show-secrets",
                           lab.bootstrap)
    assert shown == raw
