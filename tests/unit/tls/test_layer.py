"""layer.py with real TLS from OpenSSL (memtls.py): plaintext out per direction, notices for
damage and missing keys, plaintext connections passed through untouched."""

from __future__ import annotations

import pytest

from kinspect.capture.stream import StreamData, StreamEnd, StreamGap
from kinspect.tls import KeyLog
from kinspect.tls.layer import TlsLayer
from tests.unit.tls.memtls import converse

CLIENT = (b"\x0a\x00\x00\x01", 50000, b"\x0a\x00\x00\x02", 9093)
SERVER = (CLIENT[2], CLIENT[3], CLIENT[0], CLIENT[1])
REQUESTS = [("client", b"request-%d " % i * 300) for i in range(3)] + [("server", b"response " * 2000)]


def flows(n: int):
    client = (CLIENT[0], CLIENT[1] + n, CLIENT[2], CLIENT[3])
    return client, (client[2], client[3], client[0], client[1])


def feed(layer: TlsLayer, wire, n: int = 0, cut: int | None = None, ts: float = 1.0) -> list:
    """One connection's wire bytes through the layer (each chunk cut in two at ``cut``)."""
    client, server = flows(n)
    out: list = []
    for flow in (client, server):
        layer.start(flow)
    for side, data in wire:
        flow = client if side == "client" else server
        pieces = [data] if cut is None or cut >= len(data) else [data[:cut], data[cut:]]
        for piece in pieces:
            out += layer.data(flow, ts, piece)
    out += layer.end(client, ts, "fin")
    out += layer.end(server, ts, "fin")
    return out


def plaintext(events, flow) -> bytes:
    return b"".join(e.data for e in events if type(e) is StreamData and e.flow == flow)


def notices(events, kind=None):
    return [e for e in events if type(e) is dict and (kind is None or e["kind"] == kind)]


def assert_all_decrypted(events, n: int = 0) -> None:
    """Connection ``n``'s REQUESTS came out whole on both sides, with no notice."""
    client, server = flows(n)
    assert notices(events) == []
    assert plaintext(events, client) == b"".join(t for s, t in REQUESTS if s == "client")
    assert plaintext(events, server) == b"".join(t for s, t in REQUESTS if s == "server")


@pytest.fixture
def keyfile(tmp_path):
    return tmp_path / "keys.log"


@pytest.mark.parametrize("version,cipher", [("1.3", None), ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256"),
                                            ("1.2", "ECDHE-ECDSA-CHACHA20-POLY1305")])
@pytest.mark.parametrize("cut", [None, 1, 5, 6, 333])
def test_plaintext_comes_out(tmp_path, keyfile, version, cipher, cut):
    wire = converse(tmp_path, keyfile, REQUESTS, version, cipher)
    layer = TlsLayer(KeyLog.from_files([keyfile]))
    events = feed(layer, wire, cut=cut)
    assert_all_decrypted(events)
    assert [type(e) for e in events][-2:] == [StreamEnd, StreamEnd]
    assert layer.marks[f"10.0.0.1:{50000}-10.0.0.2:9093"]["version"] == f"TLS {version}"
    assert layer.watch == {} and (layer.connections, layer.decrypted) == (1, 1)


def test_missing_keys_give_one_notice_per_connection(tmp_path, keyfile):
    first = converse(tmp_path, keyfile, REQUESTS, "1.3", server_name="broker-1.example")
    keys = keyfile.read_text()
    keyfile.write_text("")
    second = converse(tmp_path, keyfile, REQUESTS, "1.2", "ECDHE-ECDSA-AES256-GCM-SHA384")
    layer = TlsLayer(KeyLog.from_text(keys))  # the first connection's keys only
    events = feed(layer, first, 0) + feed(layer, second, 1)
    assert notices(events) == notices(events, "tls_no_keys")
    [missing] = notices(events)
    assert missing["conn"] == "10.0.0.1:50001-10.0.0.2:9093"
    assert missing["tls_version"] == "TLS 1.2" and missing["cipher"] == "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
    assert missing["server_name"] == "kafka.example"
    assert missing["bytes"] == sum(len(d) for _, d in second)
    assert "--keylog" in missing["what"]
    assert plaintext(events, flows(0)[0]) == b"".join(t for s, t in REQUESTS if s == "client")
    assert plaintext(events, flows(1)[0]) == b""
    assert (layer.decrypted, layer.undecrypted) == (1, 1)


def test_without_any_key_log_every_connection_is_reported_once(tmp_path, keyfile):
    layer = TlsLayer()
    events = []
    for n in range(3):
        events += feed(layer, converse(tmp_path, keyfile, REQUESTS, "1.3", server_name=f"b{n}.example"), n)
    assert [(e["kind"], e["server_name"]) for e in notices(events)] == [
        ("tls_no_keys", f"b{n}.example") for n in range(3)]
    assert all(e["tls_version"] == "TLS 1.3" for e in notices(events))


def _flip_in_application_record(wire, side: str, nth: int):
    """The wire with one bit flipped inside the ``nth`` application data record that ``side`` sent
    after the handshake (its last record of the handshake flight is the Finished)."""
    damaged = list(wire)
    seen = 0
    for i, (s, data) in enumerate(wire):
        if s != side or i < 4:
            continue
        pos = 0
        while pos + 5 <= len(data):
            length = int.from_bytes(data[pos + 3:pos + 5], "big")
            if data[pos] == 23:
                if seen == nth:
                    buf = bytearray(data)
                    buf[pos + 5 + length // 2] ^= 0x10
                    damaged[i] = (s, bytes(buf))
                    return damaged, length
                seen += 1
            pos += 5 + length
    raise AssertionError("no such record")


@pytest.mark.parametrize("version,cipher", [("1.3", None), ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")])
def test_a_flipped_byte_is_one_notice_and_the_rest_still_opens(tmp_path, keyfile, version, cipher):
    messages = [("client", b"A" * 100), ("client", b"B" * 100), ("client", b"C" * 100), ("server", b"D" * 50)]
    wire = converse(tmp_path, keyfile, messages, version, cipher)
    damaged, _ = _flip_in_application_record(wire, "client", 1 if version == "1.3" else 0)
    layer = TlsLayer(KeyLog.from_files([keyfile]))
    events = feed(layer, damaged, 0) + feed(layer, wire, 1)  # the next connection is whole
    [auth] = notices(events)
    assert auth["kind"] == "tls_auth" and auth["side"] == "client" and auth["conn"].endswith("-10.0.0.2:9093")
    assert auth["offset"] > 0 and "authentication tag" in auth["what"]
    client = flows(0)[0]
    gaps = [e for e in events if type(e) is StreamGap and e.flow == client]
    assert len(gaps) == 1
    got = plaintext(events, client)
    lost = b"B" if version == "1.3" else b"A"
    assert got == b"".join(t for s, t in messages if s == "client" and not t.startswith(lost))
    assert plaintext(events, flows(0)[1]) == b"D" * 50
    assert plaintext(events, flows(1)[0]) == b"A" * 100 + b"B" * 100 + b"C" * 100


@pytest.mark.parametrize("version,cipher", [("1.3", None), ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")])
def test_many_damaged_records_are_folded_into_a_count(tmp_path, keyfile, version, cipher):
    """Issue 30: every record that does not open was a notice (an 11 MB capture gave 54 MB of
    them). A connection shows the first NOTICES_SHOWN; one more notice at its close counts the
    rest. Each damaged record is still a gap for the session, and every other record opens."""
    shown = 10  # tls/layer.py NOTICES_SHOWN, as the README says
    messages = [("client", b"%05d" % i * 20) for i in range(60)] + [("server", b"reply")]
    wire = converse(tmp_path, keyfile, messages, version, cipher)
    client_records = [r for r in _records_of(wire, "client") if r[2] == 23][-60:]
    damaged = wire
    for at in client_records[1::2]:  # every other one: none twice in a row
        damaged = _flipped(damaged, at)
    events = feed(TlsLayer(KeyLog.from_files([keyfile])), damaged)
    auth = notices(events, "tls_auth")
    assert len(auth) == shown + 1 and [n for n in notices(events) if n["kind"] != "tls_auth"] == []
    assert all("more" not in n for n in auth[:-1]) and auth[-1]["more"] == 30 - shown
    assert auth[-1]["what"].startswith(f"{30 - shown} more tls_auth notices on this connection")
    client = flows(0)[0]
    assert len([e for e in events if type(e) is StreamGap and e.flow == client]) == 30
    assert plaintext(events, client) == b"".join(t for s, t in messages[0:60:2])
    assert plaintext(events, flows(0)[1]) == b"reply"


def test_a_client_hello_in_one_byte_records_is_read_at_once(tmp_path, keyfile, monkeypatch):
    """Records that only continue a handshake message reach the reader together (take), not
    one call each: a ClientHello in one-byte records costs the reader a few calls."""
    from kinspect.tls.handshake import HandshakeReader
    wire = converse(tmp_path, keyfile, REQUESTS, "1.3")
    side, first = wire[0]
    assert side == "client" and first[0] == 22 and first[5] == 1
    length = 5 + int.from_bytes(first[3:5], "big")
    hello = first[5:length]
    one_byte = b"".join(b"\x16\x03\x01\x00\x01" + hello[i:i + 1] for i in range(len(hello)))
    changed = [("client", one_byte + first[length:])] + wire[1:]
    calls = []
    real_feed, real_take = HandshakeReader.feed, HandshakeReader.take
    monkeypatch.setattr(HandshakeReader, "feed", lambda self, data: calls.append(len(data)) or real_feed(self, data))
    monkeypatch.setattr(HandshakeReader, "take", lambda self, pieces, size: calls.append(size) or
                        real_take(self, pieces, size))
    assert_all_decrypted(feed(TlsLayer(KeyLog.from_files([keyfile])), changed))
    assert len(hello) > 200 and len(calls) < 12, calls


def test_bytes_counted_are_those_seen_however_the_stream_is_cut(tmp_path, keyfile):
    """A connection's bytes (in its notices) are the TLS bytes seen: the same fed whole or in
    pieces, even when a direction stops at a header that cannot be a record."""
    wire = converse(tmp_path, keyfile, REQUESTS, "1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
    broken = wire[:5] + [("client", b"\x63\x03\x03\x00\x02xy" + wire[5][1])] + wire[5:]
    for conversation in (wire, broken):
        counted = []
        for cut in (None, 1, 5, 333):
            events = feed(TlsLayer(KeyLog()), conversation, cut=cut)
            [missing] = notices(events, "tls_no_keys")
            counted.append(missing["bytes"])
            assert missing["bytes"] == sum(len(d) for _, d in conversation)
            if conversation is broken:
                [stopped] = notices(events, "tls_stopped")
                assert stopped["offset"] == sum(len(d) for s, d in wire[:5] if s == "client")
        assert len(set(counted)) == 1


def _records_of(wire, side: str):
    """(chunk index, position, content type, length) of every record ``side`` sent."""
    out = []
    for i, (s, data) in enumerate(wire):
        pos = 0
        while s == side and pos + 5 <= len(data):
            length = int.from_bytes(data[pos + 3:pos + 5], "big")
            out.append((i, pos, data[pos], length))
            pos += 5 + length
    return out


def _flipped(wire, at):
    i, pos, _, length = at
    buf = bytearray(wire[i][1])
    buf[pos + 5 + length // 2] ^= 0x10
    damaged = list(wire)
    damaged[i] = (wire[i][0], bytes(buf))
    return damaged


def test_tls13_first_application_record_damaged_goes_the_long_way(tmp_path, keyfile):
    """TLS 1.3: the application keys are tried before the handshake keys are made (layer._trial).
    When the client's first application record is damaged, none of its later records opens at
    sequence number 0 either: they are held, and when the connection ends they are opened the
    long way (handshake keys, Finished, application keys): one tls_auth notice, the rest out."""
    messages = [("client", b"A" * 100), ("client", b"B" * 100), ("client", b"C" * 100), ("server", b"D" * 50)]
    wire = converse(tmp_path, keyfile, messages, "1.3")
    client_records = [r for r in _records_of(wire, "client") if r[2] == 23]
    first_app = client_records[1]  # after the Finished
    layer = TlsLayer(KeyLog.from_files([keyfile]))
    events = feed(layer, _flipped(wire, first_app))
    [auth] = notices(events)
    assert auth["kind"] == "tls_auth" and auth["side"] == "client" and "authentication tag" in auth["what"]
    assert plaintext(events, flows(0)[0]) == b"B" * 100 + b"C" * 100
    assert plaintext(events, flows(0)[1]) == b"D" * 50
    client_events = [e for e in events if getattr(e, "flow", None) == flows(0)[0]]
    assert type(client_events[-1]) is StreamEnd  # the held records came out before the end


def test_tls13_damaged_handshake_record_costs_nothing(tmp_path, keyfile):
    """A bit flipped in the server's Certificate record: kinspect never opens the handshake
    flight when the application keys open the record after it, so nothing is lost (nor
    reported: the flight holds nothing kinspect needs)."""
    wire = converse(tmp_path, keyfile, REQUESTS, "1.3")
    server_records = [r for r in _records_of(wire, "server") if r[2] == 23]
    certificate = max(server_records[:4], key=lambda r: r[3])  # the flight's largest: the chain
    layer = TlsLayer(KeyLog.from_files([keyfile]))
    events = feed(layer, _flipped(wire, certificate))
    assert notices(events) == []
    client, server = flows(0)
    assert plaintext(events, client) == b"".join(t for s, t in REQUESTS if s == "client")
    assert plaintext(events, server) == b"".join(t for s, t in REQUESTS if s == "server")


def test_tls13_records_that_never_open_are_held_only_so_long(tmp_path, keyfile):
    """Damage right at the start of the application data and a long stream after it: past
    MAX_TRIAL held records the long way starts without waiting for the end, so a live capture
    is not held back."""
    from kinspect.tls.layer import MAX_TRIAL
    messages = [("client", b"%03d" % i * 10) for i in range(MAX_TRIAL + 4)]
    wire = converse(tmp_path, keyfile, messages, "1.3")
    first_app = [r for r in _records_of(wire, "client") if r[2] == 23][1]
    layer = TlsLayer(KeyLog.from_files([keyfile]))
    client, server = flows(0)
    layer.start(client)
    layer.start(server)
    events: list = []
    for side, data in _flipped(wire, first_app):
        events += layer.data(client if side == "client" else server, 1.0, data)
    assert [n["kind"] for n in notices(events)] == ["tls_auth"]  # before any end
    assert plaintext(events, client) == b"".join(t for _, t in messages[1:])


def test_a_gap_stops_that_direction_only(tmp_path, keyfile):
    messages = [("client", b"A" * 100), ("server", b"B" * 100), ("client", b"C" * 100), ("server", b"D" * 100)]
    wire = converse(tmp_path, keyfile, messages, "1.3")
    layer = TlsLayer(KeyLog.from_files([keyfile]))
    client, server = flows(0)
    events = []
    for flow in (client, server):
        layer.start(flow)
    app = [w for w in wire[4:]]
    for side, data in wire[:4] + app[:2]:
        events += layer.data(client if side == "client" else server, 1.0, data)
    events += layer.gap(client, 1.0, 77)
    for side, data in app[2:]:
        events += layer.data(client if side == "client" else server, 1.0, data)
    [gap] = notices(events)
    assert gap["kind"] == "tls_gap" and gap["side"] == "client" and gap["missing"] == 77
    assert plaintext(events, client) == b"A" * 100
    assert plaintext(events, server) == b"B" * 100 + b"D" * 100
    assert StreamGap(client, 1.0, 77) in events


def test_plaintext_connections_pass_untouched():
    layer = TlsLayer()
    client, server = flows(0)
    layer.start(client)
    layer.start(server)
    request = b"\x00\x00\x00\x10\x00\x12\x00\x03\x00\x00\x00\x01" + b"x" * 8
    assert layer.data(client, 1.0, request) == [StreamData(client, 1.0, request)]
    assert client not in layer.watch  # decided: later bytes never reach the layer
    assert layer.data(server, 1.0, b"\x16") == []  # one byte that may start a record: held
    assert layer.data(server, 1.0, b"\x00\x00\x00") == [StreamData(server, 1.0, b"\x16\x00\x00\x00")]
    assert layer.connections == 0 and layer.watch == {}


def test_tls_without_its_handshake_is_named_once(tmp_path, keyfile):
    wire = converse(tmp_path, keyfile, REQUESTS, "1.3")
    layer = TlsLayer(KeyLog.from_files([keyfile]))
    events = feed(layer, wire[4:])  # the capture began after the handshake
    [blind] = notices(events)
    assert blind["kind"] == "tls_no_handshake"
    assert not [e for e in events if type(e) is StreamData]


def test_keys_that_come_later_are_used_while_patient(tmp_path, keyfile):
    """A live capture: the key-log line is written after the first protected records arrive."""
    wire = converse(tmp_path, keyfile, REQUESTS, "1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
    keys = keyfile.read_bytes()
    empty = KeyLog()
    written = []  # the client has written its key-log line

    def more_keys():
        return empty.add_text(keys) if written and not len(empty) else 0

    layer = TlsLayer(empty, more_keys=more_keys, patience=5.0)
    client, server = flows(0)
    events = []
    for flow in (client, server):
        layer.start(flow)
    for side, data in wire:
        events += layer.data(client if side == "client" else server, 1.0, data)
    assert plaintext(events, client) == b""
    assert layer.tick(1.5) == []  # still waiting
    written.append(True)
    events += layer.tick(2.0)
    assert plaintext(events, client) == b"".join(t for s, t in REQUESTS if s == "client")
    assert plaintext(events, server) == b"".join(t for s, t in REQUESTS if s == "server")
    assert notices(events) == []


def test_keys_that_never_come_end_in_one_notice(tmp_path, keyfile):
    wire = converse(tmp_path, keyfile, REQUESTS, "1.3")
    layer = TlsLayer(KeyLog(), patience=5.0)
    client, server = flows(0)
    events = []
    for flow in (client, server):
        layer.start(flow)
    for side, data in wire:
        events += layer.data(client if side == "client" else server, 1.0, data)
    events += layer.tick(7.0)
    assert layer.waiting == {}
    events += layer.end(client, 8.0, "fin") + layer.end(server, 8.0, "fin")
    assert [n["kind"] for n in notices(events)] == ["tls_no_keys"]


def _expand_label(secret: bytes, label: bytes, length: int) -> bytes:
    """HKDF-Expand-Label written out with the standard library (SHA-384), apart from keys.py."""
    import hashlib
    import hmac
    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + b"\x00"
    out, block, i = b"", b"", 1
    while len(out) < length:
        block = hmac.new(secret, block + info + bytes([i]), hashlib.sha384).digest()
        out += block
        i += 1
    return out[:length]


def _seal(secret: bytes, seq: int, inner: bytes) -> bytes:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    key, iv = _expand_label(secret, b"key", 32), _expand_label(secret, b"iv", 12)
    nonce = (int.from_bytes(iv, "big") ^ seq).to_bytes(12, "big")
    header = b"\x17\x03\x03" + (len(inner) + 16).to_bytes(2, "big")
    return header + AESGCM(key).encrypt(nonce, inner, header)


def test_key_update_moves_the_direction_to_the_next_secret(tmp_path, keyfile):
    """OpenSSL's KeyUpdate is not reachable from Python: after a real TLS 1.3 conversation the
    client's next records are sealed here, a KeyUpdate under application secret 0, then data
    under secret 1 (and a NewSessionTicket-like padding record is not needed)."""
    wire = converse(tmp_path, keyfile, [("client", b"A" * 10)], "1.3")
    keys = KeyLog.from_files([keyfile])
    [(_, entry)] = keys.items()
    secret0 = entry["CLIENT_TRAFFIC_SECRET_0"]
    assert len(secret0) == 48  # OpenSSL's first choice, TLS_AES_256_GCM_SHA384
    secret1 = _expand_label(secret0, b"traffic upd", 48)
    key_update = _seal(secret0, 1, b"\x18\x00\x00\x01\x00" + b"\x16")  # KeyUpdate(update_not_requested)
    after = _seal(secret1, 0, b"after the update" + b"\x17" + b"\x00" * 7)
    layer = TlsLayer(keys)
    events = feed(layer, wire + [("client", key_update + after)])
    assert notices(events) == []
    assert plaintext(events, flows(0)[0]) == b"A" * 10 + b"after the update"


@pytest.mark.parametrize("version,cipher", [("1.3", None), ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")])
def test_a_resumed_session_decrypts(tmp_path, keyfile, version, cipher):
    """Session resumption: TLS 1.2's abbreviated handshake (ticket; the server's ChangeCipherSpec
    comes first) and TLS 1.3 PSK: the key log has the resumed connection's own lines."""
    first: dict = {}
    converse(tmp_path, keyfile, REQUESTS, version, cipher, out=first)
    again: dict = {}
    wire = converse(tmp_path, keyfile, REQUESTS, version, cipher, session=first["session"],
                    contexts_used=first["contexts"], out=again)
    assert again["resumed"]
    layer = TlsLayer(KeyLog.from_files([keyfile]))
    events = feed(layer, wire)
    assert notices(events) == []
    assert plaintext(events, flows(0)[0]) == b"".join(t for s, t in REQUESTS if s == "client")
    assert plaintext(events, flows(0)[1]) == b"".join(t for s, t in REQUESTS if s == "server")


def test_tls13_a_flight_in_records_of_their_own_costs_no_failed_try(tmp_path, keyfile, monkeypatch):
    """OpenSSL's server sends EncryptedExtensions, Certificate, CertificateVerify and Finished in
    records of their own. None is tried under the application keys: the Certificate follows a
    first protected record too small to hold EncryptedExtensions and Finished, the
    CertificateVerify and Finished follow records that cannot have ended the flight, and the
    NewSessionTicket after the Finished-sized record opens at the first try."""
    from kinspect.tls.keys import RecordKeys
    wire = converse(tmp_path, keyfile, REQUESTS, "1.3")
    flight = [r[3] for r in _records_of(wire, "server") if r[2] == 23][:4]
    assert flight[0] < 64 and flight[1] > 300 and flight[3] == 4 + 48 + 1 + 16  # SHA-384's Finished
    failed = []
    real = RecordKeys.open_inner

    def counting(self, ctype, version, fragment):
        try:
            return real(self, ctype, version, fragment)
        except Exception:
            failed.append(len(fragment))
            raise

    monkeypatch.setattr(RecordKeys, "open_inner", counting)
    events = feed(TlsLayer(KeyLog.from_files([keyfile])), wire)
    assert_all_decrypted(events)
    assert failed == []


def test_tls13_a_padded_finished_still_gives_everything(tmp_path, keyfile):
    """A server that pads its Finished: the record after it is not tried at once (its size says
    nothing), nor those after it until TRY_ALL are held; none of them opens at sequence number
    0 then, so the held records go the long way when the connection ends, and every byte
    comes out, with no notice."""
    from kinspect.tls.keys import SUITES, tls13_keys
    wire = converse(tmp_path, keyfile, REQUESTS, "1.3")
    [(_, entry)] = KeyLog.from_files([keyfile]).items()
    secret = entry["SERVER_HANDSHAKE_TRAFFIC_SECRET"]
    i, pos, _, length = [r for r in _records_of(wire, "server") if r[2] == 23][3]  # the Finished
    chunk = wire[i][1]
    record = chunk[pos:pos + 5 + length]
    keys = tls13_keys(SUITES[0x1302], secret)
    keys.seq = 3  # EncryptedExtensions, Certificate, CertificateVerify came first
    inner, content = keys.open_inner(23, 0x0303, record[5:])
    assert inner == 22 and content[0] == 20  # a Finished message
    padded = _seal(secret, 3, bytes(content) + b"\x16" + b"\x00" * 9)
    damaged = list(wire)
    damaged[i] = (wire[i][0], chunk[:pos] + padded + chunk[pos + 5 + length:])
    events = feed(TlsLayer(KeyLog.from_files([keyfile])), damaged)
    assert_all_decrypted(events)


def test_tls13_a_flight_in_one_record_is_tried_and_costs_nothing(tmp_path, keyfile, monkeypatch):
    """A server that sends EncryptedExtensions, Certificate, CertificateVerify and Finished in
    one record (as some stacks do): the record after it may be the first under the application
    keys, so it is tried, and it opens; the handshake keys are never made."""
    from kinspect.tls import layer as tls_layer
    from kinspect.tls.keys import SUITES, tls13_keys
    wire = converse(tmp_path, keyfile, REQUESTS, "1.3")
    [(_, entry)] = KeyLog.from_files([keyfile]).items()
    secret = entry["SERVER_HANDSHAKE_TRAFFIC_SECRET"]
    flight = [r for r in _records_of(wire, "server") if r[2] == 23][:4]
    assert len({i for i, *_ in flight}) == 1  # one chunk of the conversation holds the four records
    i = flight[0][0]
    chunk = wire[i][1]
    keys = tls13_keys(SUITES[0x1302], secret)
    messages = b""
    for _, pos, _, length in flight:
        inner, content = keys.open_inner(23, 0x0303, chunk[pos + 5:pos + 5 + length])
        assert inner == 22
        messages += bytes(content)
    first, last = flight[0][1], flight[-1][1] + 5 + flight[-1][3]
    merged = list(wire)
    merged[i] = (wire[i][0], chunk[:first] + _seal(secret, 0, messages + b"\x16") + chunk[last:])
    made = []
    real = tls_layer.tls13_keys
    monkeypatch.setattr(tls_layer, "tls13_keys", lambda suite, s: made.append(s) or real(suite, s))
    events = feed(TlsLayer(KeyLog.from_files([keyfile])), merged)
    assert_all_decrypted(events)
    assert secret not in made and entry["CLIENT_HANDSHAKE_TRAFFIC_SECRET"] not in made


@pytest.mark.parametrize("size", [1, 7, 100, 1000])
def test_tls12_handshake_after_the_server_hello_is_not_read(tmp_path, keyfile, monkeypatch, size):
    """TLS 1.2: past the ServerHello, the plaintext handshake (Certificate to ClientKeyExchange)
    holds nothing kinspect needs, so its records are not read: the handshake reader sees the
    records up to the end of the two hellos and the two Finished. The server's first flight is
    framed again here in records of ``size`` bytes, so messages are cut across records, and one
    is cut off by the ChangeCipherSpec; the Finished after it still opens."""
    from kinspect.tls.handshake import HandshakeReader
    wire = converse(tmp_path, keyfile, REQUESTS, "1.2", cipher="ECDHE-ECDSA-AES128-GCM-SHA256")
    records = _records_of(wire, "server")
    i = records[0][0]
    flight = [r for r in records if r[0] == i and r[2] == 22]  # ServerHello ... ServerHelloDone
    chunk = wire[i][1]
    messages = b"".join(chunk[pos + 5:pos + 5 + length] for _, pos, _, length in flight)
    assert messages[0] == 2
    hello = 4 + int.from_bytes(messages[1:4], "big")
    messages += b"\x0e\x00\x00\x10" + b"\x00" * 3  # the head of a message the CCS cuts off
    reframed = b"".join(b"\x16\x03\x03" + len(piece).to_bytes(2, "big") + piece
                        for piece in (messages[k:k + size] for k in range(0, len(messages), size)))
    first, last = flight[0][1], flight[-1][1] + 5 + flight[-1][3]
    changed = list(wire)
    changed[i] = (wire[i][0], chunk[:first] + reframed + chunk[last:])
    fed = []  # per record the reader got: the messages it gave
    real, real_take = HandshakeReader.feed, HandshakeReader.take

    def reading(self, data):
        messages = real(self, data)
        fed.append([msg_type for msg_type, _ in messages])
        return messages

    def taking(self, pieces, size):  # records that only continue a message, given at once
        fed.extend([] for _ in pieces)
        return real_take(self, pieces, size)

    monkeypatch.setattr(HandshakeReader, "feed", reading)
    monkeypatch.setattr(HandshakeReader, "take", taking)
    events = feed(TlsLayer(KeyLog.from_files([keyfile])), changed)
    assert_all_decrypted(events)
    assert len(fed) == 1 + -(-hello // size) + 2  # ClientHello, the ServerHello's records, two Finished
    assert sorted(t for types in fed for t in types) == [1, 2, 20, 20]
