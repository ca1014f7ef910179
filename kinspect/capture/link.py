"""Link, IP and TCP headers: from a captured frame to the TCP segment it carries.

``decode_tcp(linktype, data)`` runs once per packet, so it works on offsets into the frame
and slices only the addresses and the payload. Anything that is not an unfragmented TCP
segment over IPv4 or IPv6 gives None.
"""

from __future__ import annotations

import struct
from functools import partial

from kinspect import native
from kinspect.addresses import format_addr  # noqa: F401  (kept here for callers of capture.link)

TcpSegment = tuple  # (src_ip, dst_ip, sport, dport, seq, flags, payload, ack or None)

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
VLAN_TAGS = (0x8100, 0x88A8, 0x9100)

IPPROTO_TCP = 6
ACK = 0x10
IPV6_SKIPPED_HEADERS = (0, 43, 60)  # hop-by-hop, routing, destination options
IPV6_FRAGMENT = 44

AF_INET = 2
AF_INET6_BSD = (24, 28, 30)  # NetBSD/OpenBSD, FreeBSD, Darwin

# linktype numbers
NULL, ETHERNET, RAW_OLD_A, RAW_OLD_B, RAW, LOOP, LINUX_SLL, LINUX_SLL2, IPV4, IPV6 = (
    0, 1, 12, 14, 101, 108, 113, 276, 228, 229,
)

_u16 = struct.Struct("!H").unpack_from
_ipv4_len_frag = struct.Struct("!H2xH").unpack_from  # total length, flags + fragment offset
_tcp = struct.Struct("!HHIIBB").unpack_from  # ports, seq, ack, data offset, flags


def _ipv4(data, off: int):
    n = len(data)
    if n < off + 20:
        return None
    vihl = data[off]
    ihl = (vihl & 15) << 2
    if vihl >> 4 != 4 or ihl < 20 or data[off + 9] != IPPROTO_TCP:
        return None
    total, frag = _ipv4_len_frag(data, off + 2)
    if frag & 0x3FFF:  # more-fragments flag or a fragment offset: not a whole segment
        return None
    # total length trims Ethernet padding; 0 means segmentation offload, use what was captured
    end = off + total if total else n
    if end > n:
        end = n  # cut by the snaplen
    return _tcp_segment(data, off + ihl, end, data[off + 12 : off + 16], data[off + 16 : off + 20])


def _ipv6(data, off: int):
    n = len(data)
    if n < off + 40 or data[off] >> 4 != 6:
        return None
    plen = _u16(data, off + 4)[0]
    proto = data[off + 6]
    end = off + 40 + plen if plen else n
    if end > n:
        end = n
    src = data[off + 8 : off + 24]
    dst = data[off + 24 : off + 40]
    p = off + 40
    while proto != IPPROTO_TCP:
        if p + 8 > end:
            return None
        if proto in IPV6_SKIPPED_HEADERS:
            proto = data[p]
            p += (data[p + 1] + 1) << 3
        elif proto == IPV6_FRAGMENT:
            if _u16(data, p + 2)[0] & 0xFFF9:  # fragment offset or more-fragments flag
                return None
            proto = data[p]
            p += 8
        else:
            return None
    return _tcp_segment(data, p, end, src, dst)


def _tcp_segment(data, t: int, end: int, src, dst):
    if t + 20 > end:
        return None
    sport, dport, seq, ack, data_offset, flags = _tcp(data, t)
    payload_at = t + ((data_offset >> 4) << 2)
    if data_offset < 0x50 or payload_at > end:
        return None
    return (src, dst, sport, dport, seq, flags, data[payload_at:end], ack if flags & ACK else None)


def _by_version(data, off: int):
    if len(data) <= off:
        return None
    version = data[off] >> 4
    if version == 4:
        return _ipv4(data, off)
    if version == 6:
        return _ipv6(data, off)
    return None


def _by_ethertype(data, etype: int, off: int):
    while etype in VLAN_TAGS:
        if len(data) < off + 4:
            return None
        etype = _u16(data, off + 2)[0]
        off += 4
    if etype == ETH_IPV4:
        return _ipv4(data, off)
    if etype == ETH_IPV6:
        return _ipv6(data, off)
    return None


def _ethernet(data):
    if len(data) < 14:
        return None
    etype = _u16(data, 12)[0]
    if etype == ETH_IPV4:
        return _ipv4(data, 14)
    return _by_ethertype(data, etype, 14)


def _linux_sll(data):
    if len(data) < 16:
        return None
    return _by_ethertype(data, _u16(data, 14)[0], 16)


def _linux_sll2(data):
    if len(data) < 20:
        return None
    return _by_ethertype(data, _u16(data, 0)[0], 20)


def _bsd_loopback(data):
    # the address family is a 4-byte integer in the capturing host's byte order (NULL) or
    # big-endian (LOOP); families are small, so it sits in the first or the last byte
    if len(data) < 4:
        return None
    family = data[0] or data[3]
    if family == AF_INET:
        return _ipv4(data, 4)
    if family in AF_INET6_BSD:
        return _ipv6(data, 4)
    return None


def _raw(data):
    return _by_version(data, 0)


def _raw_ipv4(data):
    return _ipv4(data, 0)


def _raw_ipv6(data):
    return _ipv6(data, 0)


# The common case in one unpack: a link header whose type field says IPv4, then an IPv4
# header without options and a TCP header. Anything else takes the careful path above.
_IPV4_TCP = "BxHxxHxB2x4s4sHHIIBB"  # vihl, total, frag, proto, src, dst, sport, dport, seq, ack, doff, flags


def _fast_ipv4(link_format: str, ip_at: int, ipv4_tags: tuple, careful, native_kind: int | None):
    """A decoder trying one unpack of ``link_format`` (which yields the link's protocol tag)
    plus IPv4 and TCP at ``ip_at``; when the tag is not in ``ipv4_tags`` or anything is
    unusual, it hands the frame to ``careful``. With a ``native_kind`` (how
    kinspect/native/_packets.c knows the link), its C twin does it."""
    if native_kind is not None:
        return partial(native.packets.ipv4_tcp, native_kind, careful)
    unpack = struct.Struct("!" + link_format + _IPV4_TCP).unpack_from
    need = ip_at + 40

    def decode(data):
        if len(data) >= need:
            tag, vihl, total, frag, proto, src, dst, sport, dport, seq, ack, doff, flags = unpack(data)
            if tag in ipv4_tags and vihl == 0x45 and proto == IPPROTO_TCP and not frag & 0x3FFF and doff >= 0x50:
                n = len(data)
                end = ip_at + total if total else n
                if end > n:
                    end = n
                payload_at = ip_at + 20 + ((doff >> 4) << 2)
                if payload_at <= end:
                    return (src, dst, sport, dport, seq, flags, data[payload_at:end], ack if flags & ACK else None)
        return careful(data)

    return decode


# How kinspect/native/_packets.c knows each link type with a fast path (its link kinds)
NATIVE_KINDS = {ETHERNET: 0, LINUX_SLL: 1, LINUX_SLL2: 2, NULL: 3, LOOP: 3, RAW: 4, RAW_OLD_A: 4, RAW_OLD_B: 4,
                IPV4: 4}


def decoders(in_c: bool) -> dict:
    """Link type → ``data -> segment | None``; ``in_c``: the fast paths in kinspect.native."""
    def kind(linktype):
        return NATIVE_KINDS[linktype] if in_c else None
    return {
        ETHERNET: _fast_ipv4("12xH", 14, (ETH_IPV4,), _ethernet, kind(ETHERNET)),
        LINUX_SLL: _fast_ipv4("14xH", 16, (ETH_IPV4,), _linux_sll, kind(LINUX_SLL)),
        LINUX_SLL2: _fast_ipv4("H18x", 20, (ETH_IPV4,), _linux_sll2, kind(LINUX_SLL2)),
        NULL: _fast_ipv4("I", 4, (AF_INET, AF_INET << 24), _bsd_loopback, kind(NULL)),
        LOOP: _fast_ipv4("I", 4, (AF_INET, AF_INET << 24), _bsd_loopback, kind(LOOP)),
        RAW: _fast_ipv4("0s", 0, (b"",), _raw, kind(RAW)),  # no link header: "0s" yields an empty tag
        RAW_OLD_A: _fast_ipv4("0s", 0, (b"",), _raw, kind(RAW_OLD_A)),
        RAW_OLD_B: _fast_ipv4("0s", 0, (b"",), _raw, kind(RAW_OLD_B)),
        IPV4: _fast_ipv4("0s", 0, (b"",), _raw_ipv4, kind(IPV4)),
        IPV6: _raw_ipv6,
    }


DECODERS = decoders(native.packets is not None)


def decoder_for(linktype: int):
    """The ``data -> segment | None`` function behind decode_tcp for one link type (None if
    unknown), for a loop that wants to skip the per-packet lookup. ``data`` must be bytes."""
    return DECODERS.get(linktype)


def decode_tcp(linktype: int, data):
    """``(src_ip, dst_ip, sport, dport, seq, flags, payload, ack)`` for a TCP segment, else None.
    ``ack`` is the acknowledgment number, or None when the ACK flag is not set.

    Addresses are 4 or 16 bytes; flags is the TCP flags byte (FIN 1, SYN 2, RST 4, PSH 8,
    ACK 16); payload excludes link padding. IP fragments and unknown link types give None.
    Addresses and payload are bytes even when ``data`` is a memoryview (it is copied).
    """
    decoder = DECODERS.get(linktype)
    if decoder is None:
        return None
    if type(data) is not bytes:
        data = bytes(data)
    return decoder(data)

