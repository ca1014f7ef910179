"""Fuzz the classic pcap reader (kinspect/capture/pcap.py).

Input: one byte choosing how the file is fed (0: whole, as a mapped file is; else in chunks of
that many times 61 bytes, as a stream is), then the pcap file. Checks: no exception; the same
packets and problems fed whole or in chunks; the C record loop gives what the Python loop gives.
"""

import harness

with harness.instrumented("kinspect.capture"):
    from kinspect.capture import pcap

NATIVE = pcap._fast_records


def read(data: bytes, chunk: int, fast=NATIVE) -> tuple:
    saved, pcap._fast_records = pcap._fast_records, fast
    try:
        return harness.read_capture(pcap.PcapParser(), data, chunk)
    finally:
        pcap._fast_records = saved


def target(data: bytes) -> None:
    chunk, capture = (data[0] * 61, data[1:]) if data else (0, b"")
    whole = read(capture, 0)
    if chunk:
        harness.agree("pcap", read(capture, chunk), whole, ("in chunks", "whole"))
    if NATIVE is not None:
        harness.agree("pcap records", whole, read(capture, 0, None))


if __name__ == "__main__":
    harness.main(target, "pcap")
