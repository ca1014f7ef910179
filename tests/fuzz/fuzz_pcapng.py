"""Fuzz the pcapng reader (kinspect/capture/pcapng.py).

Input: one byte choosing how the file is fed (0: whole, as a mapped file is; else in chunks of
that many times 61 bytes, as a stream is), then the pcapng file. Checks: no exception; the same
packets and problems fed whole or in chunks.
"""

import harness

with harness.instrumented("kinspect.capture"):
    from kinspect.capture.pcapng import PcapngParser


def read(data: bytes, chunk: int) -> tuple:
    return harness.read_capture(PcapngParser(), data, chunk)


def target(data: bytes) -> None:
    chunk, capture = (data[0] * 61, data[1:]) if data else (0, b"")
    whole = read(capture, 0)
    if chunk:
        harness.agree("pcapng", read(capture, chunk), whole, ("in chunks", "whole"))


if __name__ == "__main__":
    harness.main(target, "pcapng")
