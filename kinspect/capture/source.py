"""Open a capture: a path (mmap'ed), ``-`` (stdin) or a binary file object, gzip or not.

The format is told by the first bytes, never by the file name. Regular files are mapped
and handed to the parser whole; stdin, file objects and gzip are streamed in chunks so
memory stays bounded whatever the size.

A gzip'ed capture may inflate at most ``Limits.max_batch_bytes`` plus ``Limits.max_file_ratio``
bytes per compressed byte read (the bounds of --max-batch-bytes and --max-file-ratio, as for a
file's record batches): gzip reaches 1000:1, and every byte of a capture costs decoding work,
so without it 4 MB of gzip could keep kinspect busy for minutes. Work is what the bound
measures: each packet or other block counts as at least PACKET_WORK bytes, and the caller may
charge more (``Capture.work``: pipeline.py charges each Kafka frame), since a packet or a frame
costs time whatever its size. Honest captures inflate 2-10 times, a packet per 30 compressed
bytes or more. Past the bound reading stops, with a problem that names the option.
"""

from __future__ import annotations

import gzip
import mmap
import os
import stat
import sys
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

from kinspect.capture.pcap import MAGICS as PCAP_MAGICS
from kinspect.capture.pcap import Packet, PcapParser
from kinspect.capture.pcapng import PcapngParser
from kinspect.limits import DEFAULT_LIMITS, OPTION, Limits
from kinspect.problems import Problem

CHUNK = 1 << 20
PACKET_WORK = 128  # bytes a packet or other block counts for, at least, in a gzip'ed capture's bound
RELEASE_STEP = 8 << 20     # mapped bytes handed back to the kernel at a time
RELEASE_BEHIND = 1 << 20   # kept behind the parser
GZIP_MAGIC = b"\x1f\x8b"
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"

# Things people feed a pcap tool by mistake: first bytes → what to tell them.
KNOWN_OTHERS = {
    b"\xa1\xb2\xcd\x34": "a modified (Kuznetzov) pcap file: convert it with `editcap -F pcap IN OUT`",
    b"\x34\xcd\xb2\xa1": "a modified (Kuznetzov) pcap file: convert it with `editcap -F pcap IN OUT`",
    b"\x28\xb5\x2f\xfd": "zstd-compressed: decompress it first (`zstd -d`)",
    b"\xfd7zX": "xz-compressed: decompress it first (`xz -d`)",
    b"BZh": "bzip2-compressed: decompress it first (`bunzip2`)",
    b"PK\x03\x04": "a zip archive: extract the capture first",
    b"snoop": "a snoop capture: convert it with `editcap -F pcapng IN OUT`",
}


class CaptureError(Exception):
    """The input is not a capture at all, or cannot be read."""


def sniff_format(head: bytes) -> str | None:
    """'pcap', 'pcapng', 'gzip' or None, from the first bytes of the input."""
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    if head[:4] == PCAPNG_MAGIC:
        return "pcapng"
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    return None


def _not_a_capture(name: str, head: bytes) -> CaptureError:
    if not head:
        return CaptureError(f"{name}: empty input, not a capture; check the file or the command that produces it")
    for magic, what in KNOWN_OTHERS.items():
        if head.startswith(magic):
            return CaptureError(f"{name}: {what}")
    return CaptureError(
        f"{name}: not a pcap or pcapng capture (starts with {head[:8].hex(' ')}); "
        "record one with tcpdump -w / dumpcap, or convert with `editcap -F pcapng IN OUT`"
    )


class _Reader:
    """A binary stream whose first bytes can be looked at before parsing; counts what it reads."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        # read1 returns what is there without waiting for a full chunk: a live pipe
        # (tcpdump -w - | kinspect decode -) flows, and a cut gzip gives up what it holds
        self._read = getattr(raw, "read1", raw.read)
        self.prefix = b""
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = CHUNK
        if self.prefix:
            data, self.prefix = self.prefix[:size], self.prefix[size:]
            return data
        data = self._read(size)
        self.count += len(data)
        return data

    def read_head(self, size: int) -> bytes:
        """Read until ``size`` bytes or the end, for format detection; kept as the prefix."""
        head = self.prefix
        while len(head) < size:
            data = self._read(size - len(head))
            if not data:
                break
            head += data
        self.count += len(head) - len(self.prefix)
        self.prefix = head
        return head


class Capture:
    """An opened capture. Iterate ``packets()`` once; read ``problems`` afterwards."""

    def __init__(self, name: str, fmt: str, *, whole=None, stream=None, reader=None, size=None, closers=(),
                 inflate: tuple[int, int] | None = None) -> None:
        """``inflate``: (floor, ratio) of a gzip'ed stream: ``stream`` (the inflated bytes) may
        give at most floor + ratio × the bytes ``reader`` read."""
        self.name = name
        self.format = fmt
        self.size: int | None = size
        self.problems: list[Problem] = []
        self._parser = (PcapParser if fmt == "pcap" else PcapngParser)(self.problems)
        self._whole = whole  # an mmap (or bytes) holding the entire capture
        self._stream = stream  # something with read(n) returning decoded capture bytes
        self._reader = reader  # the _Reader on the raw input, for bytes_read
        self._closers = list(closers)
        self._inflate = inflate
        # more work charged by the caller, in bytes, against the gzip bound; and the most of what
        # the bound left that it took at a check (a run of some connections tells its share)
        self.work: Callable[[], int] | None = None
        self.work_note = ""  # what ``work`` charges, for the problem that cuts ("each Kafka frame 512 bytes")
        self.work_share = 0.0

    @property
    def bytes_read(self) -> int:
        """Input bytes consumed (compressed bytes for gzip), for progress bars."""
        if self._reader is not None:
            return self._reader.count
        return self._parser.offset

    @property
    def packet_count(self) -> int:
        return self._parser.count

    def only_flows(self, shard: int, shards: int) -> None:
        """Packets of connections of other shards than ``shard`` (capture/flows.py) may be left
        out where the C reader can tell them: ``skipped`` counts them, ``last_skipped`` is
        (number, ts) of the last."""
        if hasattr(self._parser, "flows"):
            self._parser.flows = (shard, shards)

    @property
    def skipped(self) -> int:
        return getattr(self._parser, "skipped", 0)

    @property
    def last_skipped(self) -> tuple[int, float]:
        return getattr(self._parser, "last_skipped", (0, 0.0))

    @property
    def secrets(self) -> list[tuple[int, bytes]]:
        """(secrets type, bytes) of the pcapng Decryption Secrets Blocks read so far."""
        return getattr(self._parser, "secrets", [])

    def packets(self) -> Iterator[Packet]:
        """An iterator of ``(ts seconds, linktype, data, number)``, one per complete packet."""
        parser = self._parser
        if self._whole is not None:
            parser.feed(self._whole)
            return self._mapped_packets(parser, self._whole)
        return self._stream_packets(parser)

    @staticmethod
    def _mapped_packets(parser, mapped) -> Iterator[Packet]:
        """Packets from a mapped file, handing the pages already read back to the kernel so
        that resident memory stays flat whatever the file size (packets are copies)."""
        release = getattr(mapped, "madvise", None)
        advice = getattr(mmap, "MADV_DONTNEED", None)
        if release is None or advice is None or not isinstance(mapped, mmap.mmap):
            yield from parser.packets(final=True)
            return
        released = 0
        for count, packet in enumerate(parser.packets(final=True), 1):
            yield packet
            if not count & 0x3FF:  # the C readers' batch: see where it ended
                done = parser.offset - RELEASE_BEHIND
                if done - released >= RELEASE_STEP:
                    done -= done % mmap.PAGESIZE
                    release(advice, released, done - released)
                    released = done

    def _stream_packets(self, parser) -> Iterator[Packet]:
        stream = self._stream
        inflate = self._inflate
        while not parser.stopped:
            if inflate is not None and not self._within(parser, *inflate):
                parser.drop_rest()
                break
            try:
                chunk = stream.read(CHUNK)
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                what = f"gzip stream is damaged or cut short ({exc}); packets after this point are lost"
                self.problems.append(Problem(what, "gzip", None, check="truncated"))
                break
            except OSError as exc:
                self.problems.append(Problem(f"reading stopped: {exc}", self.name, None))
                break
            if not chunk:
                break
            parser.feed(chunk)
            yield from parser.packets()
        parser.close()

    def _within(self, parser, floor: int, ratio: int) -> bool:
        """Whether the gzip'ed stream's work so far is within its bound (else a problem says so)."""
        read = self._reader.count
        allowed = floor + ratio * read
        blocks = parser.count + parser.blocks
        own = self._stream.count + PACKET_WORK * blocks
        extra = self.work() if self.work is not None else 0
        if extra:
            left = allowed - own
            share = extra / left if left > 0 else float("inf")
            if share > self.work_share:
                self.work_share = share
        if own + extra <= allowed:
            return True
        self.problems.append(Problem(
            f"{read} compressed bytes gave {self._stream.count} bytes in {blocks} packets and blocks, past the "
            f"bound of {ratio} bytes of work per compressed byte after the first {floor} (a packet or block "
            f"counts as at least {PACKET_WORK} bytes{', ' + self.work_note if self.work_note else ''}): "
            f"a decompression bomb? The rest of the capture is not read; raise it with "
            f"{OPTION['max_file_ratio']}", "gzip", read, check="decompress",
            expected=f"<= {allowed}", found=own + extra))
        return False

    def close(self) -> None:
        self._whole = None
        while self._closers:
            self._closers.pop().close()

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_capture(source: str | os.PathLike | BinaryIO, limits: Limits = DEFAULT_LIMITS) -> Capture:
    """Open a capture; raises CaptureError only when it is not a capture or cannot be read.
    ``limits``: a gzip'ed capture inflates within its max_batch_bytes and max_file_ratio."""
    inflate = (limits.max_batch_bytes, limits.max_file_ratio)
    if isinstance(source, (str, os.PathLike)):
        if os.fspath(source) == "-":
            return _open_stream("<stdin>", sys.stdin.buffer, None, [], inflate)
        return _open_path(os.fspath(source), inflate)
    name = getattr(source, "name", None)
    return _open_stream(name if isinstance(name, str) else "<stream>", source, None, [], inflate)


def _open_path(path: str, inflate: tuple[int, int]) -> Capture:
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise CaptureError(f"{path}: cannot open ({exc.strerror or exc}); check the path and permissions") from exc
    try:
        st = os.fstat(f.fileno())
        mappable = stat.S_ISREG(st.st_mode) and st.st_size > 0
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if mappable else None
    except OSError as exc:
        f.close()
        raise CaptureError(f"{path}: cannot read ({exc.strerror or exc}); check the file") from exc
    if mapped is None:
        # pipes and character devices are streamed (an empty file is reported there)
        return _open_stream(path, f, None, [f], inflate)
    head = mapped[:8]
    fmt = sniff_format(head)
    if fmt in ("pcap", "pcapng"):
        return Capture(path, fmt, whole=mapped, size=st.st_size, closers=[f, mapped])
    mapped.close()
    if fmt == "gzip":
        return _open_stream(path, f, st.st_size, [f], inflate)
    f.close()
    raise _not_a_capture(path, head)


def _open_stream(name: str, raw: BinaryIO, size: int | None, closers: list, inflate: tuple[int, int]) -> Capture:
    try:
        reader = _Reader(raw)
        head = reader.read_head(8)
    except OSError as exc:
        for c in closers:
            c.close()
        raise CaptureError(f"{name}: cannot read ({exc.strerror or exc})") from exc
    fmt = sniff_format(head)
    stream = reader
    if fmt == "gzip":
        stream = gzip.GzipFile(fileobj=reader, mode="rb")
        try:
            inner = _Reader(stream)
            head = inner.read_head(8)
        except (OSError, EOFError, zlib.error) as exc:
            for c in closers:
                c.close()
            raise CaptureError(f"{name}: gzip data is damaged ({exc}); check the file") from exc
        fmt = sniff_format(head)
        stream = inner
        closers = closers + [inner.raw]
        name_inside = f"{name} (inside gzip)"
        if fmt not in ("pcap", "pcapng"):
            for c in closers:
                c.close()
            raise _not_a_capture(name_inside, head)
    else:
        inflate = None
        if fmt is None:
            for c in closers:
                c.close()
            raise _not_a_capture(name, head)
    return Capture(name, fmt, stream=stream, reader=reader, size=size, closers=closers, inflate=inflate)
