"""Fuzz opening a capture (kinspect/capture/source.py): format sniffing, gzip, streams, mmap.

Input: one byte choosing the way in (0: a stream; 1: gzip'ed by the harness; 2: gzip'ed, then
cut at a point the byte also gives; 3: a mapped file), then the capture. Checks: no exception
but CaptureError (the one open_capture documents: not a capture at all); the packets read any
way are those the parser reads from the bytes whole, except from a cut gzip stream, which may
only give a prefix of them.
"""

import gzip
import io
import os
import tempfile

import harness

with harness.instrumented("kinspect.capture"):
    from kinspect.capture.pcap import PcapParser
    from kinspect.capture.pcapng import PcapngParser
    from kinspect.capture.source import CaptureError, open_capture, sniff_format

MAPPED = os.path.join(tempfile.gettempdir(), f"kinspect-fuzz-source-{os.getpid()}.pcap")


def direct(data: bytes) -> list:
    parser = {"pcap": PcapParser, "pcapng": PcapngParser}[sniff_format(data[:8])]()
    parser.feed(data)
    return [(ts, linktype, bytes(d), n) for ts, linktype, d, n in parser.packets(final=True)]


def opened(source) -> list | None:
    try:
        capture = open_capture(source)
    except CaptureError:
        return None
    with capture:
        packets = [(ts, linktype, bytes(d), n) for ts, linktype, d, n in capture.packets()]
        harness.check_problems(capture.problems)
        capture.bytes_read, capture.packet_count
    return packets


def target(data: bytes) -> None:
    mode, capture = (data[0], data[1:]) if data else (0, b"")
    way = mode & 3
    if way == 0:
        packets = opened(io.BytesIO(capture))
    elif way == 1:
        packets = opened(io.BytesIO(gzip.compress(capture, 1)))
    elif way == 2:
        packed = gzip.compress(capture, 1)
        packets = opened(io.BytesIO(packed[:len(packed) * (mode >> 2) // 64]))
    else:
        with open(MAPPED, "wb") as f:
            f.write(capture)
        packets = opened(MAPPED)
    if packets is None or sniff_format(capture[:8]) not in ("pcap", "pcapng"):
        return
    expected = direct(capture)
    if way == 2:
        expected = expected[:len(packets)]
    harness.agree("packets", packets, expected, ("open_capture", "the parser on the bytes"))


if __name__ == "__main__":
    try:
        harness.main(target, "source")
    finally:
        if os.path.exists(MAPPED):
            os.remove(MAPPED)
