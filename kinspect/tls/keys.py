"""Record keys from key-log secrets, and the record protection they open.

TLS 1.2 (RFC 5246 5, 6.3): key_block = PRF(master_secret, "key expansion", server_random +
client_random), cut into MAC keys (none for AEAD), write keys and write IVs. AES-GCM (RFC 5288)
takes a 4-byte implicit IV and an 8-byte explicit nonce at the head of each record;
ChaCha20-Poly1305 (RFC 7905) xors the 12-byte IV with the sequence number. The additional data
is seq_num + type + version + plaintext length.

TLS 1.3 (RFC 8446 7.1-7.3): key and IV = HKDF-Expand-Label(traffic secret, "key"/"iv", "", n);
the nonce is the IV xor the record sequence number; the additional data is the record header;
the plaintext ends with the real content type and zero padding. KeyUpdate: the next secret is
HKDF-Expand-Label(secret, "traffic upd", "", Hash.length).

``cryptography`` does the AEAD, the HKDF and the HMAC; it is imported when the first key is made,
so that a capture without TLS never pays for it.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kinspect.native import tls as _native


class Suite(NamedTuple):
    name: str
    aead: str  # "aes-gcm" or "chacha20"
    key_size: int
    iv_size: int  # TLS 1.2: the implicit part (4 for GCM, 12 for ChaCha20); 1.3: always 12
    hash: str  # "sha256" or "sha384": the PRF's / HKDF's hash
    tls13: bool


def _suites() -> dict[int, Suite]:
    table = {
        0x1301: Suite("TLS_AES_128_GCM_SHA256", "aes-gcm", 16, 12, "sha256", True),
        0x1302: Suite("TLS_AES_256_GCM_SHA384", "aes-gcm", 32, 12, "sha384", True),
        0x1303: Suite("TLS_CHACHA20_POLY1305_SHA256", "chacha20", 32, 12, "sha256", True),
    }
    for code, kx, bits, digest in [
        (0xC02B, "ECDHE_ECDSA", 128, "SHA256"), (0xC02C, "ECDHE_ECDSA", 256, "SHA384"),
        (0xC02F, "ECDHE_RSA", 128, "SHA256"), (0xC030, "ECDHE_RSA", 256, "SHA384"),
        (0x009C, "RSA", 128, "SHA256"), (0x009D, "RSA", 256, "SHA384"),
        (0x009E, "DHE_RSA", 128, "SHA256"), (0x009F, "DHE_RSA", 256, "SHA384"),
        (0x00A2, "DHE_DSS", 128, "SHA256"), (0x00A3, "DHE_DSS", 256, "SHA384"),
        (0x00A8, "PSK", 128, "SHA256"), (0x00A9, "PSK", 256, "SHA384"),
    ]:
        table[code] = Suite(f"TLS_{kx}_WITH_AES_{bits}_GCM_{digest}", "aes-gcm", bits // 8, 4, digest.lower(), False)
    for code, kx in [(0xCCA8, "ECDHE_RSA"), (0xCCA9, "ECDHE_ECDSA"), (0xCCAA, "DHE_RSA"),
                     (0xCCAB, "PSK"), (0xCCAC, "ECDHE_PSK"), (0xCCAD, "DHE_PSK")]:
        table[code] = Suite(f"TLS_{kx}_WITH_CHACHA20_POLY1305_SHA256", "chacha20", 32, 12, "sha256", False)
    return table


SUITES = _suites()
TAG = 16
_seq_head = struct.Struct(">QBHH").pack  # TLS 1.2 additional data
_head = struct.Struct(">BHH").pack  # TLS 1.3 additional data: the record header
_header = struct.Struct(">BHH").unpack_from
MAX_FRAGMENT = (1 << 14) + 256  # RFC 8446 5.2: a TLS 1.3 record's ciphertext
MAX_FRAGMENT12 = (1 << 14) + 2048  # RFC 5246 6.2.3


def suite_name(code: int) -> str:
    suite = SUITES.get(code)
    return suite.name if suite is not None else f"cipher suite {code:#06x}"


_HASHES: dict = {}


def _hash(name: str):
    algorithm = _HASHES.get(name)
    if algorithm is None:
        from cryptography.hazmat.primitives import hashes
        algorithm = _HASHES[name] = hashes.SHA256() if name == "sha256" else hashes.SHA384()
    return algorithm


def tls12_prf(secret: bytes, label: bytes, seed: bytes, size: int, digest: str = "sha256") -> bytes:
    """RFC 5246 5: P_hash(secret, label + seed) cut to ``size`` bytes. One HMAC keyed once,
    copied for each block."""
    from cryptography.hazmat.primitives import hmac
    keyed = hmac.HMAC(secret, _hash(digest))
    seed = label + seed
    out = b""
    a = seed
    while len(out) < size:
        h = keyed.copy()
        h.update(a)
        a = h.finalize()
        h = keyed.copy()
        h.update(a + seed)
        out += h.finalize()
    return out[:size]


def hkdf_expand_label(secret: bytes, label: bytes, context: bytes, length: int, digest: str = "sha256") -> bytes:
    """RFC 8446 7.1: HKDF-Expand(secret, HkdfLabel(length, "tls13 " + label, context), length)."""
    if context:
        full = b"tls13 " + label
        info = struct.pack(">HB", length, len(full)) + full + bytes([len(context)]) + context
    else:
        info = _INFO.get((label, length)) or _info(label, length)
    return _expand()(_hash(digest), length, info).derive(secret)


_INFO: dict = {}  # (label, length) → HkdfLabel with an empty context: the same few every time


def _info(label: bytes, length: int) -> bytes:
    full = b"tls13 " + label
    info = _INFO[label, length] = struct.pack(">HB", length, len(full)) + full + b"\0"
    return info


_HKDFExpand = None


def _expand():
    global _HKDFExpand
    if _HKDFExpand is None:
        from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand as _HKDFExpand
    return _HKDFExpand


_AEADS: dict = {}


def _aead(suite: Suite, key: bytes):
    if not _AEADS:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
        _AEADS.update({"aes-gcm": AESGCM, "chacha20": ChaCha20Poly1305})
    return _AEADS[suite.aead](key)


class RecordKeys:
    """One direction's record protection: ``open(type, version, fragment)`` → plaintext
    (TLS 1.3: inner plaintext, type and padding still on), raising ``cryptography``'s
    InvalidTag when the record does not authenticate; the sequence number moves on either way."""

    __slots__ = ("suite", "tls13", "decrypt", "iv", "iv_int", "seq", "secret", "mode")

    def __init__(self, suite: Suite, key: bytes, iv: bytes, secret: bytes | None = None) -> None:
        self.suite = suite
        self.tls13 = suite.tls13
        self.decrypt = _aead(suite, key).decrypt
        self.iv = iv
        self.iv_int = int.from_bytes(iv, "big")
        self.seq = 0
        self.secret = secret  # TLS 1.3: the traffic secret, for KeyUpdate
        self.mode = 0 if suite.tls13 else 1 if suite.aead == "aes-gcm" else 2  # native/_tls.c's

    def open(self, ctype: int, version: int, fragment):
        seq = self.seq
        self.seq = seq + 1
        suite = self.suite
        if suite.tls13:
            nonce = (self.iv_int ^ seq).to_bytes(12, "big")
            return self.decrypt(nonce, fragment, _head(ctype, version, len(fragment)))
        if suite.aead == "aes-gcm":
            if len(fragment) < 8 + TAG:
                raise ValueError(f"a {len(fragment)}-byte record is too short for AES-GCM")
            nonce = self.iv + bytes(fragment[:8])
            return self.decrypt(nonce, fragment[8:], _seq_head(seq, ctype, version, len(fragment) - 8 - TAG))
        nonce = (self.iv_int ^ seq).to_bytes(12, "big")
        if len(fragment) < TAG:
            raise ValueError(f"a {len(fragment)}-byte record is too short for ChaCha20-Poly1305")
        return self.decrypt(nonce, fragment, _seq_head(seq, ctype, version, len(fragment) - TAG))

    def open_inner(self, ctype: int, version: int, fragment) -> tuple:
        """``open`` and the content type: (type, content). TLS 1.3: the inner plaintext's type,
        padding off (``split_inner``); TLS 1.2: the record's type."""
        if not self.tls13:
            return ctype, self.open(ctype, version, fragment)
        seq = self.seq
        self.seq = seq + 1
        plain = self.decrypt((self.iv_int ^ seq).to_bytes(12, "big"), fragment, _head(ctype, version, len(fragment)))
        if plain and plain[-1]:  # no padding: the type is the last byte
            return plain[-1], plain[:-1]
        return split_inner(plain)


    def open_run(self, data, plain: list) -> tuple:
        """The steady state in one loop: open the whole application_data records at the head of
        ``data``, appending their content to ``plain`` (TLS 1.3: ChangeCipherSpec records passed
        over), until one holds something else (TLS 1.3: a handshake message, an alert, only
        padding): that one is opened and given back as ``(inner type, content, position in data,
        fragment size)``, for the caller. Stops before a record that does not open (the sequence
        number stays on it), any other header, or an unfinished record: the caller's record
        reader takes those. Returns (bytes used, records opened, the other record or None).
        native/_tls.c when it is built, else ``open_run_py``, its twin."""
        if _native is None or self.seq >= 1 << 63:
            return self.open_run_py(data, plain)
        used, seq, other = _native.open_run(self.decrypt, self.mode, self.iv, self.seq, data, plain)
        opened, self.seq = seq - self.seq, seq
        return used, opened, other

    def open_run_py(self, data, plain: list) -> tuple:
        view = memoryview(data)
        header = _header
        decrypt = self.decrypt
        iv = self.iv_int
        seq = self.seq
        end = len(view)
        pos = 0
        other = None
        tls13 = self.tls13
        gcm12 = not tls13 and self.suite.aead == "aes-gcm"
        while end - pos >= 5:
            ctype, version, length = header(view, pos)
            stop = pos + 5 + length
            if stop > end or version != 0x0303:
                break
            if ctype != 23:
                if ctype == 20 and tls13 and length == 1:  # ChangeCipherSpec for middleboxes
                    pos = stop
                    continue
                break
            try:
                if tls13:
                    if length > MAX_FRAGMENT:
                        break
                    opened = decrypt((iv ^ seq).to_bytes(12, "big"), view[pos + 5:stop], view[pos:pos + 5])
                elif gcm12:  # RFC 5288: an explicit 8-byte nonce heads the fragment
                    if length < 8 + TAG or length > MAX_FRAGMENT12:
                        break
                    opened = decrypt(self.iv + view[pos + 5:pos + 13], view[pos + 13:stop],
                                     _seq_head(seq, 23, version, length - 8 - TAG))
                else:  # RFC 7905
                    if length < TAG or length > MAX_FRAGMENT12:
                        break
                    opened = decrypt((iv ^ seq).to_bytes(12, "big"), view[pos + 5:stop],
                                     _seq_head(seq, 23, version, length - TAG))
            except Exception:  # InvalidTag: the caller opens it again, and reports it
                break
            seq += 1
            pos = stop
            if not tls13:
                if opened:
                    plain.append(opened)
                continue
            if opened and opened[-1] == 23:
                if len(opened) > 1:
                    plain.append(opened[:-1])
                continue
            inner, content = (opened[-1], opened[:-1]) if opened and opened[-1] else split_inner(opened)
            if inner == 23:  # application data with padding
                if content:
                    plain.append(bytes(content))
                continue
            other = (inner, content, pos - 5 - length, length)
            break
        opened_count = seq - self.seq
        self.seq = seq
        return pos, opened_count, other


def tls12_keys(suite: Suite, master: bytes, client_random: bytes, server_random: bytes) -> tuple[RecordKeys, RecordKeys]:
    """(client's write keys, server's write keys) from the master secret."""
    size = 2 * (suite.key_size + suite.iv_size)
    block = tls12_prf(master, b"key expansion", server_random + client_random, size, suite.hash)
    k, i = suite.key_size, suite.iv_size
    client_key, server_key = block[:k], block[k:2 * k]
    client_iv, server_iv = block[2 * k:2 * k + i], block[2 * k + i:2 * k + 2 * i]
    return RecordKeys(suite, client_key, client_iv), RecordKeys(suite, server_key, server_iv)


def tls13_keys(suite: Suite, secret: bytes) -> RecordKeys:
    """The record keys of a traffic secret. The key and the IV are each one block of HKDF-Expand
    (no longer than the hash: RFC 5869 2.3, T(1) = HMAC(secret, info || 0x01)), so one HMAC keyed
    with the secret is copied for the two labels: a third cheaper than two HKDFExpand objects."""
    algorithm, key_info, iv_info = _SCHEDULE.get(suite.name) or _schedule(suite)
    keyed = (_HMAC or _hmac())(secret, algorithm)
    key = keyed.copy()
    key.update(key_info)
    keyed.update(iv_info)
    return RecordKeys(suite, key.finalize()[:suite.key_size], keyed.finalize()[:12], secret)


_SCHEDULE: dict = {}  # suite name → (its hash, the "key" and "iv" HkdfLabels + 0x01): the same every time
_HMAC = None


def _hmac():
    global _HMAC
    from cryptography.hazmat.primitives.hmac import HMAC as _HMAC
    return _HMAC


def _schedule(suite: Suite) -> tuple:
    key_info = _INFO.get((b"key", suite.key_size)) or _info(b"key", suite.key_size)
    iv_info = _INFO.get((b"iv", 12)) or _info(b"iv", 12)
    plan = _SCHEDULE[suite.name] = (_hash(suite.hash), key_info + b"\x01", iv_info + b"\x01")
    return plan


def next_traffic_secret(suite: Suite, secret: bytes) -> bytes:
    """RFC 8446 7.2: application_traffic_secret_N+1."""
    return hkdf_expand_label(secret, b"traffic upd", b"", len(secret), suite.hash)


def split_inner(plain) -> tuple[int, memoryview]:
    """TLS 1.3 inner plaintext → (content type, content): zero padding and the type byte off.
    Content type 0 means the record was all padding (an error, RFC 8446 5.4)."""
    view = memoryview(plain)
    end = len(view)
    if end and not view[end - 1]:
        end = len(bytes(plain).rstrip(b"\0"))
    if not end:
        return 0, view[:0]
    return view[end - 1], view[:end - 1]
