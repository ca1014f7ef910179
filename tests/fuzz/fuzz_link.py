"""Fuzz the link, IP and TCP header decoders (kinspect/capture/link.py).

Input: one byte choosing the link type (formats.LINK_TYPES), then the captured frame. Checks:
no exception; decode_tcp gives None or a well-formed segment whose payload lies in the frame;
the C fast paths (kinspect/native/_packets.c) give what the Python decoders give.
"""

import formats
import harness

with harness.instrumented("kinspect.capture"):
    from kinspect import native
    from kinspect.capture import link

PYTHON = link.decoders(False)
C = link.decoders(True) if native.packets is not None else None


def target(data: bytes) -> None:
    if not data:
        return
    linktype, frame = formats.LINK_TYPES[data[0] % len(formats.LINK_TYPES)], data[1:]
    segment = link.decode_tcp(linktype, frame)
    if segment is not None:
        src, dst, sport, dport, seq, flags, payload, ack = segment
        if len(src) not in (4, 16) or len(dst) != len(src) or payload not in frame:
            raise harness.Finding(f"malformed segment {segment!r}")
        link.format_addr(src, sport), link.format_addr(dst, dport)
    harness.agree("decode_tcp", link.decode_tcp(linktype, memoryview(frame)), segment,
                  ("a memoryview", "bytes"))
    if C is not None and linktype in C:
        harness.agree(f"link type {linktype}", C[linktype](frame), PYTHON[linktype](frame))


if __name__ == "__main__":
    harness.main(target, "link")
