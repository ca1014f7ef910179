"""Fuzz the TLS layer (kinspect/tls) and its C loops (kinspect/native/_tls.c).

Input: one byte choosing what to exercise (formats.TLS_*), then:
- frame: one direction's bytes; C framing = Python (records.py frame_py);
- extensions: a position byte, then a hello body; C = Python (handshake.py hello_extensions_py), and
  client_hello/server_hello raise nothing but HandshakeError;
- keylog: key-log text; the KeyLog read by C = by Python (secrets in order, counts, bad lines);
- records: a mode byte (formats.TLS_SUITES), then a record stream opened with the fixed keys
  (formats.tls_fixed_keys); C open_run = Python's, results and sequence numbers alike;
- layer: a key log and a conversation (formats.tls_conversation); TlsLayer's events and notices
  are the same with the C loops and with their Python twins, and nothing escapes either.
"""

import formats
import harness

with harness.instrumented("kinspect.tls"):
    from kinspect import native
    from kinspect.capture.stream import StreamData, StreamEnd, StreamGap
    from kinspect.tls import handshake, keylog, keys, records
    from kinspect.tls.layer import TlsLayer

C = native.tls
CLIENT = (b"\x0a\x00\x00\x01", 50000, b"\x0a\x00\x00\x02", 9093)
SERVER = (CLIENT[2], CLIENT[3], CLIENT[0], CLIENT[1])


class _Python:
    """The Python twins in place of the C loops, for the length of a with block."""

    def __enter__(self):
        self.saved = keys._native, keylog._native, records._frame, handshake._extensions
        keys._native = keylog._native = None
        records._frame, handshake._extensions = records.frame_py, handshake.hello_extensions_py

    def __exit__(self, *exc):
        keys._native, keylog._native, records._frame, handshake._extensions = self.saved


def _plain_records(found: tuple) -> tuple:
    records, pos, bad = found
    return [(t, v, bytes(f), o) for t, v, f, o in records], pos, bad


def _frame(data: bytes) -> None:
    fast = C.frame(data, 7, records.MAX_FRAGMENT)
    slow = records.frame_py(data, 7, records.MAX_FRAGMENT)
    harness.agree("frame", _plain_records(fast), _plain_records(slow))
    end = 0
    for ctype, version, fragment, offset in fast[0]:
        if offset - 7 != end or offset - 7 + 5 + len(fragment) > len(data):
            raise harness.Finding(f"record at {offset} does not follow the one before it")
        end = offset - 7 + 5 + len(fragment)


def _extensions(data: bytes) -> None:
    body = data[1:]
    pos = data[0] % (len(body) + 1) if data else 0
    harness.agree("hello_extensions", C.hello_extensions(body, pos, len(body)),
                  handshake.hello_extensions_py(body, pos, len(body)))
    for parse in (handshake.client_hello, handshake.server_hello):
        try:
            parse(body)
        except handshake.HandshakeError:
            pass


def _keylog_state(text: bytes) -> tuple:
    log = keylog.KeyLog()
    added = log.add_text(text, "fuzz.log")
    return added, log._runs, list(log.items()), log.lines, log.unused, log.bad_lines, log.first_bad


def _keylog(text: bytes) -> None:
    fast = _keylog_state(text)
    with _Python():
        harness.agree("keylog", fast, _keylog_state(text))


def _opened(run, mode: int, data: bytes) -> tuple:
    suite = keys.SUITES[formats.TLS_SUITES[mode]]
    rk = keys.RecordKeys(suite, *formats.tls_fixed_keys(suite))
    plain: list = []
    used, opened, other = run(rk, data, plain)
    if other is not None:
        other = (other[0], bytes(other[1]), other[2], other[3])
    return used, opened, other, [bytes(p) for p in plain], rk.seq


def _records(data: bytes) -> None:
    mode = data[0] % len(formats.TLS_SUITES) if data else 0
    stream = data[1:]
    fast = _opened(keys.RecordKeys.open_run, mode, stream)
    with _Python():
        slow = _opened(keys.RecordKeys.open_run, mode, stream)
    harness.agree("open_run", fast, slow)
    if fast[0] > len(stream):
        raise harness.Finding(f"open_run used {fast[0]} bytes of {len(stream)}")


def _events(text: bytes, chunks) -> list:
    layer = TlsLayer(keylog.KeyLog.from_text(text))
    out: list = []
    for flow in (CLIENT, SERVER):
        layer.start(flow)
    for side, data in chunks:  # an empty chunk: bytes of that side never captured
        flow = SERVER if side else CLIENT
        out += layer.data(flow, 1.0, data) if data else layer.gap(flow, 1.0, 17)
    out += layer.end(CLIENT, 1.0, "fin") + layer.end(SERVER, 1.0, "fin") + layer.finish(1.0)
    for event in out:
        if type(event) not in (dict, StreamData, StreamGap, StreamEnd):
            raise harness.Finding(f"the layer gave {event!r:.200}")
    return [e if type(e) is dict else (type(e).__name__, e[0], bytes(e[2]) if type(e) is StreamData else e[2])
            for e in out]


def _layer(data: bytes) -> None:
    cursor = formats.Cursor(data)
    text = cursor.sized()
    chunks = formats.tls_chunks(cursor)
    fast = _events(text, chunks)
    if C is not None:
        with _Python():
            harness.agree("layer events", fast, _events(text, chunks))


TARGETS = {formats.TLS_FRAME: _frame, formats.TLS_EXTENSIONS: _extensions, formats.TLS_KEYLOG: _keylog,
           formats.TLS_RECORDS: _records, formats.TLS_LAYER: _layer}


def target(data: bytes) -> None:
    if not data:
        return
    if C is None:  # only the Python side to exercise: the layer
        _layer(data[1:])
        return
    TARGETS[data[0] % len(TARGETS)](data[1:])


if __name__ == "__main__":
    harness.main(target, "tls")
