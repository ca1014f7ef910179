"""Keep live packets as pcapng (``sniff --write``): what a user attaches to a bug report.

``Recording(source, file)`` is a PacketSource that passes another's packets on unchanged and
writes each to ``file`` (a binary file object the caller opened, see cli.overlap.create_output): a
section header, one interface description per link type seen (time stamps in microseconds: a float
time stamp holds no finer, and a microsecond capture's times then come back exactly), one enhanced
packet block per packet. Ticks are not written. The file is flushed on every tick, so what was
captured is on disk within a tick, whatever ends the run.

``RotatingRecording(source, path, ...)`` (``--rotate-mb``, ``--rotate-seconds``, ``--keep``) writes a
series of such files, NAME_00001.pcapng, NAME_00002.pcapng, ... beside ``path``, each visible under
its name only once complete (spark/rotation.py reads such a directory as it grows).
"""

from __future__ import annotations

import os
import re
import secrets
import struct

from kinspect.capture.stream import TICK

SHB, IDB, EPB = 0x0A0D0D0A, 1, 6
BYTE_ORDER_MAGIC = 0x1A2B3C4D
OPT_TSRESOL = 9
MICROSECONDS = 6
_epb = struct.Struct("<IIIIIII").pack
PART = ".part"  # the end of the hidden name a rotated file has while it is written
_WRITING = re.compile(r"\..+\.[0-9a-f]{16}\.part")


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
        header = section_header()
        self._file.write(header)
        self._interfaces: dict[int, int] = {}  # link type -> interface id
        self.written = 0
        self.bytes_written = len(header)  # counted: the file's tell() costs a system call

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
            idb = interface_description(linktype)
            write(idb)
            self.bytes_written += len(idb)
        stamp = round(ts * 1e6)
        pad = -len(data) & 3
        length = 32 + len(data) + pad
        self.bytes_written += length
        write(_epb(EPB, length, iface, stamp >> 32, stamp & 0xFFFFFFFF, len(data), len(data)))
        write(data)
        write(b"\0" * pad + length.to_bytes(4, "little"))
        self.written += 1

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        if self.source is not None:
            self.source.close()

    def discard(self) -> None:
        """The capture never started: the file is closed (a pcapng of no packets)."""
        self._file.close()

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


def _rotation_pattern(path: str) -> re.Pattern:
    stem, suffix = os.path.splitext(os.path.basename(path))
    return re.compile(rf"\.?{re.escape(stem)}_(\d{{5,}}){re.escape(suffix or '.pcapng')}(?:\.[0-9a-f]{{16}}\.part)?")


def writing_name(final: str) -> str:
    """The hidden name a rotated file has while it is written, beside its final name: a reader of the
    directory (spark/rotation.py leaves out hidden files) never sees it half written. Its random
    part makes it unpredictable, so that nobody can plant a file or a link there beforehand."""
    directory, base = os.path.split(final)
    return os.path.join(directory, f".{base}.{secrets.token_hex(8)}{PART}")


def being_written(directory: str) -> list[str]:
    """The files of ``directory`` that a rotation is still writing (writing_name's)."""
    try:
        with os.scandir(directory or ".") as entries:
            return [e.path for e in entries if _WRITING.fullmatch(e.name)]
    except OSError:
        return []


def rotation_number(path: str, name: str) -> int | None:
    """The number of ``name`` in the rotation written at ``path`` (final or being written), else None."""
    m = _rotation_pattern(path).fullmatch(os.path.basename(name))
    return int(m.group(1)) if m else None


def next_number(path: str) -> int:
    """The number the next file of the rotation at ``path`` takes: one past those already in its
    directory (an earlier run's), so that names keep sorting in writing order."""
    directory = os.path.dirname(path) or "."
    try:
        names = os.listdir(directory)
    except OSError:
        return 1
    numbers = [n for n in (rotation_number(path, name) for name in names) if n is not None]
    return max(numbers, default=0) + 1


class WriteFailed(Exception):
    """The file system refused a rotation's file mid-way (a full disk, a directory gone): ``path``
    and ``reason`` say which and why. What was written before stays."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


class RotatingRecording:
    """A PacketSource writing the packets of ``source`` as pcapng into a series of files
    (rotated_name), as ``sniff --write PATH --rotate-mb N --rotate-seconds S --keep K`` does: a new
    file once the current one holds ``max_bytes``, or once it has been written for ``max_seconds``
    of packet time (ticks count, so an idle capture rotates too); only the newest ``keep`` files are
    kept, the one being written included (None: all). Every file is a whole pcapng (its own section
    and interfaces), flushed on each tick. The first file is opened at once (a path that cannot be
    written is told before the capture starts); the file system failing later raises WriteFailed.
    A file is written under its hidden writing_name and takes its final name only once closed,
    without replacing anything there: a name already taken (another writer's) makes it take the
    next number. Numbers start past those in the directory. Only files this object published are
    deleted, and only while each is still the same file.
    ``opener(path)``: a binary file object writing the new file ``path`` (the CLI's create_output);
    by default a new file, never one that exists."""

    def __init__(self, source, path: str, max_bytes: int | None = None, max_seconds: float | None = None,
                 keep: int | None = None, opener=None):
        self.source = source
        self.path = path
        self.max_bytes, self.max_seconds, self.keep = max_bytes, max_seconds, keep
        self._opener = opener or (lambda name: open(name, "xb"))
        self.files: list[str] = []  # published and kept, oldest first
        self._identities: dict[str, tuple[int, int]] = {}  # published name -> (device, inode)
        self.published = 0
        self.number = next_number(path) - 1
        self.written = 0
        self._recording: Recording | None = None
        self._writing: str | None = None
        self._started: float | None = None
        self._open_next()

    def __getattr__(self, name):
        return getattr(self.source, name)

    def _open_next(self) -> None:
        self.number += 1
        writing = writing_name(rotated_name(self.path, self.number))
        self._recording = Recording(None, self._opener(writing))
        self._writing = writing

    def _finish(self) -> None:
        """Closes the file being written and gives it its final name."""
        recording, writing = self._recording, self._writing
        self._recording = self._writing = None
        if recording is None:
            return
        recording._file.close()
        final = self._publish(writing)
        info = os.stat(final, follow_symlinks=False)
        self._identities[final] = (info.st_dev, info.st_ino)
        self.files.append(final)
        self.published += 1

    def _publish(self, writing: str) -> str:
        for _ in range(1000):
            final = rotated_name(self.path, self.number)
            try:
                os.link(writing, final)  # never replaces: an existing name fails
            except FileExistsError:
                self.number += 1
                continue
            except OSError:  # a file system without hard links
                if os.path.lexists(final):
                    self.number += 1
                    continue
                os.rename(writing, final)
                return final
            os.unlink(writing)
            return final
        raise OSError(f"no free name for the rotation's file {writing}")

    def _trim(self) -> None:
        """Deletes the oldest files past ``keep`` (counting the one being written)."""
        kept = None if self.keep is None else self.keep - (self._recording is not None)
        while kept is not None and len(self.files) > kept:
            name = self.files.pop(0)
            identity = self._identities.pop(name)
            try:
                info = os.stat(name, follow_symlinks=False)
                if (info.st_dev, info.st_ino) == identity:
                    os.unlink(name)
            except FileNotFoundError:
                pass

    def _rotate(self, ts: float) -> None:
        self._finish()
        self._open_next()
        self._started = ts
        self._trim()

    def _due(self, ts: float) -> bool:
        if self._started is None:
            self._started = ts
            return False
        if self.max_seconds is not None and ts - self._started >= self.max_seconds:
            return True
        return self.max_bytes is not None and self._recording.bytes_written >= self.max_bytes

    def packets(self):
        max_bytes = self.max_bytes if self.max_bytes is not None else float("inf")
        max_seconds = self.max_seconds if self.max_seconds is not None else float("inf")
        for packet in self.source.packets():
            try:
                started, recording = self._started, self._recording
                if packet[1] != TICK and started is not None and recording.bytes_written < max_bytes and \
                        packet[0] - started < max_seconds:  # the common case, without _keep's calls
                    recording.write(packet)
                    self.written += 1
                else:
                    self._keep(packet)
            except OSError as e:
                raise WriteFailed(self._writing or rotated_name(self.path, self.number), e.strerror or str(e)) \
                    from None
            yield packet

    def _keep(self, packet) -> None:
        ts, linktype = packet[0], packet[1]
        if linktype == TICK:
            self._recording._file.flush()
            if self._started is None:
                self._started = ts
            elif self.max_seconds is not None and ts - self._started >= self.max_seconds:
                self._rotate(ts)
            return
        if self._due(ts):
            self._rotate(ts)
        self._recording.write(packet)
        self.written += 1

    def close(self) -> None:
        """Finishes the file being written (it takes its final name), then closes the source."""
        try:
            if self._recording is not None:
                writing = self._writing
                try:
                    self._finish()
                    self._trim()
                except OSError as e:
                    raise WriteFailed(writing, e.strerror or str(e)) from None
        finally:
            if self.source is not None:
                self.source.close()

    def discard(self) -> None:
        """The capture never started: the file opened for it is closed and removed."""
        recording, writing = self._recording, self._writing
        self._recording = self._writing = None
        if recording is not None:
            recording._file.close()
            try:
                os.unlink(writing)
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
