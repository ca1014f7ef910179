"""Keep live packets as pcapng (``sniff --write``): what a user attaches to a bug report.

``Recording(source, file)`` is a PacketSource that passes another's packets on unchanged and
writes each to ``file`` (a binary file object the caller opened, see cli.overlap.create_output): a section header, one interface description per link type seen (time
stamps in microseconds: a float time stamp holds no finer, and a microsecond capture's
times then come back exactly), one enhanced packet block per packet. Ticks are not written. The file
is flushed on every tick, so what was captured is on disk within a tick, whatever ends the run.
"""

from __future__ import annotations

import struct

from kinspect.capture.stream import TICK

SHB, IDB, EPB = 0x0A0D0D0A, 1, 6
BYTE_ORDER_MAGIC = 0x1A2B3C4D
OPT_TSRESOL = 9
MICROSECONDS = 6
_epb = struct.Struct("<IIIIIII").pack


def _block(btype: int, body: bytes) -> bytes:
    pad = -len(body) & 3
    length = 12 + len(body) + pad
    return struct.pack("<II", btype, length) + body + b"\0" * pad + struct.pack("<I", length)


def section_header(application: str = "kinspect sniff") -> bytes:
    shb_app = 4  # shb_userappl
    app = application.encode()
    options = struct.pack("<HH", shb_app, len(app)) + app + b"\0" * (-len(app) & 3) + b"\0\0\0\0"
    return _block(SHB, struct.pack("<IHHq", BYTE_ORDER_MAGIC, 1, 0, -1) + options)


def interface_description(linktype: int, snaplen: int = 0) -> bytes:
    options = struct.pack("<HHB3x", OPT_TSRESOL, 1, MICROSECONDS) + b"\0\0\0\0"
    return _block(IDB, struct.pack("<HHI", linktype, 0, snaplen) + options)


class Recording:
    """A PacketSource writing the packets of ``source`` as pcapng to ``file``, which it closes."""

    def __init__(self, source, file):
        self.source = source
        self._file = file
        self._file.write(section_header())
        self._interfaces: dict[int, int] = {}  # link type -> interface id
        self.written = 0

    def __getattr__(self, name):  # size, problems, statistics, stop, backend...: the source's
        return getattr(self.source, name)

    def packets(self):
        write = self._file.write
        interfaces = self._interfaces
        for packet in self.source.packets():
            ts, linktype, data, _ = packet
            if linktype == TICK:
                self._file.flush()
                yield packet
                continue
            iface = interfaces.get(linktype)
            if iface is None:
                iface = interfaces[linktype] = len(interfaces)
                write(interface_description(linktype))
            stamp = round(ts * 1e6)
            pad = -len(data) & 3
            length = 32 + len(data) + pad
            write(_epb(EPB, length, iface, stamp >> 32, stamp & 0xFFFFFFFF, len(data), len(data)))
            write(data)
            write(b"\0" * pad + length.to_bytes(4, "little"))
            self.written += 1
            yield packet

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        self.source.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
