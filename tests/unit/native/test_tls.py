"""native/_tls.c's open_run against its Python twin (RecordKeys._open_run): on real TLS from
OpenSSL through the whole layer, and on record streams sealed here with every kind of record the
loop must stop at or pass over, cut at every byte and damaged."""

from __future__ import annotations

import random

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from kinspect import native
from kinspect.tls import KeyLog, keys
from kinspect.tls.keys import SUITES, RecordKeys
from kinspect.tls.layer import TlsLayer
from tests.unit.tls.memtls import converse
from tests.unit.tls.test_layer import REQUESTS, _records_of, feed

pytestmark = pytest.mark.skipif(native.tls is None, reason="the C accelerator is not built")

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


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_open_run_matches_its_twin_on_every_kind_of_record(mode):
    rng = random.Random(mode)
    for _ in range(6):
        suite, key, iv, data = _stream(mode, rng)
        pos, seq = 0, 0
        while pos < len(data):  # the whole stream, resumed where each run stops, as the layer does
            fast = _run(_fast, suite, key, iv, seq, data[pos:])
            assert fast == _run(RecordKeys._open_run, suite, key, iv, seq, data[pos:])
            used = fast[0]
            if not used:
                length = int.from_bytes(data[pos + 3:pos + 5], "big")
                used, seq = 5 + length, seq + (data[pos] != 0x14)  # past the record that stopped it
            else:
                seq = fast[4]
            pos += used
        for cut in rng.sample(range(len(data)), 40):  # unfinished records, bytes flipped
            assert _run(_fast, suite, key, iv, 0, data[:cut]) == _run(RecordKeys._open_run, suite, key, iv, 0,
                                                                    data[:cut])
            flipped = bytearray(data)
            flipped[cut] ^= 1 << rng.randrange(8)
            assert _run(_fast, suite, key, iv, 0, flipped) == _run(RecordKeys._open_run, suite, key, iv, 0,
                                                                 flipped)


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
