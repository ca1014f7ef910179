"""pcapng files, sans-I/O: feed bytes, iterate the complete packets.

Sections (SHB) set the byte order and reset the interfaces; interfaces (IDB) give each
packet its link type and timestamp unit (if_tsresol, if_tsoffset). Packets come from
Enhanced, Simple and obsolete Packet Blocks; every other block is skipped by its length, but
Decryption Secrets Blocks, whose secrets are kept as bytes in ``secrets`` for the layers above
(``editcap --inject-secrets tls,keys.txt``: a TLS key log).
A block whose length fields are inconsistent ends the parse with a Problem.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from kinspect.capture.pcap import MAX_RECORD, Packet, RecordParser
from kinspect.problems import WARNING

SHB = 0x0A0D0D0A
IDB = 1
OPB = 2
SPB = 3
EPB = 6
ISB = 5
DSB = 0x0000000A
TLS_KEY_LOG = 0x544C534B  # "TLSK": a Decryption Secrets Block holding an NSS key log
MAX_SECRETS = 64 << 20  # bytes of secrets kept from a file's DSBs
MAX_INTERFACES = 1 << 16  # interfaces kept per section (a real capture has a few)
BYTE_ORDER_MAGIC = 0x1A2B3C4D

BLOCK_NAMES = {
    SHB: "section header",
    IDB: "interface description",
    OPB: "packet",
    SPB: "simple packet",
    EPB: "enhanced packet",
}

OPT_END = 0
OPT_TSRESOL = 9
OPT_TSOFFSET = 14
ISB_IFRECV, ISB_IFDROP, ISB_OSDROP = 4, 5, 7  # interface statistics options (u64)

MICROSECONDS = 1_000_000


class PcapngParser(RecordParser):
    format = "pcapng"

    def __init__(self, problems=None) -> None:
        super().__init__(problems)
        self.sections = 0
        # per section: [(linktype, timestamp divisor, timestamp offset seconds, snaplen)]
        self.interfaces: list[tuple[int, int, int, int]] = []
        self._order: str | None = None
        self._last_ts = 0.0
        # interface id -> {"ifrecv", "ifdrop", "osdrop"}: the latest interface statistics block's
        # counters (dumpcap writes one per interface when it stops), for live drop reports
        self.statistics: dict[int, dict[str, int]] = {}
        # (secrets type, secrets bytes) of each Decryption Secrets Block, in file order
        self.secrets: list[tuple[int, bytes]] = []
        self._secrets_bytes = 0
        self._set_byte_order("<")

    def _set_byte_order(self, order: str) -> None:
        self._head = struct.Struct(order + "II").unpack_from
        self._u32 = struct.Struct(order + "I").unpack_from
        self._epb = struct.Struct(order + "IIIIIII").unpack_from
        self._opb = struct.Struct(order + "IIHxxIIII").unpack_from

    def packets(self, final: bool = False) -> Iterator[Packet]:
        """Yield the complete packets fed so far; ``final``: no more bytes will come."""
        buf = self._buf
        end = len(buf)
        pos = self._pos
        n = self.count
        last_ts = self._last_ts
        if self._order is None and not self.stopped and pos + 12 <= end:
            if buf[pos : pos + 4] != b"\x0a\x0d\x0d\x0a":
                self._stop(f"not a pcapng file: first block type {bytes(buf[pos:pos + 4]).hex()}", self._base + pos)
        if self.stopped:
            if final:
                self.close()
            return
        head, u32, epb, opb, ifaces = self._head, self._u32, self._epb, self._opb, self.interfaces
        while pos + 12 <= end:
            if pos + 28 <= end:
                # fast path: a well-formed enhanced packet block
                btype, blen, iface, hi, lo, caplen, _origlen = epb(buf, pos)
                if btype == EPB and 32 + caplen <= blen <= MAX_RECORD and not blen & 3 and iface < len(ifaces):
                    block_end = pos + blen
                    if block_end > end:
                        break
                    if u32(buf, block_end - 4)[0] == blen:
                        linktype, divisor, ts_offset, _snaplen = ifaces[iface]
                        last_ts = ((hi << 32) | lo) / divisor + ts_offset
                        n += 1
                        self.count = n
                        self._pos = block_end
                        self._last_ts = last_ts
                        yield (last_ts, linktype, buf[pos + 28 : pos + 28 + caplen], n)
                        pos = block_end
                        continue
            btype, blen = head(buf, pos)
            if btype == SHB:
                consumed = self._section(buf, pos, end)
                if not consumed:
                    break
                pos += consumed
                self.blocks += 1
                head, u32, epb, opb, ifaces = self._head, self._u32, self._epb, self._opb, self.interfaces
                continue
            if blen < 12 or blen & 3 or blen > MAX_RECORD:
                self._bad_length(pos, btype, blen)
                break
            block_end = pos + blen
            if block_end > end:
                break
            trailer = u32(buf, block_end - 4)[0]
            if trailer != blen:
                self._bad_length(pos, btype, blen, trailer)
                break
            if btype == EPB or btype == OPB:
                if blen < 32:
                    self._bad_block(pos, btype, blen)
                    pos = block_end
                    self.blocks += 1
                    continue
                _t, _l, iface, hi, lo, caplen, _origlen = (epb if btype == EPB else opb)(buf, pos)
                if iface >= len(ifaces) or 32 + caplen > blen:
                    self._bad_packet(pos, btype, iface, caplen, blen)
                    pos = block_end
                    self.blocks += 1
                    continue
                linktype, divisor, ts_offset, _snaplen = ifaces[iface]
                last_ts = ((hi << 32) | lo) / divisor + ts_offset
                data = buf[pos + 28 : pos + 28 + caplen]
            elif btype == SPB:
                if blen < 16:
                    self._bad_block(pos, btype, blen)
                    pos = block_end
                    self.blocks += 1
                    continue
                if not ifaces:
                    self._bad_packet(pos, btype, 0, 0, blen)
                    pos = block_end
                    self.blocks += 1
                    continue
                linktype, _divisor, _ts_offset, snaplen = ifaces[0]
                caplen = min(u32(buf, pos + 8)[0], blen - 16)
                if snaplen:
                    caplen = min(caplen, snaplen)
                data = buf[pos + 12 : pos + 12 + caplen]
            else:
                if btype == IDB:
                    self._interface(buf, pos, blen)
                elif btype == ISB:
                    self._statistics(buf, pos, blen)
                elif btype == DSB:
                    self._secrets(buf, pos, blen)
                pos = block_end
                self.blocks += 1
                continue
            pos = block_end
            n += 1
            self.count = n
            self._pos = pos
            self._last_ts = last_ts
            yield (last_ts, linktype, data, n)
        self._pos = pos
        if final:
            self.close()

    def _section(self, buf, pos: int, end: int) -> int:
        """Start a section at ``pos``: returns the block length, 0 when more bytes are needed."""
        bom = buf[pos + 8 : pos + 12]
        if bom == b"\x4d\x3c\x2b\x1a":
            order = "<"
        elif bom == b"\x1a\x2b\x3c\x4d":
            order = ">"
        else:
            self._stop(
                f"section header has an unknown byte-order magic {bytes(bom).hex()}",
                self._base + pos + 8,
                expected="1a2b3c4d",
                found=bytes(bom).hex(),
            )
            return 0
        blen = struct.unpack_from(order + "I", buf, pos + 4)[0]
        if blen < 28 or blen & 3 or blen > MAX_RECORD:
            self._bad_length(pos, SHB, blen)
            return 0
        if pos + blen > end:
            return 0
        trailer = struct.unpack_from(order + "I", buf, pos + blen - 4)[0]
        if trailer != blen:
            self._bad_length(pos, SHB, blen, trailer)
            return 0
        major = struct.unpack_from(order + "H", buf, pos + 12)[0]
        if major != 1:
            what = f"section header version {major}.x is not 1.x; reading it as 1.0"
            self._problem(what, self._base + pos + 12, WARNING, "version")
        self._order = order
        self._set_byte_order(order)
        self.interfaces = []
        self.sections += 1
        return blen

    def _interface(self, buf, pos: int, blen: int) -> None:
        if len(self.interfaces) >= MAX_INTERFACES:
            self._problem(f"more than {MAX_INTERFACES} interfaces in one section: the rest are not kept, and "
                          f"their packets are skipped", self._base + pos, WARNING, "limit")
            return
        if blen < 20:
            self._bad_block(pos, IDB, blen)
            self.interfaces.append((0, MICROSECONDS, 0, 0))  # keep later interface ids aligned
            return
        order = self._order
        linktype, snaplen = struct.unpack_from(order + "HxxI", buf, pos + 8)
        divisor = MICROSECONDS
        ts_offset = 0
        for code, value, length in self._options(buf, pos + 16, pos + blen - 4):
            if code == OPT_TSRESOL and length >= 1:
                resol = buf[value]
                divisor = 2 ** (resol & 0x7F) if resol & 0x80 else 10**resol
            elif code == OPT_TSOFFSET and length >= 8:
                ts_offset = struct.unpack_from(order + "q", buf, value)[0]
        self.interfaces.append((linktype, divisor, ts_offset, snaplen))

    def _statistics(self, buf, pos: int, blen: int) -> None:
        """An interface statistics block: keep its received and dropped counters."""
        if blen < 24:
            return
        order = self._order
        iface = struct.unpack_from(order + "I", buf, pos + 8)[0]
        if iface >= len(self.interfaces):  # no such interface: nothing to report it for
            return
        counters: dict[str, int] = {}
        for code, value, length in self._options(buf, pos + 20, pos + blen - 4):
            if length == 8 and code in (ISB_IFRECV, ISB_IFDROP, ISB_OSDROP):
                name = {ISB_IFRECV: "ifrecv", ISB_IFDROP: "ifdrop", ISB_OSDROP: "osdrop"}[code]
                counters[name] = struct.unpack_from(order + "Q", buf, value)[0]
        self.statistics[iface] = counters

    def _secrets(self, buf, pos: int, blen: int) -> None:
        """A Decryption Secrets Block: type, length, the secrets (kept as bytes, not read here)."""
        if blen < 20:
            self._problem(f"decryption secrets block is too short ({blen} bytes); skipped", self._base + pos,
                          check="structure")
            return
        kind, size = struct.unpack_from(self._order + "II", buf, pos + 8)
        if 16 + size + 4 > blen:
            self._problem(f"decryption secrets block claims {size} bytes of secrets but holds only {blen - 20}; "
                          f"skipped", self._base + pos, check="structure")
            return
        if self._secrets_bytes + size > MAX_SECRETS:
            self._problem(f"more than {MAX_SECRETS} bytes of decryption secrets; the rest are not read",
                          self._base + pos, WARNING, "limit")
            return
        self._secrets_bytes += size
        self.secrets.append((kind, bytes(buf[pos + 16:pos + 16 + size])))

    def _options(self, buf, opt: int, opts_end: int):
        """A block's options from ``opt`` to ``opts_end``: (code, value position, length)."""
        order = self._order
        while opt + 4 <= opts_end:
            code, length = struct.unpack_from(order + "HH", buf, opt)
            value = opt + 4
            if code == OPT_END or value + length > opts_end:
                return
            yield code, value, length
            opt = value + ((length + 3) & ~3)

    def _bad_length(self, pos: int, btype: int, blen: int, trailer: int | None = None) -> None:
        name = BLOCK_NAMES.get(btype, f"type {btype:#x}")
        if trailer is None:
            what = f"{name} block has an impossible length {blen} (must be a multiple of 4, 12..{MAX_RECORD})"
        else:
            what = f"{name} block length {blen} does not match its trailing copy {trailer}"
        self._stop(what + ": the file is corrupt from here", self._base + pos, found=blen)

    def _bad_block(self, pos: int, btype: int, blen: int) -> None:
        what = f"{BLOCK_NAMES[btype]} block is too short ({blen} bytes); skipped"
        self._problem(what, self._base + pos, check="structure")

    def _bad_packet(self, pos: int, btype: int, iface: int, caplen: int, blen: int) -> None:
        if iface >= len(self.interfaces):
            described = len(self.interfaces)
            what = f"{BLOCK_NAMES[btype]} block names interface {iface}, but the section describes {described}"
        else:
            what = f"{BLOCK_NAMES[btype]} block claims {caplen} captured bytes but holds only {blen - 32}"
        self._problem(what + "; skipped", self._base + pos, check="structure")

    def _report_truncated(self, left: int) -> None:
        at = self._base + self._pos
        if left < 12:
            self._problem(f"truncated block header: file ends after {left} bytes", at, check="truncated")
            return
        btype, blen = self._head(self._buf, self._pos)
        if btype == SHB:
            self._problem(f"truncated section header block: file ends after {left} bytes", at, check="truncated")
            return
        name = BLOCK_NAMES.get(btype, f"type {btype:#x}")
        what = f"truncated {name} block: file ends after {left} of {blen} bytes"
        self._problem(what, at, check="truncated", expected=blen, found=left)
