"""The TPACKET_V3 block walk: the C accelerator and its pure-Python twin give the same packets
and hand the block back the same way (blocks laid out here as the kernel lays them out; the live
rings are compared in tests/integration/test_sniff_lab.py)."""

import mmap
import struct

import pytest

from kinspect import native
from kinspect.capture import ring
from tests.unit.native import needs_c

BLOCK = 1 << 16
WALKS = [ring.read_block_py] + ([native.ring.read_block] if native.ring is not None else [])


def lay_block(packets, status=1, num=None, first=48, next_override=None):
    """A block as the kernel writes it: descriptor, then tpacket3_hdr + sockaddr_ll + data."""
    buf = mmap.mmap(-1, BLOCK)
    pos = first
    for i, (sec, nsec, data, length) in enumerate(packets):
        mac = 48 + 20 + 2  # header, sockaddr_ll, alignment
        size = (mac + len(data) + 15) & ~15
        last = i == len(packets) - 1
        nxt = 0 if last else size
        if next_override is not None and i == 0:
            nxt = next_override
        struct.pack_into("=IIIIIIHH", buf, pos, nxt, sec, nsec, len(data), length, 1, mac, mac)
        buf[pos + mac:pos + mac + len(data)] = data
        pos += size
    struct.pack_into("=IIIIII", buf, 0, 1, 0, status, len(packets) if num is None else num, first, pos)
    return buf


PACKETS = [(1700000000, 123456789, b"\x45" + b"a" * 59, 60),
           (1700000001, 5, b"\x45" + b"b" * 99, 1500),   # cut by the kernel: snaplen < len
           (1700000002, 999999999, b"\x60" + b"c" * 39, 40)]


@pytest.mark.parametrize("walk", WALKS)
def test_a_ready_block_gives_its_packets_and_goes_back_to_the_kernel(walk):
    buf = lay_block(PACKETS)
    packets, number, truncated = walk(buf, 0, 101, 7)
    assert packets == [((s * 1_000_000 + ns // 1000) / 1e6, 101, d, 8 + i) for i, (s, ns, d, _) in enumerate(PACKETS)]
    assert (number, truncated) == (10, 1)
    assert struct.unpack_from("=I", buf, 8)[0] == 0  # TP_STATUS_KERNEL
    assert walk(buf, 0, 101, 10) is None  # the kernel's now


@pytest.mark.parametrize("walk", WALKS)
def test_a_block_not_handed_over_is_not_read(walk):
    buf = lay_block(PACKETS, status=0)
    assert walk(buf, 0, 101, 0) is None


@pytest.mark.parametrize("walk", WALKS)
def test_offsets_outside_the_block_stop_the_walk(walk):
    first_outside = lay_block(PACKETS)
    struct.pack_into("=I", first_outside, 16, BLOCK - 8)
    length_outside = lay_block(PACKETS)
    struct.pack_into("=I", length_outside, 20, 1 << 30)  # blk_len past the ring: the ring bounds it
    for buf in (lay_block(PACKETS, num=1000), lay_block(PACKETS, next_override=BLOCK * 4), first_outside,
                length_outside):
        packets, _, _ = walk(buf, 0, 101, 0)
        assert len(packets) <= len(PACKETS)
        assert struct.unpack_from("=I", buf, 8)[0] == 0
    with pytest.raises(ValueError):
        walk(lay_block(PACKETS), BLOCK, 101, 0)


@needs_c
def test_the_twins_agree_on_every_cut_of_a_block():
    for count in range(len(PACKETS) + 1):
        for num in (count, count + 3):
            a, b = lay_block(PACKETS[:count], num=num), lay_block(PACKETS[:count], num=num)
            assert ring.read_block_py(a, 0, 1, 0) == native.ring.read_block(b, 0, 1, 0)
            assert a[:] == b[:]
