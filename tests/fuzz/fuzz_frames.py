"""Fuzz Kafka framing (kinspect/wire/frames.py): one direction of a stream, with losses.

Input: one byte (bit 0: joined mid-stream, so hunting for a frame start; bit 1: a 4 KiB
--max-frame), then stream events (formats.stream_ops): data, lost bytes, the end. Checks: no
exception; frames and skipped spans come in stream order; a whole frame's payload is its size
and lies within the bytes seen; a damaged frame is no bigger than its size says.
"""

import formats
import harness

with harness.instrumented("kinspect.wire"):
    from kinspect.wire.frames import Frame, FrameBuffer, Skipped
    from kinspect.wire.headers import plausible_request


def check(items: list, state: list, seen: int) -> None:
    for item in items:
        if item.offset < state[0]:
            raise harness.Finding(f"{item!r} goes back before stream offset {state[0]}")
        if type(item) is Frame:
            if item.damaged == 0 and (len(item.payload) != item.size or item.offset + 4 + item.size > seen):
                raise harness.Finding(f"frame at {item.offset} of size {item.size} holds "
                                      f"{len(item.payload)} bytes ({seen} bytes seen)")
            if item.damaged < 0 or len(item.payload) + item.damaged > item.size:
                raise harness.Finding(f"damaged frame at {item.offset}: {len(item.payload)} bytes "
                                      f"+ {item.damaged} lost > size {item.size}")
            state[0] = item.offset + 4 + item.size if not item.damaged else item.offset
        elif type(item) is Skipped:
            if item.length < 0:
                raise harness.Finding(f"negative skip {item!r}")
            state[0] = item.offset
        else:
            raise harness.Finding(f"unknown item {item!r}")


def target(data: bytes) -> None:
    cursor = formats.Cursor(data)
    config = cursor.u8()
    max_frame = 4096 if config & 2 else 256 << 20
    buffer = FrameBuffer(lambda buf, pos, end: plausible_request(buf, pos, end, max_frame),
                         max_frame, hunting=bool(config & 1))
    state, seen, ts = [0], 0, 0.0
    for kind, _, chunk, missing in formats.stream_ops(cursor):
        ts += 0.001
        if kind == formats.DATA:
            seen += len(chunk)
            check(buffer.feed(chunk, ts), state, seen)
        elif kind == formats.GAP:
            seen += missing
            check(buffer.gap(missing, ts), state, seen)
        else:
            break
        if buffer.buffered < 0:
            raise harness.Finding(f"buffered {buffer.buffered}")
    check(buffer.flush(ts), state, seen)


if __name__ == "__main__":
    harness.main(target, "frames")
