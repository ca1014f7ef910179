"""Fuzz TLS reassembly from fragments: handshake messages across records (kinspect/tls/handshake.py
HandshakeReader), records across TCP segments (records.py RecordReader), and the layer that
gives a run of small handshake records to the reader at once (layer.py).

Input: a mode byte, then piece sizes (a u8 count, then that many u8 sizes, 0 read as 1, used in
turn), then:
- mode 0 (reader): a byte whose bits choose the message types kept (CLIENT_HELLO, SERVER_HELLO,
  FINISHED, KEY_UPDATE, HELLO_REQUEST, CERTIFICATE), then handshake bytes;
- mode 1 (records): one direction's TLS bytes;
- mode 2 (layer): a key log and a conversation (formats.tls_conversation), its chunks.
Checks: no exception; the stream cut into pieces gives what it gives whole: the same messages and
error (pieces fed one by one, or runs of them taken up to room() as the layer does), the same
records and error, the same plaintext per direction and notices (facts that count bytes so far
aside); the reader never holds more than a kept message and a piece.
"""

import formats
import harness

with harness.instrumented("kinspect.tls"):
    from kinspect.capture.stream import StreamData, StreamEnd, StreamGap
    from kinspect.tls import handshake, keylog
    from kinspect.tls.layer import TlsLayer
    from kinspect.tls.records import RecordReader

TYPES = (handshake.CLIENT_HELLO, handshake.SERVER_HELLO, handshake.FINISHED, handshake.KEY_UPDATE,
         handshake.HELLO_REQUEST, handshake.CERTIFICATE)
CLIENT = (b"\x0a\x00\x00\x01", 50000, b"\x0a\x00\x00\x02", 9093)
SERVER = (CLIENT[2], CLIENT[3], CLIENT[0], CLIENT[1])


def _pieces(data: bytes, sizes: list[int]) -> list[bytes]:
    out, at, i = [], 0, 0
    while at < len(data):
        size = sizes[i % len(sizes)] if sizes else len(data)
        out.append(data[at:at + size])
        at += size
        i += 1
    return out


def _read(keep, pieces, runs: bool) -> tuple:
    reader = handshake.HandshakeReader(keep)
    got, i = [], 0
    most = handshake.MAX_MESSAGE + 4 + max(map(len, pieces), default=0)
    while i < len(pieces):
        room = reader.room()
        if not runs or not room or len(pieces[i]) > room:
            got += reader.feed(pieces[i])
            i += 1
        else:
            run, size = [], 0
            while i < len(pieces) and size + len(pieces[i]) <= room:
                run.append(pieces[i])
                size += len(pieces[i])
                i += 1
            reader.take(run, size)
        if reader.held > most:
            raise harness.Finding(f"the reader holds {reader.held} bytes")
    return got, reader.error


def _messages(data: bytes, sizes: list[int]) -> None:
    mask, stream = (data[0], data[1:]) if data else (0, b"")
    keep = frozenset(t for bit, t in enumerate(TYPES) if mask >> bit & 1)
    whole = _read(keep, [stream] if stream else [], False)
    pieces = _pieces(stream, sizes)
    harness.agree("handshake", _read(keep, pieces, False), whole, ("in pieces", "whole"))
    harness.agree("handshake", _read(keep, pieces, True), whole, ("in runs", "whole"))


def _records(stream: bytes, sizes: list[int]) -> None:
    def framed(pieces):
        reader = RecordReader()
        out = [(t, v, bytes(f), o) for piece in pieces for t, v, f, o in reader.feed(piece)]
        return out, reader.error, reader.offset if reader.error else reader.offset + reader.held

    harness.agree("records", framed(_pieces(stream, sizes)), framed([stream]), ("in pieces", "whole"))


def _events(text: bytes, chunks, sizes: list[int]) -> tuple:
    layer = TlsLayer(keylog.KeyLog.from_text(text))
    out: list = []
    for flow in (CLIENT, SERVER):
        layer.start(flow)
    for side, data in chunks:
        flow = SERVER if side else CLIENT
        for piece in _pieces(data, sizes):
            out += layer.data(flow, 1.0, piece)
    out += layer.end(CLIENT, 1.0, "fin") + layer.end(SERVER, 1.0, "fin") + layer.finish(1.0)
    plain = {CLIENT: b"", SERVER: b""}
    others = []
    for event in out:
        if type(event) is StreamData:
            plain[event.flow] += bytes(event.data)
        elif type(event) is dict:
            others.append({k: v for k, v in event.items() if k != "bytes"})
        elif type(event) in (StreamGap, StreamEnd):
            others.append((type(event).__name__, event.flow))
        else:
            raise harness.Finding(f"the layer gave {event!r:.200}")
    return plain, others


def _layer(data: bytes, sizes: list[int]) -> None:
    cursor = formats.Cursor(data)
    text = cursor.sized()
    chunks = formats.tls_chunks(cursor)
    harness.agree("layer", _events(text, chunks, sizes), _events(text, chunks, []), ("in pieces", "whole"))


def target(data: bytes) -> None:
    cursor = formats.Cursor(data)
    mode = cursor.u8() % 3
    sizes = [size or 1 for size in cursor.take(cursor.u8())]
    rest = cursor.rest()
    (_messages, _records, _layer)[mode](rest, sizes)


if __name__ == "__main__":
    harness.main(target, "tls_handshake")
