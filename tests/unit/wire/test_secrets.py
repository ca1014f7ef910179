"""Secrets redacted by default: SASL tokens, delegation-token HMACs, secret configs, SCRAM credentials.

Bodies are hand-built with kinspect's encoder for every version of each API, sent through a
Connection and completed as the pipeline does; the CLI tests run every output over a capture of
such exchanges. Real clients and a real broker: tests/integration/test_secrets_lab.py.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest
from click.testing import CliRunner

from kinspect.cli import cli
from kinspect.wire import apis, secrets
from kinspect.wire.encode import encode_body, encode_request
from kinspect.wire.exchange import Connection, complete
from kinspect.wire.layouts import DEFINED, layout
from kinspect.wire.topics import TopicNames

PASSWORD = b"alice-pw"
PLAIN = b"\x00alice\x00" + PASSWORD
PROOF = b"dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SCRAM_FIRST = b"n,,n=alice,r=rOprNGfwEbeRWgbNEkqO"
SCRAM_FINAL = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=" + PROOF
SIGNATURE = b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
JWT = b"eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9."
OAUTH = b"n,,\x01auth=Bearer " + JWT + b"\x01host=broker\x01port=9092\x01\x01"
HMAC = bytes(range(32))


def versions(api_key: int, kind: str) -> list[int]:
    return sorted(v for key, v, k in DEFINED if key == api_key and k == kind)


def response_frame(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    flexible = apis.response_header_version(api_key, version) >= 1
    payload = struct.pack(">i", correlation_id) + (b"\x00" if flexible else b"")
    payload += encode_body(api_key, version, "response", body)
    return struct.pack(">i", len(payload)) + payload


def exchanged(api_key: int, version: int, request: dict, response: dict, show_secrets: bool = False) -> dict:
    """One exchange through a Connection, completed as the pipeline does."""
    conn = Connection("10.0.0.1:5000-10.0.0.2:9092", max_frame=1 << 20, client_syn=True, server_syn=True,
                      show_secrets=show_secrets)
    assert conn.client_data(encode_request(api_key, version, 7, "app", request), 1.0) == []
    out = conn.server_data(response_frame(api_key, version, 7, response), 2.0)
    done = complete(out[0], TopicNames())
    assert not [p for p in done["problems"] if p["severity"] == "error"], done["problems"]
    return done


# -- SASL tokens ---------------------------------------------------------------------------------

def test_plain_keeps_authzid_and_user_and_hides_the_password():
    assert secrets.client_token(PLAIN) == b"\x00alice\x00<redacted 8 bytes>"
    assert secrets.client_token(b"admin\x00alice\x00" + PASSWORD) == b"admin\x00alice\x00<redacted 8 bytes>"
    assert secrets.client_token(b"\x00alice\x00") == b"\x00alice\x00<redacted 0 bytes>"


def test_scram_client_final_loses_its_proof_only():
    assert secrets.client_token(SCRAM_FIRST) == SCRAM_FIRST
    assert secrets.client_token(b"n,a=admin,n=alice,r=abc") == b"n,a=admin,n=alice,r=abc"
    redacted = secrets.client_token(SCRAM_FINAL)
    assert redacted == SCRAM_FINAL[:-len(PROOF)] + f"<redacted {len(PROOF)} bytes>".encode()
    assert PROOF not in redacted


def test_oauthbearer_loses_its_token_and_keeps_the_rest():
    redacted = secrets.client_token(OAUTH)
    assert redacted == (b"n,,\x01auth=Bearer " + f"<redacted {len(JWT)} bytes>".encode()
                        + b"\x01host=broker\x01port=9092\x01\x01")
    other_scheme = secrets.client_token(b"n,a=alice,\x01auth=Token abc\x01\x01")
    assert other_scheme == b"n,a=alice,\x01auth=<redacted 9 bytes>\x01\x01"
    assert secrets.client_token(b"\x01") == b"\x01"  # the client's answer to an error challenge


@pytest.mark.parametrize("token", [
    b"\x60\x82\x02\x10\x06\x09\x2a\x86\x48\x86\xf7\x12\x01\x02\x02",  # a GSSAPI initial token's start
    b"a\x00b\x00c\x00d",                                             # NULs, but not PLAIN's three parts
    b"c=biws,r=abc",                                                 # client-final without a proof
    b"some-token",
])
def test_anything_else_from_a_client_goes_whole(token):
    assert secrets.client_token(token) == f"<redacted {len(token)} bytes>"


def test_server_tokens():
    server_first = b"r=abc%hvYD,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert secrets.server_token(server_first) == server_first
    assert secrets.server_token(b"v=" + SIGNATURE) == f"v=<redacted {len(SIGNATURE)} bytes>".encode()
    assert secrets.server_token(b"e=invalid-proof") == b"e=invalid-proof"
    assert secrets.server_token(b"") == b""
    status = b'{"status":"invalid_token","scope":"kafka"}'
    assert secrets.server_token(status) == status
    assert secrets.server_token(b"\x6f\x81\x90\x30") == "<redacted 4 bytes>"


# -- config names ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.password",
    "listener.name.sasl_ssl.ssl.keystore.password", "sasl.jaas.config",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config", "listener.name.x.scram-sha-512.sasl.jaas.config",
    "password.encoder.secret", "delegation.token.secret.key", "delegation.token.master.key",
    "sasl.oauthbearer.client.credentials.client.secret", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.truststore.certificates", "sasl.oauthbearer.assertion.private.key.passphrase", "my.Secret.thing",
])
def test_secret_config_names(name):
    assert secrets.secret_name(name)


@pytest.mark.parametrize("name", [
    "compression.type", "ssl.keystore.location", "ssl.keystore.type", "password.encoder.iterations",
    "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "", None,
])
def test_ordinary_config_names(name):
    assert not secrets.secret_name(name)


# -- the table against Kafka's schemas ------------------------------------------------------------

def _field_types(fields, prefix="") -> dict[str, str]:
    out = {}
    for f in fields:
        path = prefix + f.key + ("[]" if f.array else "")
        out[path] = f.type
        if f.type == "struct":
            out.update(_field_types(f.fields, path + "."))
    return out


@pytest.mark.parametrize("where", sorted(secrets.SECRET_FIELDS))
def test_every_path_in_the_table_is_a_field_up_to_the_newest_version(where):
    api_key, kind = where
    for path, rule in secrets.SECRET_FIELDS[where]:
        having = []
        for version in versions(api_key, kind):
            fields = _field_types(layout(api_key, version, kind).fields)
            if path not in fields:
                continue
            having.append(version)
            if rule is secrets.config_entry:
                assert fields[path] == "struct" and {"name", "value"} <= {
                    p.rsplit(".", 1)[-1] for p in fields if p.startswith(path + ".")}
            else:
                assert fields[path] == "bytes", (path, fields[path])
        assert having and having[-1] == versions(api_key, kind)[-1], (apis.api_name(api_key), kind, path)
        assert having == list(range(having[0], having[-1] + 1))


def test_describe_user_scram_credentials_holds_nothing_secret():
    for version in versions(50, "response"):
        assert set(_field_types(layout(50, version, "response").fields)) == {
            "throttle_time_ms", "error_code", "error_message", "results[]", "results[].user",
            "results[].error_code", "results[].error_message", "results[].credential_infos[]",
            "results[].credential_infos[].mechanism", "results[].credential_infos[].iterations"}


# -- bodies, every version, through Connection and complete() ------------------------------------

@pytest.mark.parametrize("version", versions(36, "request"))
def test_sasl_authenticate(version):
    for token, server, shown in ((PLAIN, b"", b"\x00alice\x00<redacted 8 bytes>"),
                                 (SCRAM_FINAL, b"v=" + SIGNATURE, None), (OAUTH, b"", None)):
        done = exchanged(36, version, {"auth_bytes": token}, {"error_code": 0, "auth_bytes": server})
        assert done["request"]["auth_bytes"] == secrets.client_token(token) != token
        assert done["response"]["auth_bytes"] == secrets.server_token(server)
        if shown is not None:
            assert done["request"]["auth_bytes"] == shown
        revealed = exchanged(36, version, {"auth_bytes": token}, {"error_code": 0, "auth_bytes": server},
                             show_secrets=True)
        assert revealed["request"]["auth_bytes"] == token and revealed["response"]["auth_bytes"] == server


@pytest.mark.parametrize("version", versions(38, "request"))
def test_create_delegation_token_hmac(version):
    response = {"error_code": 0, "principal_type": "User", "principal_name": "alice", "token_id": "tok-1",
                "hmac": HMAC, "issue_timestamp_ms": 1, "expiry_timestamp_ms": 2, "max_timestamp_ms": 3}
    done = exchanged(38, version, {"renewers": [{"principal_type": "User", "principal_name": "bob"}]}, response)
    assert done["response"]["hmac"] == "<redacted 32 bytes>"
    assert done["response"]["token_id"] == "tok-1" and done["request"]["renewers"][0]["principal_name"] == "bob"
    assert exchanged(38, version, {}, response, show_secrets=True)["response"]["hmac"] == HMAC


@pytest.mark.parametrize("api_key", [39, 40])
def test_renew_and_expire_delegation_token_hmac(api_key):
    for version in versions(api_key, "request"):
        done = exchanged(api_key, version, {"hmac": HMAC}, {"error_code": 0})
        assert done["request"]["hmac"] == "<redacted 32 bytes>"
        assert exchanged(api_key, version, {"hmac": HMAC}, {"error_code": 0},
                         show_secrets=True)["request"]["hmac"] == HMAC


@pytest.mark.parametrize("version", versions(41, "request"))
def test_describe_delegation_token_hmacs(version):
    token = {"principal_type": "User", "principal_name": "alice", "token_id": "tok-1", "hmac": HMAC,
             "renewers": [{"principal_type": "User", "principal_name": "bob"}]}
    done = exchanged(41, version, {"owners": None}, {"error_code": 0, "tokens": [token, dict(token, hmac=b"xy")]})
    assert [t["hmac"] for t in done["response"]["tokens"]] == ["<redacted 32 bytes>", "<redacted 2 bytes>"]
    assert done["response"]["tokens"][0]["token_id"] == "tok-1"


def _configs(*entries) -> list[dict]:
    return [{"name": name, "value": value, "is_sensitive": sensitive, "config_type": kind, "read_only": False,
             "synonyms": [{"name": f"listener.name.x.{name}", "value": value, "source": 4},
                          {"name": name, "value": "default", "source": 5}]}
            for name, value, sensitive, kind in entries]


DESCRIBED = _configs(("compression.type", "zstd", False, 2),
                     ("ssl.keystore.password", "ks-secret", False, 9),     # by name (and type)
                     ("custom.opaque", "flagged-secret", True, 2),          # flagged sensitive
                     ("listener.ssl.thing", "typed-secret", False, 9),      # PASSWORD type
                     ("sasl.jaas.config", None, True, 9))                   # the broker already hid it


@pytest.mark.parametrize("version", versions(32, "response"))
def test_describe_configs_values_and_synonyms(version):
    request = {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
               "include_synonyms": True}
    response = {"results": [{"error_code": 0, "resource_type": 4, "resource_name": "1", "configs": DESCRIBED}]}
    configs = exchanged(32, version, request, response)["response"]["results"][0]["configs"]
    by_name = {c["name"]: c for c in configs}
    assert by_name["compression.type"]["value"] == "zstd"
    assert by_name["ssl.keystore.password"]["value"] == "<redacted 9 bytes>"
    assert by_name["custom.opaque"]["value"] == "<redacted 14 bytes>"
    assert by_name["sasl.jaas.config"]["value"] is None
    # PASSWORD as config_type exists from v3; before it, the name is all there is
    assert by_name["listener.ssl.thing"]["value"] == ("<redacted 12 bytes>" if version >= 3 else "typed-secret")
    if version >= 1:
        assert [s["value"] for s in by_name["compression.type"]["synonyms"]] == ["zstd", "default"]
        assert [s["value"] for s in by_name["ssl.keystore.password"]["synonyms"]] == [
            "<redacted 9 bytes>", "<redacted 7 bytes>"]
        assert [s["value"] for s in by_name["custom.opaque"]["synonyms"]] == [
            "<redacted 14 bytes>", "<redacted 7 bytes>"]
    revealed = exchanged(32, version, request, response, show_secrets=True)["response"]["results"][0]["configs"]
    assert revealed[1]["value"] == "ks-secret" and revealed[2]["value"] == "flagged-secret"


@pytest.mark.parametrize("api_key", [33, 44])
def test_alter_configs_request_values(api_key):
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw";'
    entries = [{"name": "listener.name.sasl_plaintext.plain.sasl.jaas.config", "value": jaas},
               {"name": "ssl.truststore.password", "value": "ts-secret"},
               {"name": "log.retention.ms", "value": "1000"},
               {"name": "ssl.key.password", "value": None}]
    for version in versions(api_key, "request"):
        request = {"resources": [{"resource_type": 4, "resource_name": "1", "configs": entries}]}
        done = exchanged(api_key, version, request, {"responses": []})
        values = [c["value"] for c in done["request"]["resources"][0]["configs"]]
        assert values == [f"<redacted {len(jaas)} bytes>", "<redacted 9 bytes>", "1000", None]
        revealed = exchanged(api_key, version, request, {"responses": []}, show_secrets=True)
        assert [c["value"] for c in revealed["request"]["resources"][0]["configs"]] == [
            jaas, "ts-secret", "1000", None]


@pytest.mark.parametrize("version", versions(19, "request"))
def test_create_topics_request_and_response_configs(version):
    request = {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                           "configs": [{"name": "my.secret.config", "value": "topic-secret"},
                                       {"name": "cleanup.policy", "value": "compact"}]}]}
    response = {"topics": [{"name": "t", "error_code": 0, "num_partitions": 1, "replication_factor": 1,
                            "configs": [{"name": "opaque", "value": "flagged", "read_only": False,
                                         "config_source": 5, "is_sensitive": True},
                                        {"name": "cleanup.policy", "value": "compact", "read_only": False,
                                         "config_source": 1, "is_sensitive": False}]}]}
    done = exchanged(19, version, request, response)
    assert [c["value"] for c in done["request"]["topics"][0]["configs"]] == ["<redacted 12 bytes>", "compact"]
    if version >= 5:  # configs in the response from v5
        assert [c["value"] for c in done["response"]["topics"][0]["configs"]] == ["<redacted 7 bytes>", "compact"]


@pytest.mark.parametrize("version", versions(51, "request"))
def test_alter_user_scram_credentials_salt_and_salted_password(version):
    request = {"deletions": [{"name": "carol", "mechanism": 1}],
               "upsertions": [{"name": "alice", "mechanism": 2, "iterations": 4096, "salt": b"s" * 16,
                               "salted_password": b"p" * 64}]}
    done = exchanged(51, version, request, {"results": [{"user": "alice", "error_code": 0}]})
    upsert = done["request"]["upsertions"][0]
    assert upsert == {"name": "alice", "mechanism": 2, "iterations": 4096, "salt": "<redacted 16 bytes>",
                      "salted_password": "<redacted 64 bytes>"}
    assert done["request"]["deletions"] == [{"name": "carol", "mechanism": 1}]


def test_an_envelope_goes_whole_when_it_forwards_an_api_with_secrets():
    # KRaft forwards admin requests from a broker to the controller inside an Envelope
    alter = encode_request(44, 1, 3, "adminclient-1", {"resources": [{"resource_type": 4, "resource_name": "1",
        "configs": [{"name": "ssl.key.password", "config_operation": 0, "value": "forwarded-pw"}]}]})[4:]
    inner_response = struct.pack(">i", 3) + b"\x00" + encode_body(44, 1, "response", {"responses": []})
    metadata = encode_request(3, 1, 4, "x", {"topics": None})[4:]
    request = {"request_data": alter, "request_principal": b"\x00User\x00alice",
               "client_host_address": b"\x7f\0\0\1"}
    done = exchanged(58, 0, request, {"response_data": inner_response, "error_code": 0})
    assert done["request"]["request_data"] == f"<redacted {len(alter)} bytes>"
    assert done["response"]["response_data"] == f"<redacted {len(inner_response)} bytes>"
    assert done["request"]["request_principal"] == b"\x00User\x00alice"
    answer = {"response_data": b"\x00\x00\x00\x04", "error_code": 0}
    kept = exchanged(58, 0, dict(request, request_data=metadata), answer)
    assert kept["request"]["request_data"] == metadata and kept["response"]["response_data"] == answer["response_data"]
    shown = exchanged(58, 0, request, {"response_data": inner_response, "error_code": 0}, show_secrets=True)
    assert shown["request"]["request_data"] == alter
    unknown = {"request_data": b"\x00"}  # too short to tell which API: goes whole
    secrets.redact(58, unknown, None)
    assert unknown["request_data"] == "<redacted 1 bytes>"


def test_a_partial_body_is_redacted_as_far_as_it_goes():
    body = {"resources": [{"resource_type": 4, "configs": [{"name": "ssl.key.password", "value": "x"}, 5]}],
            "validate_only": None}
    secrets.redact_body(44, "request", body)
    assert body["resources"][0]["configs"][0]["value"] == "<redacted 1 bytes>"
    for broken in (None, [], {"resources": None}, {"resources": [None, {"configs": "?"}]}):
        secrets.redact_body(44, "request", broken)


# -- every output of the CLI ----------------------------------------------------------------------

CLIENT, SERVER = ("10.0.0.1", 50000), ("10.0.0.2", 9092)


class Capture:
    """A raw-IP pcap of one TCP connection (handshake, then data either way)."""

    def __init__(self):
        self.packets: list[bytes] = []
        self.seq = {CLIENT: 1000, SERVER: 5000}
        self.send(CLIENT, b"", 0x02)
        self.send(SERVER, b"", 0x12)

    def send(self, side, data: bytes, flags: int = 0x18) -> None:
        other = SERVER if side == CLIENT else CLIENT
        tcp = struct.pack(">HHIIBBHHH", side[1], other[1], self.seq[side], self.seq[other], 0x50, flags,
                          65535, 0, 0)
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40 + len(data), 0, 0x4000, 64, 6, 0,
                         bytes(map(int, side[0].split("."))), bytes(map(int, other[0].split("."))))
        self.packets.append(ip + tcp + data)
        self.seq[side] = (self.seq[side] + len(data) + (1 if flags & 0x02 else 0)) & 0xFFFFFFFF

    def pcap(self) -> bytes:
        out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 101)]
        for i, packet in enumerate(self.packets):
            out.append(struct.pack("<IIII", 1_700_000_000, i * 1000, len(packet), len(packet)) + packet)
        return b"".join(out)


JAAS_SECRET = "jaas-secret-pw"
V0_PASSWORD = b"raw-v0-secret"
SECRET_TEXTS = ("alice-pw", JAAS_SECRET, V0_PASSWORD.decode())


def secret_capture() -> bytes:
    """SaslAuthenticate PLAIN, an IncrementalAlterConfigs of a JAAS config, a CreateDelegationToken;
    then a second handshake, v0 this time, with its raw PLAIN token (a capture of two logins)."""
    c = Capture()
    exchanges = [
        (17, 1, {"mechanism": "PLAIN"}, {"error_code": 0, "mechanisms": ["PLAIN"]}),
        (36, 2, {"auth_bytes": PLAIN}, {"error_code": 0, "auth_bytes": b""}),
        (44, 1, {"resources": [{"resource_type": 4, "resource_name": "1", "configs": [
            {"name": "listener.name.sasl_plaintext.plain.sasl.jaas.config", "config_operation": 0,
             "value": f'PlainLoginModule required user_bob="{JAAS_SECRET}";'}]}]}, {"responses": []}),
        (38, 3, {"renewers": []}, {"error_code": 0, "principal_type": "User", "principal_name": "alice",
                                   "token_id": "tok-1", "hmac": HMAC}),
        (17, 0, {"mechanism": "PLAIN"}, {"error_code": 0, "mechanisms": ["PLAIN"]}),
    ]
    for correlation_id, (api_key, version, request, response) in enumerate(exchanges, 1):
        c.send(CLIENT, encode_request(api_key, version, correlation_id, "app", request))
        c.send(SERVER, response_frame(api_key, version, correlation_id, response))
    token = b"\x00carol\x00" + V0_PASSWORD
    c.send(CLIENT, struct.pack(">i", len(token)) + token)
    c.send(SERVER, struct.pack(">i", 0))
    c.send(CLIENT, encode_request(3, 1, 9, "app", {"topics": None}))
    c.send(SERVER, response_frame(3, 1, 9, {"brokers": [], "controller_id": 1, "topics": []}))
    return c.pcap()


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("secrets") / "sasl.pcap"
    path.write_bytes(secret_capture())
    return path


def invoke(*args, input=None) -> str:
    if "-j2" in args:  # worker processes write to the real stdout, which CliRunner does not catch
        done = subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], input=input,
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.decode()
    result = CliRunner().invoke(cli, [*map(str, args)], input=input, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_decode_json_redacts_and_show_secrets_reveals(capture):
    lines = [json.loads(line) for line in invoke("decode", "--json", capture).splitlines()]
    names = [line.get("api_name") or line["kind"] for line in lines]
    assert names == ["SaslHandshake", "SaslAuthenticate", "IncrementalAlterConfigs", "CreateDelegationToken",
                     "SaslHandshake", "sasl_token", "sasl_token", "Metadata"]
    assert lines[1]["request"]["auth_bytes"] == "\x00alice\x00<redacted 8 bytes>"
    assert lines[3]["response"]["hmac"] == "<redacted 32 bytes>"
    client, server = lines[5], lines[6]
    assert (client["side"], client["mechanism"], client["size"], client["token"]) == (
        "client", "PLAIN", 20, "\x00carol\x00<redacted 13 bytes>")
    assert (server["side"], server["size"], server["token"], server["severity"]) == ("server", 0, "", "info")
    assert lines[7]["response"] == {"brokers": [], "controller_id": 1, "topics": []}
    revealed = [json.loads(line) for line in invoke("decode", "--json", "--show-secrets", capture).splitlines()]
    assert revealed[1]["request"]["auth_bytes"] == PLAIN.decode()
    assert revealed[5]["token"] == "\x00carol\x00" + V0_PASSWORD.decode()


@pytest.mark.parametrize("args", [["decode"], ["decode", "-v"], ["decode", "--json"], ["decode", "--summary"],
                                  ["decode", "--json", "-j2", "-"], ["validate"], ["validate", "-v"],
                                  ["validate", "--json"], ["offsets", "--capture"],
                                  ["offsets", "--json", "--capture"]])
def test_no_output_shows_a_secret_unless_asked(capture, args, tmp_path):
    stdin = capture.read_bytes() if args[-1] == "-" else None
    target = [] if args[-1] == "-" else [capture]
    hidden = invoke(*args, *target, input=stdin)
    shown = invoke(*args[:1], "--show-secrets", *args[1:], *target, input=stdin)
    for secret in SECRET_TEXTS:
        assert secret not in hidden
    if args[:2] in (["decode", "-v"], ["decode", "--json"]):
        for secret in SECRET_TEXTS:
            assert secret in shown
        assert "alice" in hidden and "carol" in hidden
    if args in (["validate", "-v"], ["validate", "--json"]):
        assert V0_PASSWORD.decode() in shown and "carol" in hidden  # the raw v0 token's finding


def test_validate_junit_holds_no_secret(capture, tmp_path):
    for flags, name in (([], "hidden.xml"), (["--show-secrets"], "shown.xml")):
        invoke("validate", *flags, "--junit", tmp_path / name, capture)
    hidden, shown = (tmp_path / "hidden.xml").read_text(), (tmp_path / "shown.xml").read_text()
    assert all(s not in hidden for s in SECRET_TEXTS) and "carol" in hidden
    assert V0_PASSWORD.decode() in shown  # the raw v0 token's note
