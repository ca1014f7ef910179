import random
import struct

import pytest

from kinspect.wire import frames as frames_module
from kinspect.wire.frames import Frame, FrameBuffer, Skipped


@pytest.fixture(autouse=True, params=["bytearray", "parts"])
def collect_at(request, monkeypatch):
    """Every test runs twice: big incomplete frames in one buffer, and as collected parts."""
    monkeypatch.setattr(frames_module, "COLLECT_AT", 1 if request.param == "parts" else 1 << 62)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def never(buf, pos, end):
    return False


def starts_with_size_7(buf, pos, end):
    if end - pos < 4:
        return None
    return struct.unpack_from(">i", buf, pos)[0] == 7


def frames_of(items):
    return [i for i in items if isinstance(i, Frame)]


def test_frames_split_across_and_within_chunks():
    data = frame(b"abc") + frame(b"") + frame(b"defghij")
    fb = FrameBuffer(never)
    out = []
    for i in range(len(data)):
        out += fb.feed(data[i:i + 1], float(i))
    got = frames_of(out)
    assert [f.payload for f in got] == [b"abc", b"", b"defghij"]
    assert [f.offset for f in got] == [0, 7, 11]
    assert got[0].first_ts == 0.0 and got[0].ts == 6.0
    assert got[2].first_ts == 11.0 and got[2].ts == float(len(data) - 1)


def test_many_frames_in_one_chunk_need_more_is_empty():
    fb = FrameBuffer(never)
    chunk = frame(b"x" * 10) * 3 + frame(b"y" * 10)[:6]
    assert [f.payload for f in frames_of(fb.feed(chunk, 1.0))] == [b"x" * 10] * 3
    assert fb.buffered == 6
    assert frames_of(fb.feed(b"", 2.0)) == []


def test_gap_inside_a_known_frame_skips_exactly_to_its_end():
    fb = FrameBuffer(never)
    big = frame(b"H" * 20 + b"L" * 80)
    nxt = frame(b"next")
    assert fb.feed(big[:24], 1.0) == []
    assert fb.gap(30, 2.0) == []               # bytes 24..54 lost
    out = fb.feed(big[54:] + nxt, 3.0)
    got = frames_of(out)
    assert got[0].damaged == 30 and got[0].payload == b"H" * 20 and got[0].size == 100
    assert got[1].payload == b"next" and got[1].damaged == 0 and got[1].offset == len(big)


def test_gap_at_unknown_boundary_hunts_for_a_plausible_start():
    fb = FrameBuffer(starts_with_size_7)
    fb.feed(b"\x00\x00", 1.0)                  # half a size field, then loss
    out = fb.gap(100, 2.0)
    assert any(isinstance(i, Skipped) for i in out)
    out = fb.feed(b"\x01\x02garbage" + frame(b"1234567") + frame(b"abc"), 3.0)
    got = frames_of(out)
    assert [f.payload for f in got] == [b"1234567", b"abc"]
    skipped = [i for i in out if isinstance(i, Skipped)]
    assert skipped and skipped[0].length == 9


def test_oversize_frame_is_skipped_without_buffering():
    fb = FrameBuffer(never, max_frame=1024)
    out = fb.feed(struct.pack(">i", 5000) + b"z" * 100, 1.0)
    assert [i.length for i in out if isinstance(i, Skipped)] == [5004]
    for _ in range(48):
        fb.feed(b"z" * 100, 2.0)
    assert fb.buffered == 0
    out = fb.feed(b"z" * 100 + frame(b"ok"), 3.0)
    assert [f.payload for f in frames_of(out)] == [b"ok"]


def test_flush_reports_an_incomplete_tail():
    fb = FrameBuffer(never)
    fb.feed(frame(b"abcdef")[:7], 1.0)
    out = fb.flush(2.0)
    assert len(out) == 1 and isinstance(out[0], Skipped) and out[0].length == 7


def test_negative_size_starts_a_hunt():
    fb = FrameBuffer(starts_with_size_7)
    out = fb.feed(struct.pack(">i", -3) + frame(b"1234567"), 1.0)
    assert [f.payload for f in frames_of(out)] == [b"1234567"]


def replay(events, collect_at: int) -> list:
    frames_module.COLLECT_AT = collect_at
    fb = FrameBuffer(starts_with_size_7)
    out = []
    for kind, arg, ts in events:
        out += fb.feed(arg, ts) if kind == "feed" else fb.gap(arg, ts)
        out.append(("buffered", fb.buffered))
    return out + fb.flush(99.0)


def test_parts_and_one_buffer_agree_on_random_streams(monkeypatch):
    monkeypatch.setattr(frames_module, "COLLECT_AT", frames_module.COLLECT_AT)  # restored after
    rng = random.Random(7)
    for _ in range(300):
        stream = b"".join(frame(bytes([rng.randrange(256)]) * rng.choice((0, 3, 7, 50, 300)))
                          for _ in range(rng.randrange(1, 8)))
        events, pos, ts = [], 0, 0.0
        while pos < len(stream):
            step = rng.randrange(1, 60)
            ts += 1
            if rng.random() < 0.1:
                events.append(("gap", step, ts))
            else:
                events.append(("feed", stream[pos:pos + step], ts))
            pos += step
        assert replay(events, 1) == replay(events, 1 << 62)


def test_big_frames_collected_at_once_are_bounded_across_buffers(collect_at):
    """Frames from COLLECT_AT up are collected as parts, and those are what the bound counts."""
    import struct as _struct

    if frames_module.COLLECT_AT > 9000:
        frames_module.COLLECT_AT = 4096

    from kinspect.wire.frames import FrameBuffer as _FrameBuffer, Skipped as _Skipped

    shared = [0, 0]
    buffers = [_FrameBuffer(lambda *a: True, 10_000, reserved=shared) for _ in range(3)]
    heads = [b.feed(_struct.pack(">i", 9000) + bytes(100), 0.0) for b in buffers]
    assert heads[:2] == [[], []] and shared == [18_000, 27_000]  # the third asked for 27,000
    assert type(heads[2][0]) is _Skipped and "twice --max-frame" in heads[2][0].reason
    done = buffers[0].feed(bytes(8900), 1.0)
    assert len(done[0].payload) == 9000 and shared[0] == 9000
    assert buffers[2].feed(bytes(8900) + _struct.pack(">i", 4) + b"abcd", 1.0)[-1].payload == b"abcd"


def _fed(fb: FrameBuffer, packet: list, chunks) -> list:
    """Each chunk fed as the packet numbered by its place (from 1), as a capture reader sets it."""
    out = []
    for number, chunk in enumerate(chunks, 1):
        packet[0] = number
        out += fb.feed(chunk, float(number))
    return frames_of(out)


def test_each_frame_has_the_numbers_of_its_first_and_last_packet():
    packet = [0]
    fb = FrameBuffer(never, packet=packet)
    data = frame(b"a" * 30) + frame(b"b") + frame(b"c" * 50)
    # packet 1: the first frame's head; 2: its tail, the second frame whole, the third's head;
    # 3 and 4: the rest of the third
    got = _fed(fb, packet, [data[:10], data[10:60], data[60:80], data[80:]])
    assert [(f.first_packet, f.packet) for f in got] == [(1, 2), (2, 2), (2, 4)]


def test_a_damaged_frame_ends_in_the_packet_after_the_loss():
    packet = [0]
    fb = FrameBuffer(never, packet=packet)
    big = frame(b"H" * 20 + b"L" * 80)
    packet[0] = 7
    fb.feed(big[:24], 1.0)
    packet[0] = 9
    fb.gap(30, 2.0)
    packet[0] = 10
    (damaged, after) = frames_of(fb.feed(big[54:] + frame(b"next"), 3.0))
    assert (damaged.damaged, damaged.first_packet, damaged.packet) == (30, 7, 10)
    assert (after.first_packet, after.packet) == (10, 10)


def test_without_packet_numbers_frames_say_zero():
    got = frames_of(FrameBuffer(never).feed(frame(b"x") * 2, 1.0))
    assert [(f.first_packet, f.packet) for f in got] == [(0, 0), (0, 0)]


class BufferedOnly(FrameBuffer):
    """A FrameBuffer whose every byte goes through the buffer (no frames cut straight from a packet)."""
    __slots__ = ()

    def _feed_fresh(self, data, ts):
        self._first_ts = ts
        self._first_packet = self.packet[0]
        self._buf += data
        out: list = []
        self._drain(ts, out)
        return out


def test_frames_cut_from_a_fresh_packet_match_the_buffered_path():
    """A packet met with nothing buffered has its whole frames cut from it directly: the same frames
    (payload, offsets, times, packet numbers) and skipped stretches as through the buffer."""
    rng = random.Random(11)
    framed = 0
    for _ in range(300):
        stream = b"".join(frame(bytes([rng.randrange(256)]) * rng.choice((0, 3, 7, 50, 300)))
                          if rng.random() < 0.95 else struct.pack(">i", rng.choice((-5, 5000)))
                          for _ in range(rng.randrange(1, 10)))
        runs = []
        for kind in (FrameBuffer, BufferedOnly):
            packet = [0]
            fb = kind(starts_with_size_7, max_frame=1024, packet=packet)
            chunks, pos, ts, out = random.Random(len(stream)), 0, 0.0, []
            while pos < len(stream):
                step = chunks.choice((1, 4, 11, 60, 400, 2000))
                ts += 1
                packet[0] += 1
                if chunks.random() < 0.05:
                    out += fb.gap(step, ts)
                else:
                    out += fb.feed(memoryview(stream)[pos:pos + step] if chunks.random() < 0.5
                                   else stream[pos:pos + step], ts)
                out.append(("buffered", fb.buffered))
                pos += step
            runs.append(out + fb.flush(ts + 1))
        assert runs[0] == runs[1]
        framed += sum(type(item) is Frame for item in runs[0])
    assert framed > 1000
