"""The TLS layer: the stream events (capture/stream.py) in, the same events out with plaintext inside.

It sits between TCP reassembly and the Kafka session (pipeline.py routes the events). A
direction's first bytes decide: a ClientHello (on any port) makes its connection TLS, anything
else is passed on and forgotten, so a plaintext connection costs one dict lookup per event.

For a TLS connection the records are framed (records.py), the hellos read (handshake.py), and
the keys looked up in the key log by the client random when the first protected record comes
(keys.py). Application data goes on as ``StreamData`` holding plaintext; handshake records,
alerts and ChangeCipherSpec go no further. In TLS 1.3 the application keys are tried first
(``_trial``): the records before the first one they open were the handshake flight, which holds
nothing kinspect needs, so the handshake keys are made only when that fails (damage): then the
held records go the long way, opened under the handshake keys and read up to Finished. A
KeyUpdate moves its direction to the next secret; NewSessionTicket is passed over. In the steady
state a direction's records are opened in one loop (``RecordKeys.open_run``).

Trouble is a notice record (a dict) among the events, and never stops the other connections:

- ``tls_no_keys``: the key log has no secrets for the connection (one per connection, when it
  closes: server name, version, cipher suite, bytes, and what to pass);
- ``tls_unsupported``: a cipher suite kinspect does not decrypt (CBC, export...);
- ``tls_auth``: a record did not authenticate: direction, stream offset, cause. Its bytes become
  a gap for the session and the next records are still opened (their sequence numbers are
  known); a direction whose first record fails, or several in a row, stops there. A connection
  shows NOTICES_SHOWN of them, and one more at its close counts the rest (``"more": N``);
- ``tls_gap``: bytes of a TLS stream never captured: record framing and sequence numbers are
  lost, so that direction is not decrypted any further;
- ``tls_stopped``: a record header or handshake message that cannot be read, or renegotiation;
- ``tls_no_handshake``: TLS records from a connection whose handshake the capture missed.

``more_keys`` (a callable, set by the pipeline) is asked once when a connection's keys are
missing: it reads secrets that came later (a pcapng Decryption Secrets Block, a key-log file that
grew). With ``patience`` seconds (a live capture), the connection's protected records are held
(bounded) and tried again on each ``tick(now)`` until then.
"""

from __future__ import annotations

from collections import OrderedDict

from kinspect.addresses import format_addr
from kinspect.capture.stream import StreamData, StreamEnd, StreamGap
from kinspect.tls import keylog as kl
from kinspect.tls.handshake import (CLIENT_HELLO, FINISHED, HELLO_REQUEST, KEY_UPDATE, SERVER_HELLO, HandshakeError,
                                    HandshakeReader, client_hello, server_hello, version_name)
from kinspect.tls.keys import SUITES, RecordKeys, next_traffic_secret, suite_name, tls12_keys, tls13_keys
from kinspect.tls.records import (ALERT, APPLICATION_DATA, CHANGE_CIPHER_SPEC, HANDSHAKE, HEADER, RecordReader,
                                  plausible_header, record_length)

HINT = "pass --keylog FILE (the client's SSLKEYLOGFILE, or Python's SSLContext.keylog_filename)"
MAX_FAILURES = 4  # records in a row that do not authenticate before a direction is given up
MAX_HELD = 4 << 20  # protected bytes held per direction while waiting for keys (live capture)
MAX_TRIAL = 16  # TLS 1.3: records held while the application keys are on trial (_trial)
MAX_TRIAL_BYTES = 1 << 18
TRY_ALL = 6  # TLS 1.3: records on trial from which every record is tried (_hold)
MAX_MARKS = 1 << 16  # connection labels remembered for marking their exchanges
# Notices of one kind a connection shows (records that do not open); the rest are counted, and
# one more notice at its close says how many (``"more": N``), as wire/exchange.py does
NOTICES_SHOWN = 10
TLS13 = 0x0304
_UNDECIDED = b""
_MARKS: dict = {}  # (version, cipher suite name) → the "tls" mark of exchanges
# TLS 1.3 suite → the size of a protected record holding only Finished, unpadded (RFC 8446 4.4.4, 5.2)
_FINISHED_RECORD = {code: 4 + (48 if suite.hash == "sha384" else 32) + 1 + 16
                    for code, suite in SUITES.items() if suite.tls13}
_EMPTY_EXTENSIONS = 4 + 2  # the smallest EncryptedExtensions message (RFC 8446 4.3.1)
# the handshake messages a direction's reader keeps: the hellos, then what the protected
# handshake may hold that matters (Finished, KeyUpdate; renegotiation in TLS 1.2)
_KEEP_CLIENT_HELLO, _KEEP_SERVER_HELLO = frozenset({CLIENT_HELLO}), frozenset({SERVER_HELLO})
_KEEP_TLS13 = frozenset({FINISHED, KEY_UPDATE})
_KEEP_TLS12_CLIENT, _KEEP_TLS12_SERVER = frozenset({CLIENT_HELLO, FINISHED}), frozenset({HELLO_REQUEST, FINISHED})


def _reverse(flow):
    src, sport, dst, dport = flow
    return (dst, dport, src, sport)


class _Dir:
    """One direction of a TLS connection."""

    __slots__ = ("conn", "flow", "side", "records", "hs", "protected", "keys", "next_secret", "opened",
                 "failures", "dead", "ended", "held", "held_bytes", "trial", "trial_bytes", "try_next", "hs_secret")

    def __init__(self, conn: "_Conn", flow, side: str, keep) -> None:
        self.conn = conn
        self.flow = flow
        self.side = side  # "client" or "server"
        self.records = RecordReader()
        self.hs = HandshakeReader(keep)  # plaintext handshake, then (1.3) the protected one
        self.protected = False  # records are under keys from here on
        self.keys: RecordKeys | None = None
        self.next_secret: bytes | None = None  # TLS 1.3: the application secret after Finished
        self.opened = 0  # records that authenticated
        self.failures = 0  # in a row
        self.dead: str | None = None  # why this direction is no longer decrypted
        self.ended = False
        self.held: list | None = None  # protected records waiting for keys
        self.held_bytes = 0
        # TLS 1.3: the application keys on trial (see _trial): the records that did not open
        # under them, and the handshake traffic secret that opens those
        self.trial: list | None = None
        self.trial_bytes = 0
        self.try_next = False  # whether the next record may be the first under the application keys
        self.hs_secret: bytes | None = None


class _Conn:
    __slots__ = ("label", "client", "server", "hello", "shello", "version", "tls13", "suite_code", "keys_state",
                 "bytes", "waiting_since", "reported", "blind", "folded")

    def __init__(self, client_flow) -> None:
        src, sport, dst, dport = client_flow
        self.label = f"{format_addr(src, sport)}-{format_addr(dst, dport)}"
        self.client = _Dir(self, client_flow, "client", _KEEP_CLIENT_HELLO)
        self.server = _Dir(self, _reverse(client_flow), "server", _KEEP_SERVER_HELLO)
        self.hello: dict | None = None
        self.shello: dict | None = None
        self.version: int | None = None
        self.tls13 = False  # the ServerHello said TLS 1.3
        self.suite_code: int | None = None
        self.keys_state: str | None = None  # None: not looked up; "ok"; "missing"; "unsupported"; "waiting"
        self.bytes = 0  # TLS bytes seen, both directions
        self.waiting_since: float | None = None
        self.reported = False
        self.blind = False  # its handshake was not captured
        self.folded: dict | None = None  # notice kind -> how many (NOTICES_SHOWN are shown)

    def describe(self) -> str:
        parts = [version_name(self.version) if self.version else "TLS"]
        name = (self.hello or {}).get("server_name")
        if name:
            parts.append(f"to {name!r}")
        if self.suite_code is not None:
            parts.append(f"with {suite_name(self.suite_code)}")
        return " ".join(parts)

    def facts(self) -> dict:
        return {"server_name": (self.hello or {}).get("server_name"),
                "tls_version": version_name(self.version) if self.version else None,
                "cipher": suite_name(self.suite_code) if self.suite_code is not None else None,
                "bytes": self.bytes}


class TlsLayer:
    """Sans-I/O: ``start``/``data``/``gap``/``end`` for the flows in ``watch`` (``start`` puts
    every new direction there), each returning a list of stream events and notice dicts."""

    def __init__(self, keylog: kl.KeyLog | None = None, more_keys=None, patience: float = 0.0) -> None:
        self.keylog = keylog if keylog is not None else kl.KeyLog()
        self.more_keys = more_keys
        self.patience = patience
        self.watch: dict = {}  # flow → _Dir, or bytes held while its first record header is incomplete
        self.marks: OrderedDict = OrderedDict()  # label → {"version", "cipher"} of decrypted connections
        self.marks_peak = 0  # the most labels marks has held
        self.waiting: dict = {}  # label → _Conn waiting for keys (patience)
        self.connections = 0  # TLS connections seen
        self.decrypted = 0  # of which decrypted
        self.undecrypted = 0  # reported without keys, unsupported, or without their handshake

    # -- stream events --------------------------------------------------------------------------

    def start(self, flow) -> None:
        if flow not in self.watch:
            self.watch[flow] = _UNDECIDED

    def data(self, flow, ts: float, data) -> list:
        d = self.watch.get(flow)
        if type(d) is _Dir:
            return self._records(d, ts, data)
        if d is None:
            return [StreamData(flow, ts, data)]
        return self._first(flow, ts, d + bytes(data) if d else data)

    def gap(self, flow, ts: float, missing: int) -> list:
        d = self.watch.get(flow)
        if type(d) is not _Dir:
            out = self._undecided_out(flow, ts)
            self.watch.pop(flow, None)
            return out + [StreamGap(flow, ts, missing)]
        if d.dead is None:
            conn = d.conn
            early = self._untried(d, ts)
            if conn.keys_state == "ok" or not d.protected:
                out = self._stop(d, ts, "tls_gap", f"{missing} bytes of the {d.side}'s TLS stream were not captured: "
                                 f"record framing and sequence numbers are lost, the rest of this direction "
                                 f"is not decrypted", missing=missing, offset=d.records.offset)
                return early + out + [StreamGap(flow, ts, missing)]
            d.dead = "gap"
            return early
        return []

    def end(self, flow, ts: float, reason: str) -> list:
        d = self.watch.pop(flow, None)
        if type(d) is not _Dir:
            if d:  # held first bytes, never decided: give them on as they are
                return [StreamData(flow, ts, d), StreamEnd(flow, ts, reason)]
            return [StreamEnd(flow, ts, reason)]
        out = self._untried(d, ts) if d.trial else []
        d.ended = True
        conn = d.conn
        other = conn.server if d is conn.client else conn.client
        if other.ended or reason in ("expired", "idle"):
            if not other.ended:
                if other.trial:
                    out += self._untried(other, ts)
                other.ended = True
                self.watch.pop(other.flow, None)
            out += self._close(conn, ts)
        out.append(StreamEnd(flow, ts, reason))
        return out

    def tick(self, now: float) -> list:
        """A live source's pause: connections waiting for keys try again, or give up."""
        out: list = []
        if not self.waiting:
            return out
        if self.more_keys is not None:
            self.more_keys()
        for conn in list(self.waiting.values()):
            out += self._retry(conn, now)
        return out

    def finish(self, ts: float) -> list:
        """Connections never ended by the stream (the pipeline ends them all first, normally)."""
        out: list = []
        for flow, d in list(self.watch.items()):
            out += self.end(flow, ts, "capture_end")
        return out

    # -- deciding --------------------------------------------------------------------------------

    def _first(self, flow, ts: float, data) -> list:
        if not data:
            return []
        if len(data) < 6 and data[:1] in (b"\x14", b"\x15", b"\x16", b"\x17") and data[1:2] in (b"", b"\x03"):
            self.watch[flow] = bytes(data)  # maybe a record header: wait for its first bytes
            return []
        if len(data) >= 6 and data[0] == HANDSHAKE and data[5] == CLIENT_HELLO and plausible_header(data):
            conn = _Conn(flow)
            self.connections += 1
            self.watch[flow] = conn.client
            back = conn.server.flow
            if self.watch.get(back, _UNDECIDED) == _UNDECIDED:  # a reply already passed on stays plaintext
                self.watch[back] = conn.server
            return self._records(conn.client, ts, data)
        if data[0] in (APPLICATION_DATA, HANDSHAKE, ALERT) and plausible_header(data):
            # TLS whose ClientHello the capture missed: it cannot be decrypted, and must not be
            # taken for Kafka. One notice; both directions' bytes are counted and dropped.
            conn = _Conn(flow)
            conn.blind = True
            self.connections += 1
            self.undecrypted += 1
            self.watch[flow] = conn.client
            back = conn.server.flow
            if self.watch.get(back, _UNDECIDED) == _UNDECIDED:
                self.watch[back] = conn.server
            conn.client.dead = conn.server.dead = "no handshake"
            conn.bytes += len(data)
            conn.reported = True
            return [self._notice(conn, ts, "tls_no_handshake",
                                 "TLS records from a connection whose handshake the capture does not hold "
                                 "(it began before the capture): it cannot be decrypted", side="client")]
        del self.watch[flow]
        return [StreamData(flow, ts, data)]

    def _undecided_out(self, flow, ts: float) -> list:
        held = self.watch.get(flow)
        return [StreamData(flow, ts, held)] if held else []

    # -- records ---------------------------------------------------------------------------------

    def _records(self, d: _Dir, ts: float, data) -> list:
        conn = d.conn
        conn.bytes += len(data)
        if d.dead is not None:
            return []
        reader = d.records
        out: list = []
        plain: list = []
        while d.protected and d.keys is not None and d.dead is None and not reader.held and reader.error is None:
            if d.trial is None:
                # under keys already installed: whole records opened in one loop (keys.py); a TLS
                # 1.3 record holding something else than application data comes back to be handled
                used, opened, other = d.keys.open_run(data, plain)
                if not used:
                    break
                start = reader.offset
                reader.offset = start + used
                d.opened += opened
                d.failures = 0
                if other is not None:
                    inner, content, pos, size = other
                    if inner == HANDSHAKE:  # Finished, KeyUpdate, tickets
                        if plain:
                            out.append(StreamData(d.flow, ts, b"".join(plain)))
                            plain.clear()
                        self._protected_handshake(d, ts, content, out)
                    else:
                        self._inner(d, ts, inner, content, start + pos, size, plain, out)
            else:
                # TLS 1.3, the application keys on trial: one record at a time, so that the
                # records after the first that opens go the steady way above
                if len(data) < HEADER:
                    break
                used = HEADER + record_length(data)
                if used > len(data):
                    break
                self._framed(d, ts, reader.feed(memoryview(data)[:used]), plain, out)
            if used == len(data):
                if plain:
                    out.append(StreamData(d.flow, ts, plain[0] if len(plain) == 1 else b"".join(plain)))
                return out
            data = memoryview(data)[used:]
        self._framed(d, ts, reader.feed(data), plain, out)
        if reader.error is not None and d.dead is None:
            if plain:
                out.append(StreamData(d.flow, ts, b"".join(plain)))
                plain = []
            out += self._stop(d, ts, "tls_stopped", reader.error + "; the rest of this direction is not decrypted",
                              offset=reader.offset)
        if plain:
            out.append(StreamData(d.flow, ts, plain[0] if len(plain) == 1 else b"".join(plain)))
        return out

    def _framed(self, d: _Dir, ts: float, records: list, plain: list, out: list) -> None:
        """Records framed by the direction's reader, each to where it goes."""
        conn = d.conn
        i, count = 0, len(records)
        while i < count:
            ctype, version, fragment, offset = records[i]
            i += 1
            if d.dead is not None:
                break
            if not d.protected:
                if ctype == HANDSHAKE:
                    if conn.shello is None or conn.tls13:
                        room = d.hs.room()
                        if not room or len(fragment) > room:
                            self._handshake(d, ts, fragment, out)
                            continue
                        # records that only continue a message (or one passed over): taken
                        # whole at once, no message can end among them (linear in the records)
                        pieces, size = [fragment], len(fragment)
                        while i < count and records[i][0] == HANDSHAKE and size + len(records[i][2]) <= room:
                            pieces.append(records[i][2])
                            size += len(records[i][2])
                            i += 1
                        d.hs.take(pieces, size)
                    # else TLS 1.2 after the ServerHello: Certificate to ClientKeyExchange, nothing to read
                elif ctype == CHANGE_CIPHER_SPEC and conn.suite_code is not None and not conn.tls13:
                    d.protected = True  # TLS 1.2: what follows is under this side's keys
                    d.hs.restart()  # and its handshake (Finished) starts on a message boundary
                continue
            if conn.tls13 and ctype != APPLICATION_DATA:
                continue  # ChangeCipherSpec for middleboxes, or an alert sent in the clear
            if d.keys is None and not self._keys(d, ts, out):
                if conn.keys_state == "waiting" and d.held is not None:
                    if d.held_bytes + len(fragment) <= MAX_HELD:
                        d.held.append((ctype, version, bytes(fragment), offset))
                        d.held_bytes += len(fragment)
                    else:
                        self._give_up(conn, ts, out)
                continue
            if d.trial is not None and not d.try_next:
                self._hold(d, ts, ctype, version, fragment, offset, plain, out)
            else:
                self._open(d, ts, ctype, version, fragment, offset, plain, out)

    def _open(self, d: _Dir, ts: float, ctype: int, version: int, fragment, offset: int, plain: list, out: list) -> None:
        if d.trial is not None:
            (self._trial if d.try_next else self._hold)(d, ts, ctype, version, fragment, offset, plain, out)
            return
        try:
            inner, content = d.keys.open_inner(ctype, version, fragment)
        except Exception as e:  # InvalidTag, or a record too short for its cipher
            self._failed(d, ts, offset, len(fragment), e, plain, out)
            return
        self._opened(d, ts, inner, content, offset, len(fragment), plain, out)

    def _opened(self, d: _Dir, ts: float, inner: int, content, offset: int, size: int, plain: list,
                out: list) -> None:
        """A record that opened: application data to ``plain``, anything else to ``_inner``."""
        d.opened += 1
        d.failures = 0
        if inner == APPLICATION_DATA:
            if content:
                plain.append(content if type(content) is bytes else bytes(content))
        else:
            self._inner(d, ts, inner, content, offset, size, plain, out)

    def _trial(self, d: _Dir, ts: float, ctype: int, version: int, fragment, offset: int, plain: list,
               out: list) -> None:
        """TLS 1.3 before a direction's first application record: the application keys are tried
        on each record. The records before the one that opens were the handshake flight
        (EncryptedExtensions, Certificate..., Finished: nothing kinspect needs), so the handshake
        keys are never made nor those records opened. A record that does not open is held
        (bounded); past MAX_TRIAL of them, or when the direction ends or has a gap first, they
        go the long way (``_fallback``): handshake keys, Finished, then the application keys, so
        damage is reported as it would have been. A direction's first protected record is never
        tried: it is the server's EncryptedExtensions or the client's first flight message (or
        0-RTT data), never under the application keys (RFC 8446 2, 4.3.1). Nor is a record that
        follows one which cannot have ended the flight (``_hold`` decides): against a server that
        sends EncryptedExtensions, Certificate, CertificateVerify and Finished in records of their
        own (OpenSSL), no try fails."""
        keys = d.keys
        try:
            inner, content = keys.open_inner(ctype, version, fragment)
        except Exception:  # InvalidTag: a handshake record (or damage)
            keys.seq = 0
            self._hold(d, ts, ctype, version, fragment, offset, plain, out)
            return
        d.trial, d.trial_bytes, d.hs_secret, d.try_next = None, 0, None, False
        self._opened(d, ts, inner, content, offset, len(fragment), plain, out)

    def _hold(self, d: _Dir, ts: float, ctype: int, version: int, fragment, offset: int, plain: list,
              out: list) -> None:
        """A record on trial that was not opened: held (bounded), and whether the record after it
        may be the first under the application keys decided: when this one is the direction's
        first protected record and the whole flight may be in it (the server's holds
        EncryptedExtensions and Finished at least: a smaller one cannot), is exactly a Finished
        message (4 + hash + content type + tag bytes; a flight ends with Finished), or when
        TRY_ALL records are held already (padding, or another split)."""
        trial = d.trial
        trial.append((ctype, version, bytes(fragment), offset))
        d.trial_bytes += len(fragment)
        if len(trial) > MAX_TRIAL or d.trial_bytes > MAX_TRIAL_BYTES:
            d.try_next = False
            self._fallback(d, ts, plain, out)
            return
        finished = _FINISHED_RECORD[d.conn.suite_code]
        if len(trial) == 1:
            d.try_next = d.side == "client" or len(fragment) >= finished + _EMPTY_EXTENSIONS
        else:
            d.try_next = len(trial) >= TRY_ALL or len(fragment) == finished

    def _fallback(self, d: _Dir, ts: float, plain: list, out: list) -> None:
        """The held records of a TLS 1.3 direction opened the long way: handshake keys first,
        the application keys after its Finished."""
        held, d.trial, d.trial_bytes = d.trial, None, 0
        suite = SUITES[d.conn.suite_code]
        d.next_secret = d.keys.secret
        d.keys = tls13_keys(suite, d.hs_secret)
        d.hs_secret = None
        for ctype, version, fragment, offset in held:
            if d.dead is None:
                self._open(d, ts, ctype, version, fragment, offset, plain, out)

    def _untried(self, d: _Dir, ts: float) -> list:
        """A direction that ends (or has a gap) with records on trial: the long way for them."""
        out: list = []
        if d.trial and d.dead is None:
            plain: list = []
            self._fallback(d, ts, plain, out)
            if plain:
                out.append(StreamData(d.flow, ts, b"".join(plain)))
        return out

    def _inner(self, d: _Dir, ts: float, inner: int, content, offset: int, size: int, plain: list, out: list) -> None:
        """An opened record that is not application data: handshake (Finished, KeyUpdate,
        tickets), an alert (passed over), or none at all."""
        if inner == HANDSHAKE:
            if plain:
                out.append(StreamData(d.flow, ts, b"".join(plain)))
                plain.clear()
            self._protected_handshake(d, ts, content, out)
        elif inner == 0:
            self._failed(d, ts, offset, size, "no content type (all padding)", plain, out)

    def _failed(self, d: _Dir, ts: float, offset: int, size: int, cause, plain: list, out: list) -> None:
        if plain:
            out.append(StreamData(d.flow, ts, b"".join(plain)))
            plain.clear()
        d.failures += 1
        why = type(cause).__name__ if isinstance(cause, Exception) and not str(cause) else str(cause)
        if isinstance(cause, Exception) and type(cause).__name__ == "InvalidTag":
            why = "authentication tag mismatch (bytes damaged, or not these keys)"
        if not d.opened:
            out += self._stop(d, ts, "tls_auth",
                              f"the first protected record from the {d.side} does not open: {why}; the key log's "
                              f"secrets do not fit this connection, so this direction is not decrypted",
                              offset=offset)
            return
        if d.failures >= MAX_FAILURES:
            out += self._stop(d, ts, "tls_auth", f"{d.failures} records in a row from the {d.side} do not open "
                              f"(last: {why}); this direction is not decrypted any further", offset=offset)
            return
        if self._shown(d.conn, "tls_auth"):
            out.append(self._notice(d.conn, ts, "tls_auth", f"a {size}-byte record from the {d.side} at stream "
                                    f"byte {offset} does not open: {why}; it is skipped, the next records are still "
                                    f"opened", side=d.side, offset=offset))
        out.append(StreamGap(d.flow, ts, max(size - 17, 1)))

    # -- handshake -------------------------------------------------------------------------------

    def _handshake(self, d: _Dir, ts: float, fragment, out: list) -> None:
        conn = d.conn
        for msg_type, body in d.hs.feed(fragment):
            try:
                if msg_type == CLIENT_HELLO:
                    conn.hello = client_hello(body)  # a second one after a HelloRetryRequest replaces it
                elif msg_type == SERVER_HELLO:
                    shello = server_hello(body)
                    if shello["retry"]:
                        conn.suite_code = shello["cipher_suite"]
                        continue  # HelloRetryRequest: a new ClientHello and the real ServerHello follow
                    conn.shello = shello
                    conn.version = shello["version"]
                    conn.tls13 = conn.version == TLS13
                    conn.suite_code = shello["cipher_suite"]
                    # the readers go on (a message may be cut between records); what they keep changes
                    if conn.tls13:
                        d.protected = conn.client.protected = True
                        d.hs.keep = conn.client.hs.keep = _KEEP_TLS13
                    else:
                        conn.client.hs.keep = _KEEP_TLS12_CLIENT
                        d.hs.keep = _KEEP_TLS12_SERVER
            except HandshakeError as e:
                out += self._stop(d, ts, "tls_stopped", f"{e}; this connection is not decrypted")
                d.conn.client.dead = d.conn.server.dead = "bad hello"
                return
        if d.hs.error is not None:
            out += self._stop(d, ts, "tls_stopped", d.hs.error)

    def _protected_handshake(self, d: _Dir, ts: float, content, out: list) -> None:
        conn = d.conn
        for msg_type, body in d.hs.feed(content):
            if not conn.tls13:
                if msg_type != FINISHED:  # HelloRequest or ClientHello: renegotiation
                    out += self._stop(d, ts, "tls_stopped", "TLS 1.2 renegotiation: the new keys are not in the "
                                      "key log's entry for this connection; this direction is not decrypted further")
                    return
                continue
            if msg_type == FINISHED and d.next_secret is not None:
                suite = SUITES[conn.suite_code]
                d.keys = tls13_keys(suite, d.next_secret)  # the application traffic keys from here
                d.next_secret = None
            elif msg_type == KEY_UPDATE and d.keys is not None and d.next_secret is None:
                suite = SUITES[conn.suite_code]
                d.keys = tls13_keys(suite, next_traffic_secret(suite, d.keys.secret))
        if d.hs.error is not None:
            out += self._stop(d, ts, "tls_stopped", d.hs.error)

    # -- keys --------------------------------------------------------------------------------------

    def _keys(self, d: _Dir, ts: float, out: list) -> bool:
        """Install the connection's keys when its first protected record comes; False: none."""
        conn = d.conn
        if conn.keys_state == "ok":
            return d.keys is not None
        if conn.keys_state in ("missing", "unsupported"):
            return False
        if conn.keys_state == "waiting":  # the held records first, in their order
            out += self._retry(conn, ts)
            return conn.keys_state == "ok"
        state = self._lookup(conn, ts)
        if state == "missing" and self.patience > 0:
            conn.keys_state = "waiting"
            conn.waiting_since = ts
            conn.client.held, conn.server.held = [], []
            self.waiting[conn.label] = conn
            return False
        conn.keys_state = state
        return state == "ok"

    def _lookup(self, conn: _Conn, ts: float) -> str:
        """"ok" (keys installed on both directions), "missing" or "unsupported"."""
        if conn.hello is None or conn.shello is None:
            return "missing"
        suite = SUITES.get(conn.suite_code)
        if suite is None or suite.tls13 != conn.tls13:
            return "unsupported"
        secrets = self.keylog.get(conn.hello["random"])
        if not self._complete(secrets, conn) and self.more_keys is not None:
            self.more_keys()
            secrets = self.keylog.get(conn.hello["random"])
        if not self._complete(secrets, conn):
            return "missing"
        if conn.tls13:  # the application keys on trial; the handshake's only if they are needed
            for d, hs, ap in ((conn.client, kl.CLIENT_HS, kl.CLIENT_AP), (conn.server, kl.SERVER_HS, kl.SERVER_AP)):
                d.keys = tls13_keys(suite, secrets[ap])
                d.hs_secret = secrets[hs]
                d.trial, d.trial_bytes = [], 0
        else:
            conn.client.keys, conn.server.keys = tls12_keys(suite, secrets[kl.MASTER], conn.hello["random"],
                                                            conn.shello["random"])
        conn.keys_state = "ok"
        self.decrypted += 1
        self.waiting.pop(conn.label, None)
        mark = _MARKS.get((conn.version, suite.name))
        if mark is None:  # one dict per kind, shared by the records it marks (they only read it)
            mark = _MARKS[conn.version, suite.name] = {"version": version_name(conn.version), "cipher": suite.name}
        self.marks[conn.label] = mark
        self.marks_peak = max(self.marks_peak, len(self.marks))
        if len(self.marks) > MAX_MARKS:
            self.marks.popitem(last=False)
        return "ok"

    @staticmethod
    def _complete(secrets, conn: _Conn) -> bool:
        if secrets is None:
            return False
        if conn.tls13:
            return (kl.CLIENT_HS in secrets and kl.SERVER_HS in secrets and kl.CLIENT_AP in secrets
                    and kl.SERVER_AP in secrets)
        return kl.MASTER in secrets

    def _retry(self, conn: _Conn, now: float) -> list:
        out: list = []
        if self._lookup(conn, now) == "ok":
            for d in (conn.client, conn.server):
                held, d.held, d.held_bytes = d.held or [], None, 0
                plain: list = []
                for ctype, version, fragment, offset in held:
                    if d.dead is None:
                        self._open(d, now, ctype, version, fragment, offset, plain, out)
                if plain:
                    out.append(StreamData(d.flow, now, b"".join(plain)))
        elif now - (conn.waiting_since or now) >= self.patience:
            self._give_up(conn, now, out)
        return out

    def _give_up(self, conn: _Conn, ts: float, out: list) -> None:
        conn.keys_state = "missing"
        self.waiting.pop(conn.label, None)
        for d in (conn.client, conn.server):
            d.held, d.held_bytes = None, 0

    # -- notices -----------------------------------------------------------------------------------

    def _close(self, conn: _Conn, ts: float) -> list:
        self.waiting.pop(conn.label, None)
        conn.client.conn = conn.server.conn = None  # no cycle left for the GC
        out = self._folded(conn, ts)
        if conn.reported or conn.blind:
            return out
        conn.reported = True
        return out + self._unread(conn, ts)

    @staticmethod
    def _shown(conn: _Conn, kind: str) -> bool:
        """Whether a notice of ``kind`` is shown, or only counted (see NOTICES_SHOWN)."""
        folded = conn.folded
        if folded is None:
            folded = conn.folded = {}
        count = folded[kind] = folded.get(kind, 0) + 1
        return count <= NOTICES_SHOWN

    def _folded(self, conn: _Conn, ts: float) -> list:
        """One notice per kind of which more were counted than shown."""
        out = []
        for kind, count in (conn.folded or {}).items():
            if count > NOTICES_SHOWN:
                more = count - NOTICES_SHOWN
                out.append(self._notice(conn, ts, kind, f"{more} more {kind} notices on this connection like the "
                                        f"ones above ({count} in all; the first {NOTICES_SHOWN} are shown)",
                                        more=more))
        conn.folded = None
        return out

    def _unread(self, conn: _Conn, ts: float) -> list:
        """The notice of a connection that was not decrypted, and why."""
        if conn.keys_state in ("missing", "waiting"):
            self.undecrypted += 1
            return [self._notice(conn, ts, "tls_no_keys",
                                 f"{conn.describe()}: {conn.bytes} bytes not decrypted, the key log has no "
                                 f"secrets for it; {HINT}", hint=HINT)]
        if conn.keys_state == "unsupported":
            self.undecrypted += 1
            return [self._notice(conn, ts, "tls_unsupported",
                                 f"{conn.describe()}: {conn.bytes} bytes not decrypted: kinspect decrypts TLS 1.2 "
                                 f"and 1.3 with AES-GCM and ChaCha20-Poly1305 only")]
        return []

    def _stop(self, d: _Dir, ts: float, kind: str, what: str, **extra) -> list:
        d.dead = kind
        d.held, d.held_bytes = None, 0
        return [self._notice(d.conn, ts, kind, what, side=d.side, **extra)]

    @staticmethod
    def _notice(conn: _Conn, ts: float, kind: str, what: str, **extra) -> dict:
        notice = {"type": "notice", "conn": conn.label, "time": ts, "kind": kind, "what": what}
        notice.update(conn.facts())
        notice.update(extra)
        return notice
