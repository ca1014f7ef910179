"""Real TLS without a broker: the Kafka byte streams of a recorded fixture (librdkafka against a
real broker, pcaps/) are sent again through Python's ssl on loopback, a client and a server
per connection, with SSLContext.keylog_filename set, and captured with tcpdump. Decoding that
capture with the key log gives the fixture's exchanges, field for field.

TLS 1.2 and 1.3 are forced in turn with each AEAD suite. Python sets TLS 1.2 suites itself
(``set_ciphers``); TLS 1.3 suites only through OpenSSL's configuration, so the replay runs in a
child process whose OPENSSL_CONF names the suite (``Ciphersuites``).

Damage: a byte flipped in one protected record gives one ``tls_auth`` notice and the exchanges
around it still decode; a key log without one connection's lines gives one ``tls_no_keys``
notice for that connection and the others decode. Without any key log, every connection is
reported once and decode says what to pass.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "pcaps" / "librdkafka-produce-consume.pcapng"

# (name, TLS version, OpenSSL cipher string for 1.2 / TLS 1.3 suite name, expected suite)
CASES = [
    ("tls12-aes128", "1.2", "ECDHE-ECDSA-AES128-GCM-SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
    ("tls12-aes256", "1.2", "ECDHE-ECDSA-AES256-GCM-SHA384", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"),
    ("tls12-chacha", "1.2", "ECDHE-ECDSA-CHACHA20-POLY1305", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"),
    ("tls13-aes128", "1.3", "TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"),
    ("tls13-aes256", "1.3", "TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384"),
    ("tls13-chacha", "1.3", "TLS_CHACHA20_POLY1305_SHA256", "TLS_CHACHA20_POLY1305_SHA256"),
]


# -- the replay (runs in a child process: OPENSSL_CONF is read when OpenSSL starts) ---------------

def _replay(spec: dict) -> None:
    """Each connection of ``spec``: a TLS server thread answers a TLS client on loopback; the
    client writes its recorded chunks one by one, the server reads them all, then writes its
    recorded bytes; both close."""
    version = ssl.TLSVersion.TLSv1_3 if spec["version"] == "1.3" else ssl.TLSVersion.TLSv1_2

    def context(side):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if side == "server" else ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ctx.maximum_version = version
        if spec["version"] == "1.2":
            ctx.set_ciphers(spec["cipher"])
        if side == "client":  # as SSLKEYLOGFILE does; a server writing too would log each connection twice
            ctx.keylog_filename = spec["keylog"]
        if side == "server":
            ctx.load_cert_chain(spec["cert"], spec["key"])
        else:
            ctx.load_verify_locations(spec["ca"])
        return ctx

    plain = spec["version"] == "plain"  # the same streams without TLS (tests/bench/bench_tls.py)
    server_ctx, client_ctx = (None, None) if plain else (context("server"), context("client"))
    listener = socket.create_server(("127.0.0.1", spec["port"]))
    for conn in spec["connections"]:
        client_bytes = sum(len(bytes.fromhex(c)) for c in conn["client"])
        server_out = bytes.fromhex(conn["server"])
        failure: list = []

        def serve():
            try:
                raw, _ = listener.accept()
                with raw if plain else server_ctx.wrap_socket(raw, server_side=True) as tls:
                    got = 0
                    while got < client_bytes:
                        chunk = tls.recv(1 << 16)
                        if not chunk:
                            break
                        got += len(chunk)
                    tls.sendall(server_out)
            except Exception as e:  # reported by the client side's assert
                failure.append(repr(e))

        thread = threading.Thread(target=serve)
        thread.start()
        raw = socket.create_connection(("127.0.0.1", spec["port"]))
        with raw if plain else client_ctx.wrap_socket(raw, server_hostname=spec["server_name"]) as tls:
            for chunk in conn["client"]:
                tls.sendall(bytes.fromhex(chunk))
            got = 0
            while got < len(server_out):
                chunk = tls.recv(1 << 16)
                if not chunk:
                    break
                got += len(chunk)
            cipher = ("none", "plain") if plain else tls.cipher()
        thread.join(30)
        assert not failure, failure
        assert got == len(server_out), (got, len(server_out))
        print(json.dumps({"cipher": cipher[0], "version": cipher[1]}), flush=True)
    listener.close()


if __name__ == "__main__":
    _replay(json.loads(sys.stdin.read()))
    sys.exit(0)


# -- the tests ----------------------------------------------------------------------------------------

from kinspect.addresses import format_addr  # noqa: E402
from kinspect.capture.link import decoder_for  # noqa: E402
from kinspect.capture.source import open_capture  # noqa: E402
from kinspect.capture.stream import StreamData  # noqa: E402
from kinspect.capture.tcp import TcpReassembler  # noqa: E402
from kinspect.decode.pipeline import DecodeRun  # noqa: E402
from kinspect.render.jsonl import plain  # noqa: E402
from kinspect.tls import KeyLog  # noqa: E402
from tests.lab.certs import CertificateAuthority  # noqa: E402
from tests.lab.kafka import free_port  # noqa: E402
from tests.lab.recorder import Recorder  # noqa: E402


def fixture_streams(path: Path) -> list[dict]:
    """The Kafka connections of a capture as their two byte streams: the client's as the chunks
    it arrived in, the server's whole."""
    streams: dict = {}
    order: list = []
    reassembler = TcpReassembler()
    with open_capture(str(path)) as capture:
        for _ts, linktype, data, _n in capture.packets():
            segment = decoder_for(linktype)(data)
            if segment is None:
                continue
            src, dst, sport, dport, seq, flags, payload, ack = segment
            for event in reassembler.segment(0.0, src, sport, dst, dport, seq, flags, payload, ack):
                if type(event) is StreamData:
                    if event.flow not in streams:
                        streams[event.flow] = []
                        order.append(event.flow)
                    streams[event.flow].append(bytes(event.data))
    out = []
    servers: set = set()
    for flow in order:  # a Kafka client speaks first: the first direction with data is its
        back = (flow[2], flow[3], flow[0], flow[1])
        if back in servers or flow in servers:
            continue
        servers.add(back)
        out.append({"client": [c.hex() for c in streams[flow]], "server": b"".join(streams.get(back, [])).hex(),
                    "label": f"{format_addr(flow[0], flow[1])}-{format_addr(flow[2], flow[3])}"})
    return out


def exchanges(records) -> list[tuple]:
    """What must match between the fixture and its TLS replay: per exchange, the request's key,
    version, correlation id, client id and both bodies (as JSON would write them)."""
    out = []
    for r in records:
        if r["type"] == "exchange":
            out.append((r["api_key"], r["api_version"], r["correlation_id"], r["client_id"],
                        json.dumps(plain(r["request"]), sort_keys=True),
                        json.dumps(plain(r["response"]), sort_keys=True)))
    return sorted(out)


@pytest.fixture(scope="module")
def fixture_connections():
    return fixture_streams(FIXTURE)


@pytest.fixture(scope="module")
def fixture_exchanges():
    return exchanges(DecodeRun(str(FIXTURE)).records())


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return CertificateAuthority(tmp_path_factory.mktemp("tls-certs"))


def record_replay(tmp: Path, ca, connections: list[dict], version: str, cipher: str,
                  port: int | None = None, name: str = "tls") -> tuple[Path, Path, list[dict]]:
    """The connections replayed through TLS (``version`` "1.2", "1.3", or "plain" for none) and
    captured: (capture, key log, what ssl said)."""
    server = ca.issue("kafka-tls", ["localhost", "127.0.0.1"])
    port = port or free_port()
    keylog = tmp / f"{name}-keys.log"
    capture = tmp / f"{name}.pcap"
    env = dict(os.environ)
    if version == "1.3":
        conf = tmp / "openssl.cnf"
        conf.write_text("openssl_conf = default_conf\n[default_conf]\nssl_conf = ssl_sect\n"
                        "[ssl_sect]\nsystem_default = system_default_sect\n"
                        f"[system_default_sect]\nCiphersuites = {cipher}\n")
        env["OPENSSL_CONF"] = str(conf)
    spec = {"version": version, "cipher": cipher, "keylog": str(keylog), "cert": str(server.cert),
            "key": str(server.key), "ca": str(ca.cert), "port": port, "server_name": "localhost",
            "connections": connections}
    with Recorder(capture, "lo", f"tcp port {port}"):
        done = subprocess.run([sys.executable, __file__], input=json.dumps(spec), capture_output=True,
                              text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    said = [json.loads(line) for line in done.stdout.splitlines()]
    return capture, keylog, said


@pytest.mark.parametrize("name,version,cipher,suite", CASES, ids=[c[0] for c in CASES])
def test_replay_decrypts_to_the_fixture(tmp_path, ca, fixture_connections, fixture_exchanges,
                                        name, version, cipher, suite):
    capture, keylog, said = record_replay(tmp_path, ca, fixture_connections, version, cipher)
    assert {s["version"] for s in said} == {f"TLSv{version}"}
    run = DecodeRun(str(capture), keylog=KeyLog.from_files([keylog]))
    records = list(run.records())
    notices = [r for r in records if r["type"] == "notice" and r["kind"].startswith("tls")]
    assert notices == []
    got = exchanges(records)
    assert len(got) == len(fixture_exchanges) > 0
    assert got == fixture_exchanges
    marks = {json.dumps(r.get("tls"), sort_keys=True) for r in records if r["type"] == "exchange"}
    assert marks == {json.dumps({"cipher": suite, "version": f"TLS {version}"}, sort_keys=True)}
    assert run.tls_connections == len(fixture_connections) and run.tls_undecrypted == 0


# -- the command line on one TLS 1.3 and one TLS 1.2 recording --------------------------------------

def kinspect(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module", params=[("1.3", "TLS_AES_128_GCM_SHA256"), ("1.2", "ECDHE-ECDSA-AES256-GCM-SHA384")],
                ids=["tls13", "tls12"])
def recording(request, tmp_path_factory, ca, fixture_connections):
    tmp = tmp_path_factory.mktemp("tls-cli")
    version, cipher = request.param
    capture, keylog, _ = record_replay(tmp, ca, fixture_connections, version, cipher)
    return tmp, capture, keylog, version


def test_decode_json_and_text_with_the_key_log(recording, fixture_exchanges):
    tmp, capture, keylog, version = recording
    done = kinspect("decode", "--json", "--keylog", keylog, capture)
    assert done.returncode == 0, done.stderr
    records = json_lines(done.stdout)
    found = [r for r in records if r["type"] == "exchange"]
    assert len(found) == len(fixture_exchanges)
    assert all(r["tls"]["version"] == f"TLS {version}" and r["tls"]["cipher"].startswith("TLS_") for r in found)
    assert not [r for r in records if r["type"] == "notice"]
    text = kinspect("decode", "--keylog", keylog, capture)
    lines = [line for line in text.stdout.splitlines() if " v" in line and "#" in line]
    assert len(lines) == len(fixture_exchanges)
    assert all(f"[TLS {version}]" in line for line in lines)


def test_without_the_key_log_each_connection_is_named_once(recording, fixture_connections):
    tmp, capture, keylog, version = recording
    done = kinspect("decode", "--json", capture)
    assert done.returncode == 1
    records = json_lines(done.stdout)
    assert not [r for r in records if r["type"] == "exchange"]
    notices = [r for r in records if r["type"] == "notice"]
    assert [n["kind"] for n in notices] == ["tls_no_keys"] * len(fixture_connections)
    assert len({n["conn"] for n in notices}) == len(fixture_connections)
    for n in notices:
        assert n["server_name"] == "localhost" and n["tls_version"] == f"TLS {version}"
        assert n["cipher"].startswith("TLS_") and n["bytes"] > 0 and "--keylog FILE" in n["what"]
    assert "could not be decrypted" in done.stderr and "--keylog FILE" in done.stderr
    assert "no Kafka traffic found" not in done.stderr


def test_pcapng_with_injected_secrets_needs_no_flag(recording, fixture_exchanges):
    tmp, capture, keylog, version = recording
    injected = tmp / "with-secrets.pcapng"
    subprocess.run(["editcap", "--inject-secrets", f"tls,{keylog}", str(capture), str(injected)], check=True)
    done = kinspect("decode", "--json", injected)
    assert done.returncode == 0, done.stderr
    records = json_lines(done.stdout)
    assert exchanges(records) == fixture_exchanges


def _client_randoms(keylog: Path) -> list[str]:
    seen: list[str] = []
    for line in keylog.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] not in seen:
            seen.append(parts[1])
    return seen


def test_a_key_log_missing_one_connection(recording, fixture_connections, fixture_exchanges):
    tmp, capture, keylog, version = recording
    randoms = _client_randoms(keylog)
    assert len(randoms) == len(fixture_connections)
    partial = tmp / "partial.log"
    partial.write_text("".join(line + "\n" for line in keylog.read_text().splitlines() if randoms[1] not in line))
    done = kinspect("decode", "--json", "--keylog", partial, capture)
    records = json_lines(done.stdout)
    [notice] = [r for r in records if r["type"] == "notice"]
    assert notice["kind"] == "tls_no_keys"
    found = [r for r in records if r["type"] == "exchange"]
    assert notice["conn"] not in {r["conn"] for r in found}
    fixture = [r for r in DecodeRun(str(FIXTURE)).records() if r["type"] == "exchange"]
    lost = sum(r["conn"] == fixture_connections[1]["label"] for r in fixture)
    assert lost > 0 and len(found) == len(fixture_exchanges) - lost


def _client_streams(data: bytes):
    """Per TLS client (in connection order): its flow, initial sequence number and data segments
    as (seq, file offset of the payload, payload)."""
    assert int.from_bytes(data[:4], "little") == 0xA1B2C3D4  # tcpdump's pcap, little-endian
    decode = decoder_for(int.from_bytes(data[20:24], "little"))
    pos, clients, packets = 24, [], {}
    while pos + 16 <= len(data):
        incl = int.from_bytes(data[pos + 8:pos + 12], "little")
        segment = decode(bytes(data[pos + 16:pos + 16 + incl]))
        if segment is not None:
            src, dst, sport, dport, seq, flags, payload, _ack = segment
            flow = (src, sport, dst, dport)
            if flags & 2 and not flags & 16:  # a SYN without ACK: a client
                clients.append(flow)
                packets[flow] = (seq + 1, [])
            elif flow in packets and payload:
                packets[flow][1].append((seq, pos + 16 + incl - len(payload), bytes(payload)))
        pos += 16 + incl
    return [(flow, *packets[flow]) for flow in clients]


def _records(stream: bytes) -> list[tuple[int, int, int]]:
    out, at = [], 0
    while at + 5 <= len(stream):
        length = int.from_bytes(stream[at + 3:at + 5], "big")
        out.append((stream[at], at, length))
        at += 5 + length
    return out


def test_a_flipped_byte_is_one_notice_and_the_rest_decodes(recording, fixture_connections, fixture_exchanges):
    """One bit flipped in the middle of a protected record of the busiest client, well after its
    handshake: one tls_auth notice at that record's offset; the other connections decode whole,
    and the damaged one decodes on after the record (its last request is still found)."""
    tmp, capture, keylog, version = recording
    data = bytearray(capture.read_bytes())
    clients = _client_streams(bytes(data))
    protected = [[r for r in _records(b"".join(p for _, _, p in segments)) if r[0] == 23]
                 for _, _, segments in clients]
    busiest = max(range(len(clients)), key=lambda i: len(protected[i]))
    flow, isn, segments = clients[busiest]
    assert len(protected[busiest]) >= 3
    _, offset, length = protected[busiest][-2]  # the last record after it must still open
    target = offset + 5 + length // 2
    [(seq, file_at, payload)] = [s for s in segments if s[0] - isn <= target < s[0] - isn + len(s[2])]
    data[file_at + target - (seq - isn)] ^= 0x04
    damaged = tmp / "damaged.pcap"
    damaged.write_bytes(bytes(data))

    done = kinspect("decode", "--json", "--keylog", keylog, damaged)
    records = json_lines(done.stdout)
    tls = [r for r in records if r["type"] == "notice" and r["kind"].startswith("tls")]
    assert [(n["kind"], n["side"], n["offset"]) for n in tls] == [("tls_auth", "client", offset)]
    hit = tls[0]["conn"]
    assert hit == f"{format_addr(flow[0], flow[1])}-{format_addr(flow[2], flow[3])}"
    found = [r for r in records if r["type"] == "exchange"]
    assert set(exchanges(found)) <= set(fixture_exchanges)  # nothing decoded wrong
    fixture = [r for r in DecodeRun(str(FIXTURE)).records() if r["type"] == "exchange"]
    label = fixture_connections[busiest]["label"]
    assert sum(r["conn"] != hit for r in found) == sum(r["conn"] != label for r in fixture)
    mine = [r["correlation_id"] for r in found if r["conn"] == hit]
    theirs = [r["correlation_id"] for r in fixture if r["conn"] == label]
    assert 0 < len(theirs) - len(mine) <= 3 and max(mine) == max(theirs)


def test_validate_and_offsets_read_the_tls_capture(recording):
    tmp, capture, keylog, version = recording
    done = kinspect("validate", "--json", "--keylog", keylog, capture)
    assert done.returncode == 0, done.stdout + done.stderr
    plain = kinspect("offsets", "lab-librdkafka-group", "--capture", FIXTURE, "--json")
    tls = kinspect("offsets", "lab-librdkafka-group", "--capture", capture, "--keylog", keylog, "--json")
    assert tls.returncode == plain.returncode == 0, tls.stderr

    def rows(text):
        return sorted((r["topic"], r["partition"], r["current_offset"]) for r in json_lines(text)
                      if r["type"] == "offset")

    assert rows(tls.stdout) == rows(plain.stdout) and rows(plain.stdout)
    blind = kinspect("offsets", "lab-librdkafka-group", "--capture", capture, "--json")
    assert rows(blind.stdout) == [] and "could not be decrypted" in blind.stdout + blind.stderr
