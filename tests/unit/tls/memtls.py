"""Real TLS in memory for the unit tests: Python's ssl (OpenSSL) client and server joined by
MemoryBIOs, the key log written by OpenSSL itself (SSLContext.keylog_filename). ``converse``
returns the bytes each side put on the wire, in order, as a capture would show them."""

from __future__ import annotations

import ssl
from pathlib import Path

from tests.lab.certs import CertificateAuthority

_ca: list = []


def authority(directory: Path) -> tuple:
    """One authority per process, made again when its files are gone (the directory it was made in
    was a temporary one: a hostile input's, say)."""
    if _ca and not Path(_ca[0][1].cert).exists():
        _ca.clear()
    if not _ca:
        ca = CertificateAuthority(directory)
        _ca.append((ca, ca.issue("kafka-unit", ["localhost", "127.0.0.1"])))
    return _ca[0]


def contexts(directory: Path, keylog: Path, version: str = "1.3", cipher: str | None = None):
    ca, server = authority(directory)
    tls_version = ssl.TLSVersion.TLSv1_3 if version == "1.3" else ssl.TLSVersion.TLSv1_2
    out = []
    for side in ("client", "server"):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if side == "server" else ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ctx.maximum_version = tls_version
        if cipher and version == "1.2":
            ctx.set_ciphers(cipher)
        ctx.keylog_filename = str(keylog)
        if side == "server":
            ctx.load_cert_chain(server.cert, server.key)
        else:
            ctx.load_verify_locations(ca.cert)
            ctx.check_hostname = False  # the certificate is checked, the name is any SNI a test sends
        out.append(ctx)
    return out


def converse(directory: Path, keylog: Path, messages: list[tuple[str, bytes]], version: str = "1.3",
             cipher: str | None = None, server_name: str = "kafka.example", session=None,
             contexts_used=None, out: dict | None = None) -> list[tuple[str, bytes]]:
    """Handshake, then each (side, plaintext) written by that side and read by the other:
    [(side, wire bytes)] in the order they were sent. ``session``/``contexts_used``: resume a
    session of an earlier conversation on the same contexts; ``out`` gets "session" and
    "resumed" and "contexts"."""
    client_ctx, server_ctx = contexts_used or contexts(directory, keylog, version, cipher)
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=server_name, session=session)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    wire: list = []

    def flush():
        moved = True
        while moved:
            moved = False
            data = c_out.read()
            if data:
                wire.append(("client", data))
                s_in.write(data)
                moved = True
            data = s_out.read()
            if data:
                wire.append(("server", data))
                c_in.write(data)
                moved = True

    done = {"client": False, "server": False}
    for _ in range(20):
        for name, obj in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            flush()
        if all(done.values()):
            break
    for side, text in messages:
        writer, reader = (client, server) if side == "client" else (server, client)
        writer.write(text)
        flush()
        got = b""
        while len(got) < len(text):
            try:
                got += reader.read(1 << 16)
            except ssl.SSLWantReadError:
                break
            flush()
        assert got == text
    if out is not None:
        out.update(session=client.session, resumed=client.session_reused, contexts=(client_ctx, server_ctx))
    return wire
