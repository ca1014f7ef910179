"""native/_tls.c's open_run against its Python twin (RecordKeys.open_run_py): on real TLS from
OpenSSL through the whole layer, and on record streams sealed here with every kind of record the
loop must stop at or pass over, cut at every byte and damaged."""

from __future__ import annotations

import random

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from kinspect import native
from kinspect.tls import KeyLog, keys
from kinspect.tls.keys import SUITES, RecordKeys
from kinspect.tls.records import MAX_FRAGMENT
from kinspect.tls.layer import TlsLayer
from tests.unit.tls.memtls import converse
from tests.unit.tls.test_layer import REQUESTS, _records_of, feed
from tests.unit.native import needs_c

SETTINGS = [("1.3", None), ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256"), ("1.2", "ECDHE-ECDSA-CHACHA20-POLY1305")]


def _events(wire, keyfile, fast: bool, monkeypatch, cut=None) -> list:
    monkeypatch.setattr(keys, "_native", native.tls if fast else None)
    return feed(TlsLayer(KeyLog.from_files([keyfile])), wire, cut=cut)


@pytest.mark.parametrize("version,cipher", SETTINGS)
def test_the_layer_gives_the_same_events_either_way(tmp_path, version, cipher, monkeypatch):
    keyfile = tmp_path / "keys.log"
    wire = converse(tmp_path, keyfile, REQUESTS * 3, version, cipher=cipher)
    rng = random.Random(7)
    damaged = list(wire)
    for i, pos, ctype, length in rng.sample([r for r in _records_of(wire, "server") if r[2] == 23][-6:], 2):
        buf = bytearray(damaged[i][1])
        buf[pos + 5 + length // 2] ^= 0x40
        damaged[i] = (damaged[i][0], bytes(buf))
    for case in (wire, damaged):
        for cut in (None, 1, 5, 6, 100, 1000):
            fast = _events(case, keyfile, True, monkeypatch, cut)
            assert fast == _events(case, keyfile, False, monkeypatch, cut)
            assert any(type(e) is not dict for e in fast)


def _sealer(mode: int, rng: random.Random):
    suite = {0: SUITES[0x1301], 1: SUITES[0xC02B], 2: SUITES[0xCCA9]}[mode]
    key = rng.randbytes(suite.key_size)
    iv = rng.randbytes(suite.iv_size)
    aead = (AESGCM if suite.aead == "aes-gcm" else ChaCha20Poly1305)(key)

    def seal(seq: int, content: bytes, ctype: int = 23, inner: int = 23, padding: int = 0,
             version: int = 0x0303) -> bytes:
        if mode == 0:
            body = content + bytes([inner]) + bytes(padding)
            header = bytes([ctype]) + version.to_bytes(2, "big") + (len(body) + 16).to_bytes(2, "big")
            nonce = (int.from_bytes(iv, "big") ^ seq).to_bytes(12, "big")
            return header + aead.encrypt(nonce, body, header)
        explicit = rng.randbytes(8) if mode == 1 else b""
        nonce = iv + explicit if mode == 1 else (int.from_bytes(iv, "big") ^ seq).to_bytes(12, "big")
        aad = seq.to_bytes(8, "big") + bytes([ctype]) + version.to_bytes(2, "big") + len(content).to_bytes(2, "big")
        fragment = explicit + aead.encrypt(nonce, content, aad)
        return bytes([ctype]) + version.to_bytes(2, "big") + len(fragment).to_bytes(2, "big") + fragment

    return suite, key, iv, seal


def _stream(mode: int, rng: random.Random) -> tuple:
    """Records of every kind, sealed at the sequence numbers a receiver would count."""
    suite, key, iv, seal = _sealer(mode, rng)
    out, seq = [], 0
    for _ in range(40):
        kind = rng.choice(["data"] * 6 + ["empty", "padded", "ccs", "handshake", "alert", "all-padding",
                                          "wrong-seq", "version", "plain-type", "big"])
        content = rng.randbytes(rng.choice([1, 7, 100, 1500]))
        if kind == "data":
            out.append(seal(seq, content))
        elif kind == "empty":
            out.append(seal(seq, b""))
        elif kind == "padded":
            out.append(seal(seq, content, padding=rng.choice([1, 30])))
        elif kind == "ccs":
            out.append(b"\x14\x03\x03\x00\x01\x01")
            continue
        elif kind == "handshake":
            out.append(seal(seq, b"\x04\x00\x00\x02ab", inner=22))
        elif kind == "alert":
            out.append(seal(seq, b"\x01\x00", inner=21))
        elif kind == "all-padding":
            out.append(seal(seq, b"", inner=0, padding=5))
        elif kind == "wrong-seq":
            out.append(seal(seq + 1, content))
        elif kind == "version":
            out.append(seal(seq, content, version=0x0301))
        elif kind == "plain-type":
            out.append(seal(seq, content, ctype=22))
        elif kind == "big":
            out.append(b"\x17\x03\x03\x48\x01" + rng.randbytes(0x4801))
        seq += 1
    return suite, key, iv, b"".join(out)


def _run(fn, suite, key, iv, seq, data):
    rk = RecordKeys(suite, key, iv)
    rk.seq = seq
    plain: list = []
    used, opened, other = fn(rk, data, plain)
    if other is not None:
        other = (other[0], bytes(other[1]), other[2], other[3])
    return used, opened, other, [bytes(p) for p in plain], rk.seq


def _fast(rk, data, plain):
    used, seq, other = native.tls.open_run(rk.decrypt, rk.mode, rk.iv, rk.seq, data, plain)
    opened, rk.seq = seq - rk.seq, seq
    return used, opened, other


@needs_c
@pytest.mark.parametrize("mode", [0, 1, 2])
def test_open_run_matches_its_twin_on_every_kind_of_record(mode):
    rng = random.Random(mode)
    for _ in range(6):
        suite, key, iv, data = _stream(mode, rng)
        pos, seq = 0, 0
        while pos < len(data):  # the whole stream, resumed where each run stops, as the layer does
            fast = _run(_fast, suite, key, iv, seq, data[pos:])
            assert fast == _run(RecordKeys.open_run_py, suite, key, iv, seq, data[pos:])
            used = fast[0]
            if not used:
                length = int.from_bytes(data[pos + 3:pos + 5], "big")
                used, seq = 5 + length, seq + (data[pos] != 0x14)  # past the record that stopped it
            else:
                seq = fast[4]
            pos += used
        for cut in rng.sample(range(len(data)), 40):  # unfinished records, bytes flipped
            assert _run(_fast, suite, key, iv, 0, data[:cut]) == _run(RecordKeys.open_run_py, suite, key, iv, 0,
                                                                    data[:cut])
            flipped = bytearray(data)
            flipped[cut] ^= 1 << rng.randrange(8)
            assert _run(_fast, suite, key, iv, 0, flipped) == _run(RecordKeys.open_run_py, suite, key, iv, 0,
                                                                 flipped)


@needs_c
def test_open_run_refuses_what_it_cannot_take():
    suite, key, iv, seal = _sealer(0, random.Random(1))
    rk = RecordKeys(suite, key, iv)
    with pytest.raises(ValueError):
        native.tls.open_run(rk.decrypt, 3, rk.iv, 0, b"", [])
    with pytest.raises(ValueError):
        native.tls.open_run(rk.decrypt, 0, rk.iv[:4], 0, b"", [])
    with pytest.raises(ValueError):
        native.tls.open_run(rk.decrypt, 0, rk.iv, 1 << 63, b"", [])
    with pytest.raises(TypeError):
        native.tls.open_run(rk.decrypt, 0, rk.iv, 0, seal(0, b"x"), [], 1)
    assert native.tls.open_run(rk.decrypt, 0, rk.iv, 0, memoryview(seal(0, b"kafka")), plain := []) == (27, 1, None)
    assert plain == [b"kafka"]
    rk.seq = 1 << 63  # past what the C loop counts: the twin takes it
    assert rk.open_run(b"", []) == (0, 0, None)


def _hellos(tmp_path) -> list[tuple[int, bytes]]:
    """The ClientHello and ServerHello bodies of real conversations (TLS 1.3 and 1.2, resumed too)."""
    from kinspect.tls.handshake import HandshakeReader
    bodies = []
    for version, cipher in SETTINGS:
        keyfile = tmp_path / f"keys-{version}-{cipher}.log"
        out: dict = {}
        first = converse(tmp_path, keyfile, REQUESTS, version, cipher=cipher, out=out)
        again = converse(tmp_path, keyfile, REQUESTS, version, cipher=cipher, session=out["session"],
                         contexts_used=out["contexts"])
        for wire in (first, again):
            for side, wanted in (("client", {1}), ("server", {2})):
                reader = HandshakeReader(frozenset(wanted))
                for i, pos, ctype, length in _records_of(wire, side):
                    if ctype == 22:
                        bodies += reader.feed(wire[i][1][pos + 5:pos + 5 + length])
    return bodies


@needs_c
def test_hello_extensions_match_their_twin(tmp_path):
    from kinspect.tls.handshake import hello_extensions_py, client_hello
    rng = random.Random(3)
    hellos = _hellos(tmp_path)
    assert sorted(t for t, _ in hellos) == [1] * 6 + [2] * 6
    assert all(client_hello(body)["server_name"] == "kafka.example" for t, body in hellos if t == 1)
    hellos = [body for _, body in hellos]
    for body in hellos:
        damaged = [body, body[:len(body) // 2]]
        for _ in range(30):
            flipped = bytearray(body)
            flipped[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
            damaged.append(bytes(flipped))
        for case in damaged:
            for pos in range(0, len(case) + 2):
                assert native.tls.hello_extensions(case, pos, len(case)) == hello_extensions_py(case, pos, len(case))
    with pytest.raises(ValueError):
        native.tls.hello_extensions(b"\x00\x00", 0, 3)


def _framed(fn, data, base):
    records, pos, bad = fn(data, base, MAX_FRAGMENT)
    return [(t, v, bytes(f), o) for t, v, f, o in records], pos, bad


@needs_c
def test_frame_matches_its_twin(tmp_path):
    from kinspect.tls.records import frame_py
    rng = random.Random(11)
    streams = []
    for version, cipher in SETTINGS:
        wire = converse(tmp_path, tmp_path / f"k-{version}-{cipher}.log", REQUESTS, version, cipher=cipher)
        for side in ("client", "server"):
            streams.append(b"".join(data for s, data in wire if s == side))
            assert _framed(native.tls.frame, streams[-1], 0)[1:] == (len(streams[-1]), -1)  # every record whole
    streams += [rng.randbytes(3000), b"\x17\x03\x03\x40\x01" + bytes(20), b"\x16\x03\x01\x00", b""]
    good = b"\x17\x03\x03\x00\x02ab"
    for ctype in range(256):  # every type, major version and length edge after a good record
        streams.append(good + bytes([ctype, 3, 3, 0, 1, 0]) + good)
    for major in (2, 3, 4):
        for length in (0, MAX_FRAGMENT, MAX_FRAGMENT + 1, 0xFFFF):
            streams.append(good + bytes([23, major, 1]) + length.to_bytes(2, "big") + bytes(min(length, 40)))
    for stream in streams:
        cases = [stream] + [stream[:rng.randrange(len(stream) + 1)] for _ in range(20)]
        for _ in range(20):
            flipped = bytearray(stream or b"\x00")
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            cases.append(bytes(flipped))
        for case in cases:
            for start in (0, 1, 5):
                base = rng.randrange(1 << 40)
                fast = _framed(native.tls.frame, memoryview(case)[start:], base)
                assert fast == _framed(frame_py, memoryview(case)[start:], base)


def _keylog_state(text: bytes, fast: bool, monkeypatch, first_line: int = 1) -> tuple:
    from kinspect.tls import keylog
    monkeypatch.setattr(keylog, "_native", native.tls if fast else None)
    log = KeyLog()
    added = log.add_text(text, "k.log", first_line)
    return (added, log._runs, list(log.items()), log.lines, log.unused, log.bad_lines, log.first_bad)


def _scans(text: bytes, first_line: int, room: int = 1 << 20) -> tuple:
    from kinspect.tls.keylines import UNUSED_BYTES, USED_BYTES, keylog_scan_py
    args = (text, 1000, first_line, 5, 1024, USED_BYTES, UNUSED_BYTES, room)
    return native.tls.keylog_scan(*args), keylog_scan_py(*args)


@needs_c
def test_keylog_scan_and_merge_match_their_twins(tmp_path, monkeypatch):
    from kinspect.tls import keylines
    rng = random.Random(13)
    real = b""
    for version, cipher in SETTINGS:
        keyfile = tmp_path / f"k-{version}-{cipher}.log"
        converse(tmp_path, keyfile, REQUESTS, version, cipher=cipher)
        real += keyfile.read_bytes()
    lines = real.splitlines()
    assert len(lines) >= 7 and _keylog_state(real, True, monkeypatch)[3] >= 6
    random_hex = rng.randbytes(32).hex().encode()
    odd = [b"# a comment", b"", b"   ", b"\t", b"  # indented comment with four fields",
           b"CLIENT_RANDOM " + random_hex.upper() + b" " + rng.randbytes(48).hex().encode(),
           b"CLIENT_RANDOM\t" + random_hex + b"\x0b" + rng.randbytes(48).hex().encode() + b"  ",
           b"CLIENT_RANDOM " + random_hex + b" " + rng.randbytes(48).hex().encode()[:-1],
           b"CLIENT_RANDOM " + random_hex[:-2] + b" " + rng.randbytes(48).hex().encode(),
           b"CLIENT_RANDOM " + random_hex + b" " + rng.randbytes(48).hex().encode() + b" extra",
           b"CLIENT_RANDOM " + random_hex + b" " + rng.randbytes(70).hex().encode(),
           b"CLIENT_RANDOM " + random_hex + b" " + rng.randbytes(31).hex().encode(),
           b"CLIENT_RANDOM " + random_hex.replace(b"a", b"g") + b" " + rng.randbytes(48).hex().encode(),
           b"EXPORTER_SECRET " + random_hex + b" " + rng.randbytes(32).hex().encode(),
           b"EXPORTER_SECRET " + random_hex + b" zz", b"EXPORTER_SECRET ab cd", b"EXPORTER_SECRET abc cd",
           b"RSA " + rng.randbytes(8).hex().encode() + b" " + rng.randbytes(48).hex().encode(),
           b"NOT_A_LABEL " + random_hex + b" " + rng.randbytes(32).hex().encode(),
           b"CLIENT_RANDOM " + b" " * 1000 + random_hex + b" " + rng.randbytes(48).hex().encode(),
           b"\xff\xfe garbage \x00", bytes(rng.randrange(256) for _ in range(300))]
    texts = [real, real.replace(b"\n", b"\r\n"), real.replace(b"\n", b"\r"), real + b"no newline at the end", b""]
    for _ in range(30):
        mixed = lines + odd
        rng.shuffle(mixed)
        texts.append(rng.choice([b"\n", b"\r\n", b"\r"]).join(mixed[:rng.randrange(1, len(mixed) + 1)]))
        cut = bytearray(real)
        cut[rng.randrange(len(cut))] ^= 1 << rng.randrange(8)
        texts.append(bytes(cut[:rng.randrange(len(cut) + 1)]))
    for text in texts:
        for first_line in (1, 41):
            fast, slow = _scans(text, first_line)
            assert fast == slow
            assert _keylog_state(text, True, monkeypatch, first_line) == _keylog_state(text, False, monkeypatch,
                                                                                       first_line)
        fast, slow = _scans(text, 1, room=3)  # past room: counted in dropped
        assert fast == slow and fast[2] <= 3
    runs = [_scans(text, 1)[0][0] for text in texts[:12]]
    for a, b in zip(runs, runs[1:]):
        b = bytes(b[i] ^ (i % 16 == 15) for i in range(len(b)))  # other positions: no entry in both
        assert native.tls.keylog_merge(a, b) == keylines.keylog_merge_py(a, b)
        assert native.tls.keylog_merge(a, b"") == a == keylines.keylog_merge_py(a, b"")
    with pytest.raises(ValueError):
        native.tls.keylog_merge(b"x" * 15, b"")
    with pytest.raises(ValueError):
        native.tls.keylog_scan(b"", 0, 1, 1 << 24, 1024, (), (), 1)


@needs_c
def test_keylog_keys_match_their_twin():
    from kinspect.tls.keylines import UNUSED_BYTES, USED_BYTES, random_key
    rng = random.Random(17)
    for _ in range(200):
        client_random = rng.randbytes(32)
        line = b"CLIENT_RANDOM " + client_random.hex().encode() + b" " + rng.randbytes(48).hex().encode()
        entries = native.tls.keylog_scan(line, 0, 1, 0, 1024, USED_BYTES, UNUSED_BYTES, 1)[0]
        assert memoryview(entries).cast("Q")[0] == random_key(client_random)
