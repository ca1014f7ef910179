"""Generators of hostile inputs for the TLS layer and the key log (issue 30, items 4, 7 and 8).

Each function writes its input under ``root`` and returns its path:
- ``junk_keylog``: a 64 MiB key log of junk lines (33M lines, none of them a secret); run it as
  ``decode --keylog PATH CAPTURE`` with any capture;
- ``junk_dsb_pcapng_gz``: the same junk inside a pcapng's Decryption Secrets Block, gzip'ed to
  about 66 KB, then one TLS 1.2 connection whose keys are looked up (and missing);
- ``one_byte_hellos_pcap_gz``: 64 connections, each sending a ClientHello of the largest size
  kinspect keeps (tls/handshake.py MAX_MESSAGE) as one-byte TLS records;
- ``damaged_records_pcapng``: 11 MB of one real TLS 1.3 connection (OpenSSL in memory,
  tests/unit/tls/memtls.py) carrying Kafka ApiVersions exchanges, every other record after the
  first ten damaged by one flipped bit; its key log is in a Decryption Secrets Block, so
  ``decode --json PATH`` decrypts it without a flag;
- ``large_keylog``: a valid key log of ``size`` bytes (TLS 1.2 and 1.3 lines of made-up
  connections), with the secrets of ``tls_capture``'s connections among them (first, middle,
  last), next to that capture: legitimate work, not an attack (``decode --keylog PATH CAPTURE``).
"""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path

from kinspect.tls.handshake import MAX_MESSAGE
from tests.hostile.kafka import request, response
from tests.hostile.packets import ACK, PSH, Connection, PcapngWriter, PcapWriter
from tests.unit.capture.helpers import block

MIB = 1 << 20
TLSK = 0x544C534B  # a Decryption Secrets Block holding a TLS key log
DSB = 0x0000000A
MAX_DSB = 64 * MIB - 64 * 1024  # capture/pcapng.py keeps at most 64 MiB of secrets per file
API_VERSIONS = 18
_JUNK = (b"x\n" * 40 + b"CLIENT_RANDOM zz zz\n" + b"CLIENT_RANDOM " + b"ab" * 32 + b" 1234\n"
         + b"a b c d\n" + b"\xff\xfe\x00\n" + b"NOT_A_LABEL " + b"cd" * 32 + b" " + b"ef" * 32 + b"\n")


def _junk(size: int, plain: bool = False) -> bytes:
    """``size`` bytes of junk lines; ``plain``: ``x`` lines only after the first kinds (what
    gzip packs densest)."""
    if plain:
        return (_JUNK + b"x\n" * (size // 2))[:size]
    return (_JUNK * (size // len(_JUNK) + 1))[:size]


def junk_keylog(root: Path, size: int = 64 * MIB) -> Path:
    """``size`` bytes of lines that are not secrets: mostly ``x``, some with a label and fields
    that are not hex, of the wrong length, too many, or not text."""
    path = root / "junk-keys.log"
    path.write_bytes(_junk(size, plain=True))
    return path


def _dsb(secrets: bytes, kind: int = TLSK) -> bytes:
    return block(DSB, struct.pack("<II", kind, len(secrets)) + secrets + b"\x00" * (-len(secrets) % 4))


def client_hello(random: bytes, size: int = 0) -> bytes:
    """A TLS 1.2 ClientHello handshake message (type and length included) offering
    TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, null compression, no extension; with ``size``, its
    body is that many bytes (at most 131,396, the largest the fields allow): a padding extension
    (RFC 7685), the suite repeated, null compression repeated, a session id."""
    room = size - 43 if size else 0  # past the smallest hello with an extensions vector
    padding = min(room - 4, 65531) if room >= 4 else -1
    room -= padding + 4 if padding >= 0 else 0
    suites = 2 + min(room, 65532) // 2 * 2
    room -= suites - 2
    compression = 1 + min(room, 254)
    room -= compression - 1
    session = min(room, 32)
    body = (b"\x03\x03" + random + bytes([session]) + bytes(session) + struct.pack(">H", suites)
            + b"\xc0\x2f" * (suites // 2) + bytes([compression]) + bytes(compression))
    extensions = struct.pack(">HH", 21, padding) + bytes(padding) if padding >= 0 else b""
    body += struct.pack(">H", len(extensions)) + extensions
    assert not size or len(body) == size, (len(body), size)
    return b"\x01" + len(body).to_bytes(3, "big") + body


def _server_hello(random: bytes, suite: int = 0xC02F) -> bytes:
    body = b"\x03\x03" + random + b"\x00" + struct.pack(">H", suite) + b"\x00" + b"\x00\x00"
    return b"\x02" + len(body).to_bytes(3, "big") + body


def _record(ctype: int, fragment: bytes, version: int = 0x0303) -> bytes:
    return struct.pack(">BHH", ctype, version, len(fragment)) + fragment


def _tls12_without_keys(out, sport: int = 40000) -> None:
    """A TLS 1.2 connection on port 9093: hellos, ChangeCipherSpec, a protected record each way
    (its keys are looked up, and missing), FIN."""
    conn = Connection(out, sport=sport, dport=9093)
    conn.handshake()
    conn.send(_record(22, client_hello(bytes(range(32)))))
    conn.reply(_record(22, _server_hello(bytes(range(32, 64)))) + _record(20, b"\x01"))
    conn.send(_record(20, b"\x01") + _record(22, os.urandom(40)) + _record(23, os.urandom(64)))
    conn.reply(_record(22, os.urandom(40)) + _record(23, os.urandom(64)))
    conn.close()


class _GzipPcapng(PcapngWriter):
    """PcapngWriter into a gzip file, with Decryption Secrets Blocks on demand."""

    def __init__(self, path: Path, start_micros: int = 1_763_760_000_000_000):
        super().__init__(path, start_micros)
        self.file.close()
        self.file = gzip.open(path, "wb", compresslevel=9)
        from tests.unit.capture.helpers import idb, shb
        self.file.write(shb() + idb(1))

    def secrets(self, data: bytes) -> None:
        self.file.write(_dsb(data))


def junk_dsb_pcapng_gz(root: Path, size: int = MAX_DSB) -> Path:
    """A .pcapng.gz whose Decryption Secrets Block holds ``size`` bytes of junk key-log lines,
    then one TLS connection whose keys are missing, so the block is read (about 66 KB)."""
    path = root / "junk-secrets.pcapng.gz"
    with _GzipPcapng(path) as out:
        out.secrets(_junk(size, plain=True))
        _tls12_without_keys(out)
    return path


def one_byte_hellos_pcap_gz(root: Path, hellos: int = 64, size: int = MAX_MESSAGE) -> Path:
    """``hellos`` connections, each a ClientHello whose body is ``size`` bytes, sent as one-byte
    handshake records (6 bytes on the wire per byte of the message), in 65,000-byte segments."""
    path = root / "one-byte-hellos.pcap.gz"
    out = PcapWriter(path)
    out.file.close()
    out.file = gzip.open(path, "wb", compresslevel=9)
    out.file.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
    hello = client_hello(bytes(32), size)
    records = b"".join(b"\x16\x03\x01\x00\x01" + hello[i:i + 1] for i in range(len(hello)))
    with out:
        for n in range(hellos):
            conn = Connection(out, sport=40000 + n, dport=9093)
            conn.handshake()
            conn.send(records)
            conn.close()
    return path


def _memtls_conversation(work: Path, keyfile: Path, exchanges: int) -> list[tuple[str, bytes]]:
    from tests.unit.tls.memtls import converse

    messages = []
    for cid in range(exchanges):
        messages.append(("client", request(API_VERSIONS, 0, cid, {})))
        messages.append(("server", response(API_VERSIONS, 0, cid, {"error_code": 0, "api_keys": []})))
    return converse(work, keyfile, messages, "1.3")


def damaged_records_pcapng(root: Path, size: int = 11 * MIB, intact: int = 10) -> Path:
    """One TLS 1.3 connection of ApiVersions exchanges, about ``size`` bytes of pcapng: after
    the first ``intact`` records of each side, every other record has one bit flipped (each is
    a record that does not authenticate, between two that do). The key log is in a Decryption
    Secrets Block at the start."""
    work = root / "damaged-records-work"
    work.mkdir(parents=True, exist_ok=True)
    keyfile = work / "keys.log"
    exchanges = size // 457  # wire bytes per exchange with its ACKs, measured
    wire = _memtls_conversation(work, keyfile, exchanges)
    path = root / "damaged-records.pcapng"
    seen = {"client": 0, "server": 0}
    with PcapngWriter(path, 1_763_760_000_000_000) as out:
        out.file.write(_dsb(keyfile.read_bytes()))
        conn = Connection(out, dport=9093)
        conn.handshake()
        for side, data in wire:
            seen[side] += 1
            if data[0] == 23 and seen[side] > intact and seen[side] % 2:
                data = bytearray(data)
                data[len(data) // 2] ^= 0x10
                data = bytes(data)
            (conn.send if side == "client" else conn.reply)(data)
        conn.close()
    for leftover in work.iterdir():
        leftover.unlink()
    work.rmdir()
    return path


def _lines(count: int) -> bytes:
    """Key-log lines of ``count`` made-up connections: TLS 1.2 (one line) and TLS 1.3 (four)."""
    out = []
    randoms = os.urandom(32 * count).hex()
    secrets = os.urandom(48 * count).hex()
    for i in range(count):
        random = randoms[64 * i:64 * i + 64]
        secret = secrets[96 * i:96 * i + 96]
        if i % 2:
            out.append(f"CLIENT_RANDOM {random} {secret}\n")
        else:
            for label in ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                          "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"):
                out.append(f"{label} {random} {secret[:64]}\n")
    return "".join(out).encode()


def tls_capture(root: Path, connections: int = 3) -> tuple[Path, bytes]:
    """A pcap of ``connections`` real TLS 1.3 connections of ApiVersions exchanges (OpenSSL in
    memory), and their key log's lines."""
    work = root / "tls-capture-work"
    work.mkdir(parents=True, exist_ok=True)
    keyfile = work / "keys.log"
    path = root / "tls.pcap"
    with PcapWriter(path) as out:
        for n in range(connections):
            conn = Connection(out, sport=41000 + n, dport=9093)
            conn.handshake()
            for side, data in _memtls_conversation(work, keyfile, 5):
                (conn.send if side == "client" else conn.reply)(data)
            conn.close()
    keys = keyfile.read_bytes()
    for leftover in work.iterdir():
        leftover.unlink()
    work.rmdir()
    return path, keys


def large_keylog(root: Path, size: int = 1 << 30) -> Path:
    """A valid key log of about ``size`` bytes, holding the secrets of ``tls_capture(root)``
    (written next to it as tls.pcap) at its start, middle and end, among made-up connections."""
    _, keys = tls_capture(root)
    lines = keys.splitlines(keepends=True)
    thirds = [b"".join(lines[i::3]) for i in range(3)]
    path = root / "large-keys.log"
    chunk = 4 * MIB
    with open(path, "wb") as out:
        out.write(thirds[0])
        while out.tell() < size:
            if thirds[1] and out.tell() >= size // 2:
                out.write(thirds[1])
                thirds[1] = b""
            out.write(_lines(chunk // 300))
        out.write(thirds[1] + thirds[2])
    return path
