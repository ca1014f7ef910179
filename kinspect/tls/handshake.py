"""TLS handshake messages: the few fields decryption needs, sans-I/O.

``HandshakeReader`` reassembles one direction's handshake messages (``type(1) length(3)
body``) across records, keeping whole only the types asked for (at most MAX_MESSAGE bytes) and
skipping the rest by count, so a certificate chain costs no memory. ``client_hello`` and
``server_hello`` read RFC 8446 4.1.2 and 4.1.3 (and RFC 5246 7.4.1): the randoms, the session
id, the cipher suite, the server name (RFC 6066 SNI) and supported_versions, which says TLS 1.3. A ServerHello whose random is the
HelloRetryRequest value is no ServerHello: a second ClientHello and ServerHello follow.
"""

from __future__ import annotations

import struct

from kinspect.native import tls as _native

CLIENT_HELLO, SERVER_HELLO, NEW_SESSION_TICKET = 1, 2, 4
ENCRYPTED_EXTENSIONS, CERTIFICATE, CERTIFICATE_REQUEST, CERTIFICATE_VERIFY = 8, 11, 13, 15
FINISHED, KEY_UPDATE, HELLO_REQUEST = 20, 24, 0
EXT_SERVER_NAME, EXT_SUPPORTED_VERSIONS, EXT_SESSION_TICKET, EXT_PRE_SHARED_KEY = 0, 43, 35, 41
_READ = frozenset({EXT_SERVER_NAME, EXT_SUPPORTED_VERSIONS, EXT_SESSION_TICKET, EXT_PRE_SHARED_KEY})
# SHA-256 of "HelloRetryRequest" (RFC 8446, 4.1.3), written out: importing hashlib loads OpenSSL,
# 11M instructions of every decode's start-up
HELLO_RETRY_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
# A kept message (hellos, Finished, KeyUpdate) larger than this is refused: the largest
# ClientHello its fields allow (2 + 32 + 1 + 32 + 2 + 65534 + 1 + 255 + 2 + 65535 bytes),
# OpenSSL's CLIENT_HELLO_MAX_LENGTH; a ServerHello is at most 65,607. Other messages
# (certificate chains: OpenSSL takes 100 KiB by default) are passed over by count, never held.
MAX_MESSAGE = 131396
MAX_PARTS = 256  # pieces of an unfinished message held apart before they are joined

VERSION_NAMES = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2", 0x0304: "TLS 1.3"}
_u16 = struct.Struct(">H").unpack_from
_u16x2 = struct.Struct(">HH").unpack_from
_u32 = struct.Struct(">I").unpack_from


def version_name(version: int) -> str:
    return VERSION_NAMES.get(version, f"TLS version {version:#06x}")


class HandshakeError(ValueError):
    """A handshake message that cannot be read: ``where`` names the field."""


class HandshakeReader:
    """Handshake bytes in, ``(msg_type, body)`` out for the types in ``keep`` (others skipped).

    A kept message cut over many records is held as the list of its pieces and joined once,
    when it is whole: the work is linear in the bytes, however small the records. A kept
    message longer than MAX_MESSAGE stops the reader (``error``)."""

    __slots__ = ("keep", "parts", "held", "need", "skip", "error")

    def __init__(self, keep) -> None:
        self.keep = keep
        self.parts: list[bytes] = []  # the start of a message, in pieces
        self.held = 0  # their bytes
        self.need = 0  # the bytes of the whole message, or of its header while that is cut (4)
        self.skip = 0  # bytes of an unkept message still to pass over
        self.error: str | None = None

    def restart(self) -> None:
        """The next bytes start a message (a new epoch: what was cut off before never ends)."""
        self.parts, self.held, self.need, self.skip = [], 0, 0, 0

    def room(self) -> int:
        """How many bytes ``take`` accepts: those that finish no message nor header."""
        if self.error is not None:
            return 0
        if self.skip:
            return self.skip
        return self.need - self.held - 1 if self.held else 0

    def take(self, pieces: list, size: int) -> None:
        """``pieces`` (``size`` bytes in all, at most ``room()``): held or passed over, nothing
        read. The layer gives a run of small records this way, one join for them all."""
        if self.skip:
            self.skip -= size
        else:
            self.parts.append(b"".join(pieces))
            self.held += size
            if len(self.parts) > MAX_PARTS:
                self.parts = [b"".join(self.parts)]

    def feed(self, data) -> list:
        if self.error is not None:
            return []
        if type(data) is not bytes:
            data = bytes(data)
        if not self.held and not self.skip and len(data) >= 4:  # most often one whole message
            word = _u32(data)[0]
            if (word & 0xFFFFFF) + 4 == len(data) and word >> 24 not in self.keep:
                return []
        skip = self.skip
        if skip:
            if skip >= len(data):
                self.skip = skip - len(data)
                return []
            self.skip = 0
            data = data[skip:]
        if self.held:
            parts = self.parts
            parts.append(data)
            self.held += len(data)
            if self.held < self.need:
                if len(parts) > MAX_PARTS:  # tiny pieces cost more than their bytes: one now and then
                    self.parts = [b"".join(parts)]
                return []
            data = b"".join(parts)
        keep = self.keep
        out = []
        pos, end = 0, len(data)
        length = -1
        while end - pos >= 4:
            word = _u32(data, pos)[0]
            msg_type, length = word >> 24, word & 0xFFFFFF
            if msg_type not in keep:
                take = min(length, end - pos - 4)
                self.skip = length - take
                pos += 4 + take
                length = -1
                continue
            if length > MAX_MESSAGE:
                self.error = f"handshake message type {msg_type} of {length} bytes (kept at most {MAX_MESSAGE})"
                self.parts, self.held = [], 0
                return out
            if end - pos - 4 < length:
                break
            out.append((msg_type, data[pos + 4:pos + 4 + length]))
            pos += 4 + length
            length = -1
        if pos < end:
            rest = data[pos:]
            self.parts, self.held = [rest], len(rest)
            self.need = 4 + length if length >= 0 else 4
        else:
            self.parts, self.held, self.need = [], 0, 0
        return out


class _Cursor:
    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def take(self, size: int, field: str) -> bytes:
        if self.pos + size > len(self.data):
            raise HandshakeError(f"{self.what} → {field}: needs {size} bytes at byte {self.pos}, "
                                 f"{len(self.data) - self.pos} left")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def u8(self, field: str) -> int:
        return self.take(1, field)[0]

    def u16(self, field: str) -> int:
        return _u16(self.take(2, field))[0]

    def vector(self, width: int, field: str) -> bytes:
        size = int.from_bytes(self.take(width, field + " length"), "big")
        return self.take(size, field)

    def extensions(self) -> dict[int, bytes]:
        """extension_type → extension_data (the first of a type); one loop, no call per field."""
        out: dict[int, bytes] = {}
        if self.pos == len(self.data):
            return out  # no extensions at all (TLS 1.0 era)
        block = self.vector(2, "extensions")
        pos, end = 0, len(block)
        while pos < end:
            if end - pos < 4:
                raise HandshakeError(f"{self.what} → extensions: {end - pos} bytes left at byte {pos}, "
                                     f"an extension header needs 4")
            ext_type, size = _u16x2(block, pos)
            if pos + 4 + size > end:
                raise HandshakeError(f"{self.what} → extension {ext_type}: needs {size} bytes at byte {pos + 4}, "
                                     f"{end - pos - 4} left")
            if ext_type not in out:
                out[ext_type] = block[pos + 4:pos + 4 + size]
            pos += 4 + size
        return out


def client_hello(body: bytes) -> dict:
    """legacy_version, random, session_id, cipher_suites, server_name, supported_versions.

    One pass with plain indexing; a hello that does not fit is read again field by field
    (``_client_hello``) for the error that names the field."""
    try:
        end = len(body)
        pos = 35 + body[34]
        suites_end = pos + 2 + _u16(body, pos)[0]
        pos = suites_end + 1 + body[suites_end]
        ext = _extensions(body, pos, end) if pos < end else {}
        if pos > end or ext is None:
            return _client_hello(body)
        hello = {"legacy_version": _u16(body)[0], "random": body[2:34], "session_id": body[35:35 + body[34]],
                 "cipher_suites": body[35 + body[34] + 2:suites_end], "server_name": None,
                 "supported_versions": [], "session_ticket": EXT_SESSION_TICKET in ext,
                 "pre_shared_key": EXT_PRE_SHARED_KEY in ext}
        sni = ext.get(EXT_SERVER_NAME)
        if sni:
            start, stop = sni
            if stop - start < 2 or start + 2 + _u16(body, start)[0] != stop:
                return _client_hello(body)
            pos = start + 2
            while pos < stop:
                if pos + 3 > stop or pos + 3 + _u16(body, pos + 1)[0] > stop:
                    return _client_hello(body)
                size = _u16(body, pos + 1)[0]
                if body[pos] == 0:
                    hello["server_name"] = body[pos + 3:pos + 3 + size].decode("ascii", "replace")
                    break
                pos += 3 + size
        versions = ext.get(EXT_SUPPORTED_VERSIONS)
        if versions:
            start, stop = versions
            if start + 1 + body[start] > stop:
                return _client_hello(body)
            listed = body[start + 1:start + 1 + body[start]]
            hello["supported_versions"] = [_u16(listed, i)[0] for i in range(0, len(listed) - 1, 2)]
        return hello
    except (IndexError, struct.error):
        return _client_hello(body)


def hello_extensions_py(body: bytes, pos: int, end: int) -> dict | None:
    """extension_type → (start, stop) of its data (the first of a type; only the types the hellos
    read), from the extensions vector at ``pos``; None when it does not fit. The twin of
    native/_tls.c's hello_extensions, used where that is not built."""
    if pos + 2 > end:
        return None
    stop = pos + 2 + _u16(body, pos)[0]
    if stop > end:
        return None
    out: dict = {}
    pos += 2
    while pos < stop:
        if stop - pos < 4:
            return None
        ext_type, size = _u16x2(body, pos)
        pos += 4 + size
        if pos > stop:
            return None
        if ext_type in _READ and ext_type not in out:
            out[ext_type] = (pos - size, pos)
    return out


_extensions = _native.hello_extensions if _native is not None else hello_extensions_py


def server_hello(body: bytes) -> dict:
    """version (supported_versions when present), random, session_id, cipher_suite, retry."""
    try:
        end = len(body)
        pos = 35 + body[34]
        if pos + 3 > end:
            return _server_hello(body)
        ext = _extensions(body, pos + 3, end) if pos + 3 < end else {}
        if ext is None:
            return _server_hello(body)
        version = _u16(body)[0]
        chosen = ext.get(EXT_SUPPORTED_VERSIONS)
        if chosen is not None:
            if chosen[1] - chosen[0] != 2:
                return _server_hello(body)
            version = _u16(body, chosen[0])[0]
        random = body[2:34]
        return {"version": version, "random": random, "session_id": body[35:pos], "cipher_suite": _u16(body, pos)[0],
                "retry": random == HELLO_RETRY_RANDOM}
    except (IndexError, struct.error):
        return _server_hello(body)


def _client_hello(body: bytes) -> dict:
    """client_hello, field by field: a hello that does not fit raises HandshakeError naming the field."""
    c = _Cursor(body, "ClientHello")
    version = c.u16("legacy_version")
    random = c.take(32, "random")
    session_id = c.vector(1, "legacy_session_id")
    suites = c.vector(2, "cipher_suites")
    c.vector(1, "legacy_compression_methods")
    ext = c.extensions()
    hello = {"legacy_version": version, "random": random, "session_id": session_id,
             "cipher_suites": suites,  # the raw list: kinspect needs only the server's choice
             "server_name": None, "supported_versions": [], "session_ticket": 35 in ext,
             "pre_shared_key": 41 in ext}
    sni = ext.get(EXT_SERVER_NAME)
    if sni:
        names = _Cursor(sni, "ClientHello → server_name")
        names = _Cursor(names.vector(2, "server_name_list"), "ClientHello → server_name_list")
        while names.pos < len(names.data):
            name_type = names.u8("name_type")
            name = names.vector(2, "host_name")
            if name_type == 0:
                hello["server_name"] = name.decode("ascii", "replace")
                break
    versions = ext.get(EXT_SUPPORTED_VERSIONS)
    if versions:
        v = _Cursor(versions, "ClientHello → supported_versions")
        listed = v.vector(1, "versions")
        hello["supported_versions"] = [_u16(listed, i)[0] for i in range(0, len(listed) - 1, 2)]
    return hello


def _server_hello(body: bytes) -> dict:
    """server_hello, field by field (HandshakeError naming the field)."""
    c = _Cursor(body, "ServerHello")
    version = c.u16("legacy_version")
    random = c.take(32, "random")
    session_id = c.vector(1, "legacy_session_id_echo")
    suite = c.u16("cipher_suite")
    c.u8("legacy_compression_method")
    ext = c.extensions()
    chosen = ext.get(EXT_SUPPORTED_VERSIONS)
    if chosen is not None:
        if len(chosen) != 2:
            raise HandshakeError(f"ServerHello → supported_versions: {len(chosen)} bytes, not 2")
        version = _u16(chosen)[0]
    return {"version": version, "random": random, "session_id": session_id, "cipher_suite": suite,
            "retry": random == HELLO_RETRY_RANDOM}
