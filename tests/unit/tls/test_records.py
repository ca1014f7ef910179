"""records.py: records split over TCP segments at every byte, many records in one, and a header
that cannot be TLS."""

import os

from kinspect.tls.records import MAX_FRAGMENT, RecordReader, plausible_header


def _records(*fragments, ctype=23):
    return b"".join(bytes([ctype, 3, 3]) + len(f).to_bytes(2, "big") + f for f in fragments)


FRAGMENTS = [os.urandom(n) for n in (1, 40, 300, 17)]
STREAM = _records(*FRAGMENTS)


def _read(chunks):
    reader = RecordReader()
    out = []
    for chunk in chunks:
        out += [(t, v, bytes(f), o) for t, v, f, o in reader.feed(chunk)]
    return reader, out


def test_split_at_every_byte():
    expected = _read([STREAM])[1]
    assert [f for _, _, f, _ in expected] == FRAGMENTS
    assert [o for *_, o in expected] == [0, 6, 51, 356]
    for cut in range(1, len(STREAM)):
        reader, got = _read([STREAM[:cut], STREAM[cut:]])
        assert got == expected, cut
        assert reader.buffered == 0


def test_byte_by_byte():
    reader, got = _read([STREAM[i:i + 1] for i in range(len(STREAM))])
    assert got == _read([STREAM])[1]


def test_a_bad_header_stops_with_its_offset():
    reader, got = _read([STREAM + b"\x63\x03\x03\x00\x01x" + _records(b"later")])
    assert len(got) == 4
    assert reader.error.startswith(f"not a TLS record header at stream byte {len(STREAM)}")
    assert reader.feed(_records(b"more")) == []


def test_length_bound():
    assert plausible_header(bytes([23, 3, 3]) + MAX_FRAGMENT.to_bytes(2, "big"))
    assert not plausible_header(bytes([23, 3, 3]) + (MAX_FRAGMENT + 1).to_bytes(2, "big"))
    reader = RecordReader()
    reader.feed(bytes([23, 3, 3]) + (MAX_FRAGMENT + 1).to_bytes(2, "big"))
    assert reader.error is not None


def test_a_record_in_one_byte_pieces_is_joined_once():
    """Issue 30: the unfinished record was joined again with each TCP segment (n²/2 bytes for a
    record in n pieces). Now the pieces are held (joined every MAX_PARTS), and the record once."""
    from tests.unit.tls.test_handshake import _allocated_per_call
    fragment = os.urandom(MAX_FRAGMENT)
    stream = _records(fragment)
    reader = RecordReader()
    got = []
    allocated = _allocated_per_call(
        lambda i=i: got.extend((t, bytes(f)) for t, _, f, _ in reader.feed(stream[i:i + 1]))
        for i in range(len(stream)))
    assert got == [(23, fragment)] and reader.buffered == 0
    assert allocated < 1000 * len(stream), allocated  # n²/2 would be 170 MB
    from kinspect.tls.records import MAX_PARTS
    reader.feed(stream[:-1])
    for i in range(5 * MAX_PARTS):
        reader.feed(b"")
        assert len(reader.parts) <= MAX_PARTS + 1
    assert reader.tail == stream[:-1]


def test_a_bad_header_is_at_the_same_offset_however_the_bytes_come():
    stream = STREAM + b"\x63\x03\x03\x00\x01x" + _records(b"later")
    whole = RecordReader()
    whole.feed(stream)
    for size in (1, 7, 100):
        reader = RecordReader()
        for at in range(0, len(stream), size):
            reader.feed(stream[at:at + size])
        assert (reader.error, reader.offset) == (whole.error, whole.offset) == (whole.error, len(STREAM))
