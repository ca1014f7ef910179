"""Captures to TCP byte streams.

``open_capture`` reads pcap/pcapng (a path, ``-`` or a file object, gzip or not) into
``(ts, linktype, data, number)`` packets; ``decode_tcp`` takes a packet to its TCP segment;
``TcpReassembler`` turns segments into per-direction, in-order streams with gaps and ends.
"""

from kinspect.addresses import format_addr
from kinspect.capture.link import decode_tcp, decoder_for
from kinspect.capture.source import Capture, CaptureError, open_capture
from kinspect.capture.stream import StreamData, StreamEnd, StreamGap, StreamStart
from kinspect.capture.tcp import TcpReassembler

__all__ = [
    "Capture",
    "CaptureError",
    "StreamData",
    "StreamEnd",
    "StreamGap",
    "StreamStart",
    "TcpReassembler",
    "decode_tcp",
    "decoder_for",
    "format_addr",
    "open_capture",
]
