"""Keep live packets as pcapng (``sniff --write``): what a user attaches to a bug report.

``Recording(source, file)`` is a PacketSource that passes another's packets on unchanged and
writes each to ``file`` (a binary file object the caller opened, see cli.overlap.create_output): a section header, one interface description per link type seen (time
stamps in microseconds: a float time stamp holds no finer, and a microsecond capture's
times then come back exactly), one enhanced packet block per packet. Ticks are not written. The file
is flushed on every tick, so what was captured is on disk within a tick, whatever ends the run.
"""

from __future__ import annotations

import os
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
        for packet in self.source.packets():
            if packet[1] == TICK:
                self._file.flush()
            else:
                self.write(packet)
            yield packet

    def write(self, packet) -> None:
        """Writes one packet (not a tick)."""
        ts, linktype, data, _ = packet
        write = self._file.write
        iface = self._interfaces.get(linktype)
        if iface is None:
            iface = self._interfaces[linktype] = len(self._interfaces)
            write(interface_description(linktype))
        stamp = round(ts * 1e6)
        pad = -len(data) & 3
        length = 32 + len(data) + pad
        write(_epb(EPB, length, iface, stamp >> 32, stamp & 0xFFFFFFFF, len(data), len(data)))
        write(data)
        write(b"\0" * pad + length.to_bytes(4, "little"))
        self.written += 1

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        self.source.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def rotated_name(path: str, number: int) -> str:
    """File ``number`` of a rotation written at ``path``: NAME_00001.pcapng beside it, numbered as
    dumpcap's ring buffer numbers its files (names sort in writing order)."""
    directory, base = os.path.split(path)
    stem, suffix = os.path.splitext(base)
    return os.path.join(directory, f"{stem}_{number:05d}{suffix or '.pcapng'}")


class RotatingRecording:
    """A PacketSource writing the packets of ``source`` as pcapng into a series of files
    (rotated_name), as ``sniff --write PATH --rotate-mb N --rotate-seconds S --keep K`` would: a new
    file once the current one holds ``max_bytes``, or once it has been written for ``max_seconds``
    of packet time (ticks count, so an idle capture rotates too); only the newest ``keep`` files are
    kept (None: all). Every file is a whole pcapng (its own section and interfaces), flushed on
    each tick and closed when the next one starts. ``opener(path)``: a binary file object writing
    ``path`` (the CLI's create_output); by default a new file, never one that exists."""

    def __init__(self, source, path: str, max_bytes: int | None = None, max_seconds: float | None = None,
                 keep: int | None = None, opener=None):
        self.source = source
        self.path = path
        self.max_bytes, self.max_seconds, self.keep = max_bytes, max_seconds, keep
        self._opener = opener or (lambda name: open(name, "xb"))
        self.files: list[str] = []  # written, oldest first (the kept ones)
        self.number = 0
        self.written = 0
        self._recording: Recording | None = None
        self._started = 0.0

    def __getattr__(self, name):
        return getattr(self.source, name)

    def _rotate(self, ts: float) -> None:
        if self._recording is not None:
            self._recording._file.close()
        self.number += 1
        name = rotated_name(self.path, self.number)
        self._recording = Recording(None, self._opener(name))
        self._started = ts
        self.files.append(name)
        while self.keep is not None and len(self.files) > self.keep:
            try:
                os.unlink(self.files.pop(0))
            except FileNotFoundError:
                pass

    def _due(self, ts: float) -> bool:
        recording = self._recording
        if recording is None:
            return True
        if self.max_seconds is not None and ts - self._started >= self.max_seconds:
            return True
        return self.max_bytes is not None and recording._file.tell() >= self.max_bytes

    def packets(self):
        for packet in self.source.packets():
            ts, linktype = packet[0], packet[1]
            if linktype == TICK:
                if self._recording is not None:
                    self._recording._file.flush()
                    if self.max_seconds is not None and ts - self._started >= self.max_seconds:
                        self._rotate(ts)
                yield packet
                continue
            if self._due(ts):
                self._rotate(ts)
            self._recording.write(packet)
            self.written += 1
            yield packet

    def close(self) -> None:
        if self._recording is not None and not self._recording._file.closed:
            self._recording._file.close()
        self.source.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
