"""keys.py against published vectors: RFC 8448 section 3 (TLS 1.3 simple 1-RTT handshake: the
traffic keys and IVs of the four secrets, and the two application data records), and the TLS 1.2
PRF vector published for the IETF TLS working group (SHA-256, "test label")."""

import pytest
from cryptography.exceptions import InvalidTag

from kinspect.tls.keys import (SUITES, hkdf_expand_label, next_traffic_secret, split_inner, suite_name, tls12_keys,
                               tls12_prf, tls13_keys)


def h(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


AES128 = SUITES[0x1301]
# RFC 8448 3: secret → (write key, write iv)
RFC8448 = {
    "server handshake": ("b6 7b 7d 69 0c c1 6c 4e 75 e5 42 13 cb 2d 37 b4 e9 c9 12 bc de d9 10 5d 42 be fd 59 d3 91 ad 38",
                         "3f ce 51 60 09 c2 17 27 d0 f2 e4 e8 6e e4 03 bc", "5d 31 3e b2 67 12 76 ee 13 00 0b 30"),
    "client handshake": ("b3 ed db 12 6e 06 7f 35 a7 80 b3 ab f4 5e 2d 8f 3b 1a 95 07 38 f5 2e 96 00 74 6a 0e 27 a5 5a 21",
                         "db fa a6 93 d1 76 2c 5b 66 6a f5 d9 50 25 8d 01", "5b d3 c7 1b 83 6e 0b 76 bb 73 26 5f"),
    "server application": ("a1 1a f9 f0 55 31 f8 56 ad 47 11 6b 45 a9 50 32 82 04 b4 f4 4b fb 6b 3a 4b 4f 1f 3f cb 63 16 43",
                           "9f 02 28 3b 6c 9c 07 ef c2 6b b9 f2 ac 92 e3 56", "cf 78 2b 88 dd 83 54 9a ad f1 e9 84"),
    "client application": ("9e 40 64 6c e7 9a 7f 9d c0 5a f8 88 9b ce 65 52 87 5a fa 0b 06 df 00 87 f7 92 eb b7 c1 75 04 a5",
                           "17 42 2d da 59 6e d5 d9 ac d8 90 e3 c6 3f 50 51", "5b 78 92 3d ee 08 57 90 33 e5 23 d9"),
}
CLIENT_APP_RECORD = h("""17 03 03 00 43 a2 3f 70 54 b6 2c 94 d0 af fa fe 82 28 ba 55 cb ef ac ea 42 f9 14 aa 66 bc ab
    3f 2b 98 19 a8 a5 b4 6b 39 5b d5 4a 9a 20 44 1e 2b 62 97 4e 1f 5a 62 92 a2 97 70 14 bd 1e 3d ea e6 3a ee bb 21
    69 49 15 e4""")
SERVER_APP_RECORD = h("""17 03 03 00 43 2e 93 7e 11 ef 4a c7 40 e5 38 ad 36 00 5f c4 a4 69 32 fc 32 25 d0 5f 82 aa 1b
    36 e3 0e fa f9 7d 90 e6 df fc 60 2d cb 50 1a 59 a8 fc c4 9c 4b f2 e5 f0 a2 1c 00 47 c2 ab f3 32 54 0d d0 32 e1
    67 c2 95 5d""")
PAYLOAD = bytes(range(0x32))


@pytest.mark.parametrize("which", sorted(RFC8448))
def test_rfc8448_traffic_keys(which):
    secret, key, iv = RFC8448[which]
    assert hkdf_expand_label(h(secret), b"key", b"", 16) == h(key)
    assert hkdf_expand_label(h(secret), b"iv", b"", 12) == h(iv)
    keys = tls13_keys(AES128, h(secret))
    assert keys.iv == h(iv)


@pytest.mark.parametrize("code", sorted(code for code, suite in SUITES.items() if suite.tls13))
def test_the_traffic_keys_of_every_tls13_suite_are_its_hkdf_expand_labels(code):
    """tls13_keys computes both one-block expansions with one HMAC keyed once; HKDFExpand is the reference."""
    import os
    suite = SUITES[code]
    for _ in range(3):
        secret = os.urandom(48 if suite.hash == "sha384" else 32)
        keys = tls13_keys(suite, secret)
        assert keys.iv == hkdf_expand_label(secret, b"iv", b"", 12, suite.hash)
        key = hkdf_expand_label(secret, b"key", b"", suite.key_size, suite.hash)
        record = tls13_keys(suite, secret)  # a record sealed under the reference key opens
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
        sealed = (AESGCM if suite.aead == "aes-gcm" else ChaCha20Poly1305)(key).encrypt(
            keys.iv, b"kafka\x17", bytes([23, 3, 3, 0, 6 + 16]))
        assert record.open(23, 0x0303, sealed) == b"kafka\x17"


def test_rfc8448_application_records_open():
    client = tls13_keys(AES128, h(RFC8448["client application"][0]))
    opened = client.open(CLIENT_APP_RECORD[0], 0x0303, CLIENT_APP_RECORD[5:])
    inner, content = split_inner(opened)
    assert (inner, bytes(content)) == (23, PAYLOAD)
    server = tls13_keys(AES128, h(RFC8448["server application"][0]))
    server.seq = 1  # the server's NewSessionTicket went first under these keys
    inner, content = split_inner(server.open(SERVER_APP_RECORD[0], 0x0303, SERVER_APP_RECORD[5:]))
    assert (inner, bytes(content)) == (23, PAYLOAD)
    assert server.seq == 2


def test_a_wrong_sequence_number_or_a_flipped_bit_does_not_open():
    server = tls13_keys(AES128, h(RFC8448["server application"][0]))
    with pytest.raises(InvalidTag):
        server.open(23, 0x0303, SERVER_APP_RECORD[5:])  # sequence 0, sent as 1
    client = tls13_keys(AES128, h(RFC8448["client application"][0]))
    damaged = bytearray(CLIENT_APP_RECORD[5:])
    damaged[10] ^= 1
    with pytest.raises(InvalidTag):
        client.open(23, 0x0303, bytes(damaged))
    assert client.seq == 1  # the sequence moves on: the sender's did


def test_tls12_prf_vector():
    out = tls12_prf(h("9b be 43 6b a9 40 f0 17 b1 76 52 84 9a 71 db 35"), b"test label",
                    h("a0 ba 9f 93 6c da 31 18 27 a6 f7 96 ff d5 19 8c"), 100)
    assert out == h("""e3 f2 29 ba 72 7b e1 7b 8d 12 26 20 55 7c d4 53 c2 aa b2 1d 07 c3 d4 95 32 9b 52 d4 e6 1e
        db 5a 6b 30 17 91 e9 0d 35 c9 c9 a4 6b 4e 14 ba f9 af 0f a0 22 f7 07 7d ef 17 ab fd 37 97 c0 56 4b ab 4f bc
        91 66 6e 9d ef 9b 97 fc e3 4f 79 67 89 ba a4 80 82 d1 22 ee 42 c5 a7 2e 5a 51 10 ff f7 01 87 34 7b 66""")


def test_tls12_key_block_cut():
    """The key block is cut client key, server key, client IV, server IV (no MAC keys for AEAD)."""
    master, cr, sr = bytes(range(48)), bytes(32), bytes([1]) * 32
    suite = SUITES[0xC02F]
    block = tls12_prf(master, b"key expansion", sr + cr, 2 * (16 + 4))
    client, server = tls12_keys(suite, master, cr, sr)
    assert (client.iv, server.iv) == (block[32:36], block[36:40])
    chacha_client, _ = tls12_keys(SUITES[0xCCA8], master, cr, sr)
    assert chacha_client.iv == tls12_prf(master, b"key expansion", sr + cr, 88)[64:76]


def test_key_update_is_the_next_secret():
    secret = h(RFC8448["client application"][0])
    # RFC 8446 7.2: HKDF-Expand-Label(secret, "traffic upd", "", Hash.length)
    assert next_traffic_secret(AES128, secret) == hkdf_expand_label(secret, b"traffic upd", b"", 32)
    assert len(next_traffic_secret(SUITES[0x1302], bytes(48))) == 48


def test_suite_names():
    assert suite_name(0x1303) == "TLS_CHACHA20_POLY1305_SHA256"
    assert suite_name(0xC030) == "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
    assert suite_name(0xC013) == "cipher suite 0xc013"


def test_inner_plaintext_padding():
    assert split_inner(b"abc\x17\x00\x00\x00") == (23, memoryview(b"abc"))
    assert split_inner(b"\x00\x00")[0] == 0
