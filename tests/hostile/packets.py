"""Ethernet/IPv4/TCP packets of made-up conversations, streamed into a pcap file.

Hand-built on purpose: the hostile shapes (a hole with 60k one-byte segments after it, 200k
SYNs) are what no real client sends. Sequence numbers are tracked per direction, so a
conversation is a real TCP exchange: handshake, data in MSS-sized segments, ACKs.
"""

from __future__ import annotations

import struct
from pathlib import Path

from tests.unit.capture.helpers import epb, idb, shb

ETHERNET = 1
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
MSS = 65000  # a loopback-sized segment: fewer packets, the same stream

_ETH = bytes.fromhex("020000000002" "020000000001") + b"\x08\x00"
_IP = struct.Struct("!BBHHHBBH4s4s")
_TCP = struct.Struct("!HHIIBBHHH")
_PCAP_HEADER = struct.Struct("<IHHiIII")
_PCAP_RECORD = struct.Struct("<IIII")


def ipv4(text: str) -> bytes:
    return bytes(int(part) for part in text.split("."))


def tcp_frame(src: bytes, dst: bytes, sport: int, dport: int, seq: int, ack: int, flags: int,
              payload: bytes = b"") -> bytes:
    """One Ethernet frame carrying an IPv4/TCP segment (IP checksum right, TCP's left 0)."""
    total = 40 + len(payload)
    head = _IP.pack(0x45, 0, total, 0, 0x4000, 64, 6, 0, src, dst)
    words = struct.unpack("!10H", head)
    csum = sum(words)
    csum = (csum & 0xFFFF) + (csum >> 16)
    csum = (csum & 0xFFFF) + (csum >> 16)
    head = head[:10] + struct.pack("!H", ~csum & 0xFFFF) + head[12:]
    tcp = _TCP.pack(sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 0x50, flags, 65535, 0, 0)
    return _ETH + head + tcp + payload


class PcapWriter:
    """Frames to a classic little-endian microsecond pcap, one microsecond apart by default."""

    def __init__(self, path: Path, start: float = 1_763_760_000.0, snaplen: int = 262144):
        self.file = open(path, "wb")
        self.file.write(_PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, snaplen, ETHERNET))
        self.micros = int(start * 1_000_000)

    def frame(self, data: bytes) -> None:
        self.micros += 1
        sec, usec = divmod(self.micros, 1_000_000)
        self.file.write(_PCAP_RECORD.pack(sec, usec, len(data), len(data)))
        self.file.write(data)

    def raw(self, data: bytes) -> None:
        """Bytes written as they are: a record header that lies, say."""
        self.file.write(data)

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class PcapngWriter(PcapWriter):
    """The same frames in a pcapng: one Ethernet interface, microsecond units from ``start``
    (which may lie far past what a 32-bit pcap or a calendar can hold)."""

    def __init__(self, path: Path, start_micros: int):
        self.file = open(path, "wb")
        self.file.write(shb() + idb(ETHERNET))
        self.micros = start_micros

    def frame(self, data: bytes) -> None:
        self.micros += 1
        self.file.write(epb(0, self.micros & 0xFFFFFFFFFFFFFFFF, data))


class Connection:
    """One TCP connection, client → broker; ``send``/``reply`` keep both sequence numbers."""

    def __init__(self, out, client: str = "10.0.0.1", sport: int = 40000,
                 server: str = "10.0.0.2", dport: int = 9092):
        self.out = out
        self.client, self.server = ipv4(client), ipv4(server)
        self.sport, self.dport = sport, dport
        self.client_seq, self.server_seq = 1_000_000, 5_000_000  # next byte each side sends

    def client_segment(self, offset: int, payload: bytes, flags: int = ACK | PSH) -> None:
        """A client segment ``offset`` bytes past the client's next sequence number."""
        self.out.frame(tcp_frame(self.client, self.server, self.sport, self.dport,
                                 self.client_seq + offset, self.server_seq, flags, payload))

    def server_segment(self, payload: bytes = b"", flags: int = ACK, ack: int | None = None) -> None:
        self.out.frame(tcp_frame(self.server, self.client, self.dport, self.sport, self.server_seq,
                                 self.client_seq if ack is None else ack, flags, payload))

    def syn(self) -> None:
        self.out.frame(tcp_frame(self.client, self.server, self.sport, self.dport,
                                 self.client_seq - 1, 0, SYN))

    def handshake(self) -> None:
        self.syn()
        self.out.frame(tcp_frame(self.server, self.client, self.dport, self.sport,
                                 self.server_seq - 1, self.client_seq, SYN | ACK))
        self.server_segment()
        self.client_segment(0, b"", ACK)

    def send(self, data: bytes, mss: int = MSS) -> None:
        for at in range(0, len(data), mss):
            self.client_segment(0, data[at:at + mss])
            self.client_seq += len(data[at:at + mss])
            self.server_segment()

    def reply(self, data: bytes, mss: int = MSS) -> None:
        for at in range(0, len(data), mss):
            chunk = data[at:at + mss]
            self.server_segment(chunk, ACK | PSH)
            self.server_seq += len(chunk)
            self.client_segment(0, b"", ACK)

    def close(self) -> None:
        self.client_segment(0, b"", FIN | ACK)
        self.client_seq += 1
        self.server_segment(b"", FIN | ACK)
        self.server_seq += 1
        self.client_segment(0, b"", ACK)
