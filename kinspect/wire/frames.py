"""Splits one direction of a TCP byte stream into Kafka frames (int32 size, then the payload).

Sans-I/O: ``feed`` takes bytes as they arrive and returns the frames completed so far; a partial
frame stays buffered ("need more bytes" is simply an empty list). Lost bytes (``gap``) either fall
inside a frame whose size is known, and then exactly that frame is reported damaged and the next
one starts where the size says, or they make the boundary unknown, and then the buffer hunts for
the next plausible frame start with a predicate supplied by the caller.
"""

from __future__ import annotations

import struct
from typing import Callable, NamedTuple

_I32 = struct.Struct(">i")
_new = tuple.__new__  # _new(Frame, (...)): a Frame without the Python-level __new__ NamedTuple gives it
# A frame at least this big that is still incomplete collects its bytes as a list of parts,
# joined once when it completes: growing one bytearray by each segment would copy it again
# and again as it is reallocated (a 1 MiB Fetch response arrives in ~700 segments). Smaller
# frames, a few segments at most, go through the one buffer.
COLLECT_AT = 1 << 12
# The largest frame followed by default (--max-frame): above Kafka's socket.request.max.bytes
# (100 MiB) and fetch.max.bytes (50 MiB) defaults, and small enough that a frame, its copy
# and its decoding stay inside kinspect's memory bound. Bigger frames are skipped, with a notice.
MAX_FRAME = 128 << 20


class Frame(NamedTuple):
    payload: bytes          # the frame after its size; for a damaged frame, the bytes before the loss
    offset: int             # stream offset of the size field
    size: int               # the size field
    first_ts: float         # time of the packet carrying the frame's first byte
    ts: float               # time of the packet completing it
    damaged: int            # 0, or how many payload bytes were lost
    first_packet: int = 0   # the capture's number (Wireshark's frame number) of the first packet
    packet: int = 0         # and of the one completing it; 0: the source has no packet numbers


class Skipped(NamedTuple):
    """Bytes that could not be framed (hunting, oversize frame); reported as a notice."""
    offset: int
    length: int
    ts: float
    reason: str


Predicate = Callable[[bytes | bytearray, int, int], "bool | None"]


class FrameBuffer:
    __slots__ = ("max_frame", "plausible", "reserved", "packet", "_buf", "_pos", "_offset", "_hunting",
                 "_skip", "_first_ts", "_first_packet", "_damaged", "_parts", "_need", "_size")

    def __init__(self, plausible: Predicate, max_frame: int = MAX_FRAME, hunting: bool = False,
                 reserved: list | None = None, packet: list | None = None):
        """``reserved``: [payload bytes of the big frames being collected], shared by the buffers
        of a session, which together collect at most twice max_frame (a bigger frame is skipped).
        ``packet``: [the number of the packet being fed], set by whoever reads packets (a frame
        records it where it starts and ends), or [0] for a source without packets."""
        self.max_frame = max_frame
        self.packet = [0] if packet is None else packet
        self.plausible = plausible
        self.reserved = [0, 0] if reserved is None else reserved  # [bytes, the most asked for]
        self._buf = bytearray()
        self._pos = 0            # read position in _buf
        self._offset = 0         # stream offset of _buf[_pos]
        self._hunting = hunting
        self._skip = 0           # bytes still to discard (rest of an oversize or damaged frame)
        self._first_ts = None
        self._first_packet = 0
        self._damaged = None     # (Frame fields so far) of a frame hit by a gap
        self._parts = None       # payload parts of a big incomplete frame (see COLLECT_AT)
        self._need = 0           # bytes that frame still lacks
        self._size = 0           # its size field

    @property
    def buffered(self) -> int:
        if self._parts is not None:
            return 4 + self._size - self._need
        return len(self._buf) - self._pos

    def feed(self, data, ts: float) -> list:
        if self._first_ts is None and not self._buf and not self._hunting and not self._skip \
                and self._parts is None:
            return self._feed_fresh(data, ts)
        if self._parts is not None:
            need = self._need
            if len(data) < need:
                self._parts.append(data)
                self._need = need - len(data)
                return []
            out = [self._complete_parts(data[:need], ts)]
            data = data[need:]
            if not data:
                return out
        else:
            out = []
        if self._first_ts is None:
            self._first_ts = ts
            self._first_packet = self.packet[0]
        if self._skip:
            n = min(self._skip, len(data))
            self._skip -= n
            self._offset += n
            data = data[n:]
            if not self._skip:
                self._finish_skip(ts, out)
            if not data:
                return out
            self._first_ts = ts
            self._first_packet = self.packet[0]
        self._buf += data
        self._drain(ts, out)
        return out

    def _feed_fresh(self, data, ts: float) -> list:
        """``feed`` with nothing buffered (nearly every packet starts a frame): the whole frames
        it holds are cut from ``data`` itself; only the rest, if any, goes through the buffer."""
        out: list = []
        packet = self.packet[0]
        max_frame = self.max_frame
        end = len(data)
        pos = 0
        while end - pos >= 4:
            (size,) = _I32.unpack_from(data, pos)
            stop = pos + 4 + size
            if size < 0 or size > max_frame or stop > end:
                break
            out.append(_new(Frame, (bytes(data[pos + 4:stop]), self._offset, size, ts, ts, 0, packet, packet)))
            self._offset += 4 + size
            pos = stop
        if pos < end:
            self._first_ts = ts
            self._first_packet = packet
            self._buf += data[pos:] if pos else data
            self._drain(ts, out)
        return out

    def _complete_parts(self, last, ts: float) -> Frame:
        parts = self._parts
        parts.append(last)
        frame = Frame(b"".join(parts), self._offset, self._size, self._first_ts, ts, 0, self._first_packet,
                      self.packet[0])
        self._parts = None
        self.reserved[0] -= self._size
        self._offset += 4 + self._size
        self._first_ts = None
        return frame

    def _unite_parts(self) -> None:
        """Back to one buffer (size field, then the parts) for the rare paths: gaps, the end."""
        if self._parts is not None:
            self._buf = bytearray(_I32.pack(self._size)) + b"".join(self._parts)
            self._pos = 0
            self._parts = None
            self.reserved[0] -= self._size

    def gap(self, missing: int, ts: float) -> list:
        """``missing`` bytes were lost at the current end of the stream."""
        self._unite_parts()
        out: list = []
        if self._skip:
            n = min(self._skip, missing)
            self._skip -= n
            self._offset += n
            missing -= n
            if self._damaged is not None:
                self._damaged[5] += n
            if not self._skip:
                self._finish_skip(ts, out)
            if not missing:
                return out
        have = self.buffered
        if not self._hunting and have >= 4:
            (size,) = _I32.unpack_from(self._buf, self._pos)
            remaining = size - (have - 4)
            if 0 <= size <= self.max_frame and missing < remaining:
                # The loss falls inside this frame: keep its head, skip exactly to its end.
                payload = bytes(self._buf[self._pos + 4:])
                self._damaged = [payload, self._offset, size, self._first_ts, ts, missing, self._first_packet,
                                 self.packet[0]]
                self._skip = remaining - missing
                self._offset += have + missing
                self._reset_buffer()
                return out
        if have:
            out.append(Skipped(self._offset, have, ts, "stream gap: incomplete frame"))
        self._offset += have + missing
        self._reset_buffer()
        self._hunting = True
        self._first_ts = None
        return out

    def flush(self, ts: float) -> list:
        """End of stream: report what is left unframed."""
        if self._parts is not None:
            self._unite_parts()
        out: list = []
        if self._damaged is not None:
            self._damaged[5] += self._skip
            out.append(Frame(*self._damaged))
            self._damaged = None
        have = len(self._buf) - self._pos
        if have:
            out.append(Skipped(self._offset, have, ts, "stream ended inside a frame"))
            self._offset += have
        self._skip = 0
        self._reset_buffer()
        return out

    def _reset_buffer(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def _finish_skip(self, ts: float, out: list) -> None:
        if self._damaged is not None:
            self._damaged[4] = ts
            self._damaged[7] = self.packet[0]
            out.append(Frame(*self._damaged))
            self._damaged = None

    def _drain(self, ts: float, out: list) -> None:
        buf = self._buf
        pos = self._pos
        end = len(buf)
        max_frame = self.max_frame
        while True:
            if self._hunting:
                pos = self._hunt(pos, end, ts, out)
                if self._hunting:
                    break
            if end - pos < 4:
                break
            (size,) = _I32.unpack_from(buf, pos)
            if size < 0 or size > max_frame:
                if size > max_frame:
                    reason = f"frame of {size} bytes exceeds --max-frame {max_frame}: skipped"
                    have = end - pos
                    if have - 4 >= size:
                        out.append(Skipped(self._offset, 4 + size, ts, reason))
                        self._offset += 4 + size
                        pos += 4 + size
                        continue
                    out.append(Skipped(self._offset, 4 + size, ts, reason))
                    self._skip = size + 4 - have
                    self._offset += have
                    pos = end
                    break
                out.append(Skipped(self._offset, 0, ts, f"negative frame size {size}: resynchronising"))
                self._hunting = True
                continue
            stop = pos + 4 + size
            if stop > end:
                if size >= COLLECT_AT and self.reserved[0] + size > self.reserved[1]:
                    self.reserved[1] = self.reserved[0] + size
                if size >= COLLECT_AT and self.reserved[0] + size > 2 * max_frame:
                    out.append(Skipped(self._offset, 4 + size, ts, (
                        f"frame of {size} bytes skipped: with the frames being collected on other "
                        f"connections it would pass twice --max-frame {max_frame}")))
                    self._skip = stop - end
                    self._offset += end - pos
                    pos = end
                    break
                if size >= COLLECT_AT:
                    self.reserved[0] += size
                    self._parts = [buf[pos + 4:end]]
                    self._need = stop - end
                    self._size = size
                    pos = end
                break
            out.append(_new(Frame, (bytes(buf[pos + 4:stop]), self._offset, size, self._first_ts, ts, 0,
                                    self._first_packet, self.packet[0])))
            self._offset += 4 + size
            pos = stop
            if pos < end:  # the next frame starts in this packet
                self._first_ts = ts
                self._first_packet = self.packet[0]
            else:
                self._first_ts = None
        if pos == end:
            self._reset_buffer()
        elif pos > (1 << 16) and pos > end // 2:
            del buf[:pos]
            self._pos = 0
        else:
            self._pos = pos

    def _hunt(self, pos: int, end: int, ts: float, out: list) -> int:
        start = pos
        plausible = self.plausible
        verdict = False
        while pos < end:
            verdict = plausible(self._buf, pos, end)
            if verdict is None or verdict:
                break
            pos += 1
        if verdict:
            self._hunting = False
        if pos > start:
            out.append(Skipped(self._offset, pos - start, ts, "no frame boundary: skipped while resynchronising"))
            self._offset += pos - start
        return pos
