"""A capture's TCP connections dealt among K shards, the same way in every process.

``flow_shard`` hashes a connection's two ends (address, then port in network order), taken in
byte order so that both directions agree, with CRC-32 (not Python's salted hash). The C reader
(kinspect/native/_packets.c, pcap_records_of) is its twin: it drops other shards' packets
before they become Python objects.
"""

from __future__ import annotations

import zlib


def flow_shard(src: bytes, sport: int, dst: bytes, dport: int, shards: int) -> int:
    """The shard (0..shards-1) of the connection between (src, sport) and (dst, dport)."""
    a = src + sport.to_bytes(2, "big")
    b = dst + dport.to_bytes(2, "big")
    return zlib.crc32(a + b if a <= b else b + a) % shards
