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


def _allocated_per_call(calls) -> int:
    """The bytes each call allocated at its peak, summed: what a quadratic copy shows (n²/2 for
    n pieces) and a linear reader does not. Allocation, not time."""
    import tracemalloc
    total = 0
    tracemalloc.start()
    try:
        for call in calls:
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            call()
            total += tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return total


def test_a_message_in_one_byte_records_is_joined_once():
    """Issue 30: a kept message cut into n records was joined again at each (n²/2 bytes copied:
    64 ClientHellos in one-byte records ran past 25 s). Now each piece is held, and the message
    joined once, whether the pieces come one by one (feed) or in runs (take)."""
    from tests.hostile.inputs_tls import client_hello as build_hello
    hello = build_hello(bytes(range(32)), 20_000)
    reader = HandshakeReader(frozenset({CLIENT_HELLO}))
    got = []
    allocated = _allocated_per_call(lambda i=i: got.extend(reader.feed(hello[i:i + 1])) for i in range(len(hello)))
    assert got == [(CLIENT_HELLO, hello[4:])] and client_hello(got[0][1])["random"] == bytes(range(32))
    assert allocated < 200 * len(hello), allocated  # n²/2 would be 200 MB
    assert reader.held == 0 and reader.parts == []


def test_room_and_take_give_what_feed_gives():
    """The layer hands runs of small records over with take(), up to room(): the messages are
    those that feeding the pieces one by one gives, however the stream is cut."""
    rng = random.Random(21)
    finished = bytes([FINISHED]) + (48).to_bytes(3, "big") + b"f" * 48
    certificate = bytes([11]) + (3000).to_bytes(3, "big") + b"c" * 3000
    hello = bytes([CLIENT_HELLO]) + (600).to_bytes(3, "big") + bytes(range(256)) * 2 + b"h" * 88
    stream = hello + certificate + finished + bytes([0, 0, 0, 0]) + finished
    keep = frozenset({CLIENT_HELLO, FINISHED})
    expected = HandshakeReader(keep).feed(stream)
    assert [t for t, _ in expected] == [CLIENT_HELLO, FINISHED, FINISHED]
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randrange(1, 400)))
        pieces = [stream[a:b] for a, b in zip([0] + cuts, cuts + [len(stream)])]
        reader, got, i = HandshakeReader(keep), [], 0
        while i < len(pieces):
            room = reader.room()
            if not room or len(pieces[i]) > room:
                got += reader.feed(pieces[i])
                i += 1
                continue
            run, size = [], 0
            while i < len(pieces) and size + len(pieces[i]) <= room:
                run.append(pieces[i])
                size += len(pieces[i])
                i += 1
            reader.take(run, size)
        assert got == expected
        assert reader.held == 0 and reader.skip == 0


def test_the_largest_client_hello_is_kept_and_a_longer_one_refused():
    """MAX_MESSAGE is the largest ClientHello its fields allow (OpenSSL's CLIENT_HELLO_MAX_LENGTH):
    it is read, cut in pieces too; one byte more stops the reader, which then holds nothing."""
    from kinspect.tls.handshake import MAX_MESSAGE
    from tests.hostile.inputs_tls import client_hello as build_hello
    assert MAX_MESSAGE == 131396
    hello = build_hello(bytes(32), MAX_MESSAGE)
    reader = HandshakeReader(frozenset({CLIENT_HELLO}))
    got = [m for at in range(0, len(hello), 5000) for m in reader.feed(hello[at:at + 5000])]
    assert len(got) == 1 and client_hello(got[0][1])["cipher_suites"][:2] == b"\xc0\x2f"
    longer = HandshakeReader(frozenset({CLIENT_HELLO}))
    assert longer.feed(b"\x01" + (MAX_MESSAGE + 1).to_bytes(3, "big") + bytes(100)) == []
    assert longer.error == f"handshake message type 1 of {MAX_MESSAGE + 1} bytes (kept at most {MAX_MESSAGE})"
    assert longer.held == 0 and longer.room() == 0 and longer.feed(bytes(10)) == []


def test_hello_retry_random_is_the_sha256_of_its_name():
    import hashlib

    from kinspect.tls import handshake
    assert handshake.HELLO_RETRY_RANDOM == hashlib.sha256(b"HelloRetryRequest").digest()
