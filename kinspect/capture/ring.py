"""Live packets from AF_PACKET TPACKET_V3 rings, in process: one ring per interface.

The kernel fills blocks of a memory-mapped ring and hands each to user space whole (when it is
full, or ``BLOCK_TIMEOUT_MS`` after its first packet); ``read_block`` copies a block's packets
out and gives it back. That walk is the per-packet work: kinspect/native/_ring.c does it in C,
``read_block_py`` below is its pure-Python twin (tests/unit/native/test_ring.py holds them equal).

Sockets are SOCK_DGRAM: every packet starts at its IP header (link type RAW), whatever the
interface, so that ``any`` and several interfaces give one link type. The BPF filter, compiled
by libpcap for that link type (through scapy's compile_filter, which needs no privilege), runs
in the kernel; on a loopback interface it also drops the outgoing copy of each packet, which
loopback shows twice. Kernel drops come from PACKET_STATISTICS (tpacket_stats_v3).
"""

from __future__ import annotations

import ctypes
import mmap
import select
import socket
import struct
import time

from kinspect import native
from kinspect.capture.stream import TICK

SOL_PACKET = 263
PACKET_VERSION = 10
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
TPACKET_V3 = 2
ETH_P_ALL = 0x0003
SO_ATTACH_FILTER = 26
LINKTYPE_RAW = 101
DLT_RAW = 12          # libpcap's number for raw IP, which compile_filter wants
BLOCK_SIZE = 1 << 20  # a loopback segment (64 KiB) fits many times over
FRAME_SIZE = 1 << 11
BLOCK_TIMEOUT_MS = 20  # a block with packets is handed over at most this late: the line delay's floor
POLL_MS = 100         # a tick at least this often when nothing comes
TP_STATUS_USER = 1

_u32 = struct.Struct("=I").unpack_from
_head = struct.Struct("=IIIII").unpack_from  # tpacket3_hdr: next, sec, nsec, snaplen, len
_u16 = struct.Struct("=H").unpack_from
_block = struct.Struct("=III").unpack_from   # block_desc at 12: num_pkts, offset_to_first_pkt, blk_len


def read_block_py(ring, offset: int, linktype: int, number: int):
    """The pure-Python twin of _ring.read_block (see its comment): a ready block's packets as
    (ts, linktype, data, number) tuples (ts in whole microseconds, as capture files have them), with the last number and the count of truncated
    packets, then the block goes back to the kernel; None when the block is not ready."""
    if offset < 0 or offset + 48 > len(ring):
        raise ValueError("read_block: offset outside the ring")
    if not _u32(ring, offset + 8)[0] & TP_STATUS_USER:
        return None
    count, pos, blk_len = _block(ring, offset + 12)
    blk_len = min(blk_len, len(ring) - offset)
    packets = []
    truncated = 0
    try:
        for _ in range(count):
            if pos < 48 or pos + 48 > blk_len:
                break
            at = offset + pos
            nxt, sec, nsec, snaplen, length = _head(ring, at)
            start = pos + _u16(ring, at + 24)[0]
            if start + snaplen > blk_len:
                break
            if snaplen < length:
                truncated += 1
            number += 1
            packets.append(((sec * 1_000_000 + nsec // 1000) / 1e6, linktype, ring[offset + start:offset + start + snaplen], number))
            if nxt == 0:
                break
            pos += nxt
    finally:
        ring[offset + 8:offset + 12] = b"\0\0\0\0"  # TP_STATUS_KERNEL: the block is the kernel's again
    return packets, number, truncated


_read_block = native.ring.read_block if native.ring is not None else read_block_py


class RingError(OSError):
    """A ring could not be set up; ``errno`` tells permission (EPERM) from the rest."""


def compile_bpf(expression: str, linktype: int = DLT_RAW):
    """A libpcap-compiled BPF program (scapy's compile_filter: no root needed); ValueError
    with libpcap's message when the expression does not compile."""
    from scapy.arch.common import compile_filter  # a dependency of kinspect: main() says so if missing
    from scapy.error import Scapy_Exception

    try:
        return compile_filter(expression, linktype=linktype)
    except Scapy_Exception as e:
        raise ValueError(str(e).strip()) from None


def _attach(sock: socket.socket, program) -> None:
    """SO_ATTACH_FILTER with a compiled program (struct sock_fprog: u16 length, pointer)."""
    address = ctypes.addressof(program.bf_insns.contents)
    fprog = struct.pack("HL", program.bf_len, address) if struct.calcsize("P") == 8 else \
        struct.pack("HI", program.bf_len, address)
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


class _Ring:
    __slots__ = ("name", "sock", "ring", "blocks", "current", "received", "dropped", "freezes")

    def __init__(self, name: str, bpf: str, buffer_bytes: int):
        self.name = name
        self.received = self.dropped = self.freezes = 0
        loopback = name != "any" and _is_loopback(name)
        expression = f"({bpf}) and inbound" if loopback and bpf else "inbound" if loopback else bpf
        if name == "any":
            lo = [i for i, n in socket.if_nameindex() if _is_loopback(n)]
            if lo:  # loopback's outgoing copies, on any
                dup = " or ".join(f"ifindex {i}" for i in lo)
                expression = f"({bpf}) and not (outbound and ({dup}))" if bpf else f"not (outbound and ({dup}))"
        program = compile_bpf(expression) if expression else None
        self.blocks = max(2, buffer_bytes // BLOCK_SIZE)
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, 0)  # no packet until bound
        except PermissionError as e:
            raise RingError(e.errno, "opening an AF_PACKET socket needs CAP_NET_RAW") from None
        try:
            # the filter goes on before the socket is bound: no packet passes unfiltered, and
            # none of another interface comes in before the bind names this one
            if program is not None:
                _attach(sock, program)
            sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
            # tpacket_req3: block_size, block_nr, frame_size, frame_nr, retire_blk_tov, sizeof_priv, feature_req_word
            req = struct.pack("IIIIIII", BLOCK_SIZE, self.blocks, FRAME_SIZE,
                              BLOCK_SIZE // FRAME_SIZE * self.blocks, BLOCK_TIMEOUT_MS, 0, 0)
            sock.setsockopt(SOL_PACKET, PACKET_RX_RING, req)
            self.ring = mmap.mmap(sock.fileno(), BLOCK_SIZE * self.blocks, mmap.MAP_SHARED,
                                  mmap.PROT_READ | mmap.PROT_WRITE)
            sock.bind((name if name != "any" else "", ETH_P_ALL))  # packets of this interface from now
        except OSError as e:
            sock.close()
            raise RingError(e.errno, f"{name}: {e.strerror or e}") from None
        self.sock = sock
        self.current = 0

    def stats(self) -> None:
        """Add the kernel's counters since the last call (reading them resets them)."""
        packets, drops, freezes = struct.unpack("III", self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 12))
        self.received += packets  # the kernel counts the dropped among the received
        self.dropped += drops
        self.freezes += freezes

    def close(self) -> None:
        try:
            self.ring.close()
        finally:
            self.sock.close()


def _is_loopback(name: str) -> bool:
    try:
        with open(f"/sys/class/net/{name}/type") as f:
            return f.read().strip() == "772"  # ARPHRD_LOOPBACK
    except OSError:
        return name == "lo"


class RingSource:
    """A PacketSource (see pipeline.py) over one ring per interface; ticks every POLL_MS."""

    backend = "ring"
    size = None

    def __init__(self, interfaces: list[str], bpf: str, buffer_mb: int):
        self.problems: list = []
        self.truncated = 0
        self._stop = False
        per_ring = max(2 * BLOCK_SIZE, (buffer_mb << 20) // max(1, len(interfaces)))
        self.rings: list[_Ring] = []
        try:
            for name in interfaces:
                self.rings.append(_Ring(name, bpf, per_ring))
        except BaseException:
            self.close()
            raise
        self._last_stats = time.monotonic()
        self._totals = {}  # interface -> (received, dropped) of the rings closed

    @property
    def bytes_read(self) -> int:
        return 0

    def stop(self) -> None:
        """End packets() at its next wake-up (a signal handler may call this)."""
        self._stop = True

    def statistics(self) -> dict:
        """Kernel counters so far: received (drops included), dropped, per interface too."""
        interfaces = dict(self._totals)
        for r in self.rings:
            r.stats()
            interfaces[r.name] = {"received": r.received, "dropped": r.dropped}
        return {"received": sum(c["received"] for c in interfaces.values()),
                "dropped": sum(c["dropped"] for c in interfaces.values()),
                "interfaces": interfaces, "truncated": self.truncated, "final": not self.rings}

    def packets(self):
        rings = self.rings
        poller = select.poll()
        for r in rings:
            poller.register(r.sock.fileno(), select.POLLIN | select.POLLERR)
        number = 0
        read = _read_block
        while not self._stop:
            got = False
            for r in rings:
                while True:
                    out = read(r.ring, r.current * BLOCK_SIZE, LINKTYPE_RAW, number)
                    if out is None:
                        break
                    got = True
                    packets, number, truncated = out
                    r.current = (r.current + 1) % r.blocks
                    self.truncated += truncated
                    yield from packets
                    if self._stop:
                        break
            if not got:
                try:
                    poller.poll(POLL_MS)
                except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
                    pass
                yield (time.time(), TICK, b"", 0)
            elif time.monotonic() - self._last_stats > POLL_MS / 1000:  # busy: tick anyway
                self._last_stats = time.monotonic()
                yield (time.time(), TICK, b"", 0)
        # what the kernel handed over before the stop is still read
        for r in rings:
            while True:
                out = read(r.ring, r.current * BLOCK_SIZE, LINKTYPE_RAW, number)
                if out is None:
                    break
                packets, number, truncated = out
                r.current = (r.current + 1) % r.blocks
                self.truncated += truncated
                yield from packets

    def close(self) -> None:
        """Close the rings, keeping their final counters for statistics()."""
        for r in self.rings:
            try:
                r.stats()
            except OSError:
                pass
            self._totals[r.name] = {"received": r.received, "dropped": r.dropped}
            r.close()
        self.rings = []

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
