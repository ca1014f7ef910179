"""Classic libpcap files, sans-I/O: feed bytes, iterate the complete packets.

A packet is ``(ts seconds, linktype, data, number)``, number counting from 1.
``feed()`` accepts a chunk of a stream or a whole mmap; ``packets()`` yields every complete
record in what was fed and returns when it needs more bytes; ``close()`` (or
``packets(final=True)``) says the input ended and reports a record cut short.
Malformed input becomes a Problem, never an exception.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from kinspect import native
from kinspect.capture.link import NATIVE_KINDS
from kinspect.problems import ERROR, WARNING, Problem, ProblemCap

Packet = tuple[float, int, bytes, int]

MAGICS = {
    # first four bytes → (byte order, fractional-second divisor)
    b"\xd4\xc3\xb2\xa1": ("<", 1_000_000),
    b"\xa1\xb2\xc3\xd4": (">", 1_000_000),
    b"\x4d\x3c\xb2\xa1": ("<", 1_000_000_000),
    b"\xa1\xb2\x3c\x4d": (">", 1_000_000_000),
}

_fast_records = native.packets.pcap_records if native.packets is not None else None
_fast_records_of = native.packets.pcap_records_of if native.packets is not None else None
_BATCH = 1024  # records per call of the C loop

# Wireshark's ceiling for an ordinary packet; a larger snaplen raises it up to MAX_RECORD.
STANDARD_MAX_PACKET = 262_144
MAX_RECORD = 64 << 20
PROBLEMS_SHOWN = 10  # problems of one check a capture keeps (RecordParser)


class RecordParser:
    """Buffering shared by the pcap and pcapng parsers.

    ``_buf[_pos:]`` holds the bytes not yet consumed; ``_base`` is the input offset of
    ``_buf[0]``. A parser that hit a structural problem sets ``stopped`` and ignores the rest.
    Of the problems of each check the first PROBLEMS_SHOWN are kept, the rest counted in one
    more at ``close()``: a pcapng of a million malformed blocks is a few problems, not a million.
    """

    format = ""

    def __init__(self, problems: list[Problem] | None = None) -> None:
        self.problems: list[Problem] = [] if problems is None else problems
        self._cap = ProblemCap(self.problems, keep=PROBLEMS_SHOWN)
        self.count = 0
        self.blocks = 0  # other blocks than packets read (pcapng), for the work they cost
        self.stopped = False
        self._buf: bytes = b""
        self._pos = 0
        self._base = 0
        self._closed = False

    @property
    def offset(self) -> int:
        """Input bytes consumed so far (complete records only)."""
        return self._base + self._pos

    def feed(self, data) -> None:
        """Append input. A whole mmap or bytes object is kept as is, without copying."""
        if self._pos < len(self._buf):
            self._buf = self._buf[self._pos :] + data
        else:
            self._buf = data
        self._base += self._pos
        self._pos = 0

    def close(self) -> None:
        """The input ended: report whatever incomplete record is left."""
        if self._closed:
            return
        self._closed = True
        left = len(self._buf) - self._pos
        if not self.stopped and left:
            self._report_truncated(left)
        self._base += len(self._buf)
        self._buf = b""
        self._pos = 0
        self._cap.close(self.format, None)

    def drop_rest(self) -> None:
        """The input is left unread from here on purpose (a bound): what is buffered of the next
        record is dropped, and ``close()`` reports no record cut short."""
        self._base += len(self._buf)
        self._buf = b""
        self._pos = 0

    def _report_truncated(self, left: int) -> None:
        raise NotImplementedError

    def _problem(self, what: str, at: int, severity: str = ERROR, check: str | None = None, **kw) -> None:
        if not self._cap.counted(check or what, severity):
            self._cap.append(Problem(what, self.format, at, severity, check, **kw))

    def _stop(self, what: str, at: int, **kw) -> None:
        self._problem(what, at, check="structure", **kw)
        self.stopped = True


class PcapParser(RecordParser):
    format = "pcap"

    def __init__(self, problems: list[Problem] | None = None) -> None:
        super().__init__(problems)
        self.linktype: int | None = None
        self.snaplen = 0
        self.cut_by_snaplen = 0  # packets whose captured length < original length
        self._record = None
        self._little = True
        self._divisor = 1_000_000
        self._max_caplen = STANDARD_MAX_PACKET
        # (shard, shards): records of other shards' connections (capture/flows.py) that the C
        # reader can tell are skipped, counted, and not given; (number, ts) of the last of them
        self.flows: tuple[int, int] | None = None
        self.skipped = 0
        self.last_skipped: tuple[int, float] = (0, 0.0)

    def packets(self, final: bool = False) -> Iterator[Packet]:
        """Yield the complete packets fed so far; ``final`` says no more bytes will come
        (the same as calling ``close()`` once the iteration is done)."""
        if self.stopped or (self._record is None and not self._read_header()):
            if final:
                self.close()
            return
        buf = self._buf
        pos = self._pos
        end = len(buf)
        unpack = self._record
        divisor = self._divisor
        linktype = self.linktype
        max_caplen = self._max_caplen
        n = self.count
        little = self._little
        kind = NATIVE_KINDS.get(linktype) if self.flows is not None and self.flows[1] > 1 else None
        while pos + 16 <= end:
            if _fast_records is not None:  # whole records in C, as many as it takes
                before = pos
                if kind is None:
                    batch, pos, n, cut = _fast_records(buf, pos, end, little, divisor, linktype,
                                                       max_caplen, n, _BATCH)
                else:
                    batch, pos, n, cut, skipped, *last = _fast_records_of(
                        buf, pos, end, little, divisor, linktype, max_caplen, n, _BATCH, kind, *self.flows)
                    if skipped:
                        self.skipped += skipped
                        self.last_skipped = tuple(last)
                self.count, self._pos = n, pos
                self.cut_by_snaplen += cut
                if pos != before:
                    yield from batch
                    continue
                # none taken: the record at pos is one for the Python loop below to report
            sec, frac, caplen, origlen = unpack(buf, pos)
            if caplen > max_caplen:
                self._stop(
                    f"packet record #{n + 1} claims {caplen} captured bytes (more than "
                    f"{max_caplen}): the file is corrupt from here",
                    self._base + pos,
                    expected=f"<= {max_caplen}",
                    found=caplen,
                )
                break
            data_end = pos + 16 + caplen
            if data_end > end:
                break
            if caplen < origlen:
                self.cut_by_snaplen += 1
            n += 1
            self.count = n
            self._pos = data_end
            yield (sec + frac / divisor, linktype, buf[pos + 16 : data_end], n)
            pos = data_end
        if final:
            self.close()

    def close(self) -> None:
        if not self._closed and self._record is None and not self.stopped:
            self._read_header()
        super().close()
        if self.cut_by_snaplen:
            self._problem(
                f"{self.cut_by_snaplen} of {self.count} packets were cut short by the snapshot "
                f"length {self.snaplen} (captured < original length); recapture with a larger "
                "snaplen (tcpdump -s 0) to see whole packets",
                None,
                WARNING,
                check="snaplen",
            )

    def _read_header(self) -> bool:
        buf = self._buf
        if len(buf) - self._pos < 24:
            return False
        at = self._pos
        magic = bytes(buf[at : at + 4])
        if magic not in MAGICS:
            self._stop(
                f"not a pcap file: magic {magic.hex()}",
                self._base + at,
                expected="a1b2c3d4 or a1b23c4d",
                found=magic.hex(),
            )
            return False
        order, self._divisor = MAGICS[magic]
        _major, _minor, _zone, _sigfigs, snaplen, linktype = struct.unpack_from(order + "HHiIII", buf, at + 4)
        self.snaplen = snaplen
        self.linktype = linktype & 0xFFFF  # the upper bits carry FCS information
        self._max_caplen = min(max(snaplen, STANDARD_MAX_PACKET), MAX_RECORD)
        self._record = struct.Struct(order + "IIII").unpack_from
        self._little = order == "<"
        self._pos = at + 24
        return True

    def _report_truncated(self, left: int) -> None:
        at = self._base + self._pos
        if self._record is None:
            self._problem(f"truncated file header: file ends after {left} of 24 bytes", at, check="truncated")
        elif left < 16:
            self._problem(
                f"truncated packet record header: file ends after {left} of 16 bytes",
                at,
                check="truncated",
            )
        else:
            caplen = self._record(self._buf, self._pos)[2]
            self._problem(
                f"truncated packet record #{self.count + 1}: file ends after "
                f"{left - 16} of {caplen} packet bytes",
                at,
                check="truncated",
                expected=caplen,
                found=left - 16,
            )
