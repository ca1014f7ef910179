"""handshake.py: the hellos of real OpenSSL conversations read in one pass give what the
field-by-field reader gives, cut at every byte and with bytes changed; what does not fit is a
HandshakeError naming the field, never another exception; HandshakeReader across records."""

from __future__ import annotations

import random

import pytest

from kinspect.tls.handshake import (CLIENT_HELLO, FINISHED, SERVER_HELLO, HandshakeError, HandshakeReader,
                                    _client_hello, _server_hello, client_hello, server_hello)
from tests.unit.tls.memtls import converse

READERS = {CLIENT_HELLO: (client_hello, _client_hello), SERVER_HELLO: (server_hello, _server_hello)}


@pytest.fixture(scope="module")
def hellos(tmp_path_factory):
    """(type, body) of the ClientHello and ServerHello of a TLS 1.3 and a TLS 1.2 conversation."""
    tmp = tmp_path_factory.mktemp("hellos")
    out = []
    for version, cipher in (("1.3", None), ("1.2", "ECDHE-ECDSA-CHACHA20-POLY1305")):
        wire = converse(tmp, tmp / f"keys-{version}.log", [("client", b"x")], version, cipher,
                        server_name="broker-1.kafka.example")
        for side in ("client", "server"):
            data = next(d for s, d in wire if s == side)
            assert data[0] == 22 and data[5] in READERS
            out.append((data[5], data[9:9 + int.from_bytes(data[6:9], "big")]))
    return out


def _read(reader, body):
    try:
        return reader(body)
    except HandshakeError as e:
        return ("HandshakeError", str(e))


def test_real_hellos(hellos):
    client = client_hello(hellos[0][1])
    assert client["server_name"] == "broker-1.kafka.example" and len(client["random"]) == 32
    assert 0x0304 in client["supported_versions"]
    assert server_hello(hellos[1][1])["version"] == 0x0304
    assert server_hello(hellos[3][1])["version"] == 0x0303 and server_hello(hellos[3][1])["cipher_suite"] == 0xCCA9


def test_one_pass_equals_field_by_field_cut_anywhere_and_changed(hellos):
    rng = random.Random(15)
    for msg_type, body in hellos:
        fast, careful = READERS[msg_type]
        cases = [body[:cut] for cut in range(len(body) + 1)]
        for _ in range(400):
            changed = bytearray(body)
            for _ in range(rng.randint(1, 4)):
                changed[rng.randrange(len(changed))] = rng.choice([0, 1, 2, 0xFF, rng.randrange(256)])
            cases.append(bytes(changed))
        for case in cases:
            assert _read(fast, case) == _read(careful, case)


def test_a_short_hello_names_its_field():
    with pytest.raises(HandshakeError, match=r"ClientHello → random: needs 32 bytes at byte 2"):
        client_hello(b"\x03\x03" + b"\x00" * 10)
    with pytest.raises(HandshakeError, match=r"ServerHello → supported_versions: 3 bytes, not 2"):
        server_hello(b"\x03\x03" + b"\x00" * 32 + b"\x00" + b"\x13\x01" + b"\x00" + b"\x00\x07" + b"\x00\x2b\x00\x03\x03\x04\x00")


def test_reader_across_records_keeps_only_what_is_asked():
    finished = bytes([FINISHED]) + (32).to_bytes(3, "big") + b"f" * 32
    certificate = bytes([11]) + (3000).to_bytes(3, "big") + b"c" * 3000
    stream = certificate + finished
    for cut in (1, 3, 4, 5, 2000, 3004, 3005, 3010):
        reader = HandshakeReader(frozenset({FINISHED}))
        got = reader.feed(stream[:cut]) + reader.feed(stream[cut:])
        assert got == [(FINISHED, b"f" * 32)], cut
    reader = HandshakeReader(frozenset({FINISHED}))
    assert reader.feed(certificate) == [] and reader.feed(finished) == [(FINISHED, b"f" * 32)]
    huge = HandshakeReader(frozenset({FINISHED}))
    assert huge.feed(bytes([FINISHED]) + (1 << 20).to_bytes(3, "big")) == [] and huge.error
