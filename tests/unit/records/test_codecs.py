import gzip
import os
import struct

import lz4.frame
import pytest
import snappy
import zstandard

from kinspect.records import codecs
from kinspect.records.codecs import (GZIP, LZ4, SNAPPY, XERIAL_MAGIC, ZSTD, codec_name,
                                     decompress, xxh32)
from tests.unit.records.conftest import java_fixture, kafka_rust_fetch

PAYLOAD = b"".join(b"record %d " % i + os.urandom(8) for i in range(500))


def _magic0_wrapper_value(message: bytes) -> bytes:
    """offset, size, crc, magic, attributes (18 bytes), null key (int32 -1), value."""
    assert struct.unpack_from(">i", message, 18)[0] == -1
    (size,) = struct.unpack_from(">i", message, 22)
    return message[26:26 + size]


def _kafka_lz4_magic0_frame() -> bytes:
    return _magic0_wrapper_value(java_fixture("0_lz4_create"))


def test_xxh32_matches_reference_vectors():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_xxh32_agrees_with_lz4_header_checksums():
    for flags in ({}, {"store_size": True}, {"content_checksum": True, "store_size": True}):
        frame = lz4.frame.compress(b"abc" * 100, **flags)
        end = 6 + (8 if frame[4] & 0x08 else 0)
        assert frame[end] == (xxh32(frame[4:end]) >> 8) & 0xFF


@pytest.mark.parametrize("codec, compress", [
    (GZIP, gzip.compress),
    (SNAPPY, snappy.compress),
    (LZ4, lz4.frame.compress),
    (ZSTD, zstandard.ZstdCompressor().compress),
])
def test_round_trip(codec, compress):
    assert decompress(codec, compress(PAYLOAD)) == (PAYLOAD, [])


def test_codec_names():
    assert [codec_name(c) for c in range(8)] == [
        "none", "gzip", "snappy", "lz4", "zstd", "unknown(5)", "unknown(6)", "unknown(7)"]


def test_unknown_codec_is_a_note_not_an_exception():
    data, notes = decompress(6, b"whatever")
    assert data is None and notes == [("error", "unknown compression codec 6")]


def test_xerial_snappy_from_a_real_kafka_0_8_broker():
    (_, _, _, records), = kafka_rust_fetch("fetch1.mytopic.1p.snappy.kafka.0821")
    value = _magic0_wrapper_value(records)
    assert value.startswith(XERIAL_MAGIC)
    data, notes = decompress(SNAPPY, value)
    assert notes == [] and data.count(b"Prince") >= 1


def test_xerial_snappy_with_several_chunks():
    chunks = [PAYLOAD[:3000], PAYLOAD[3000:]]
    framed = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + b"".join(
        struct.pack(">i", len(c)) + c for c in map(snappy.compress, chunks))
    assert decompress(SNAPPY, framed) == (PAYLOAD, [])


def test_xerial_chunk_overrunning_the_payload():
    framed = XERIAL_MAGIC + struct.pack(">iii", 1, 1, 1000) + snappy.compress(b"abc")
    data, [(severity, text)] = decompress(SNAPPY, framed)
    assert data is None and severity == "error" and "overruns" in text


def test_kafka_magic0_lz4_frame_has_the_kip57_checksum_and_decodes():
    frame = _kafka_lz4_magic0_frame()
    assert frame[:4] == b"\x04\x22\x4d\x18"
    with pytest.raises(RuntimeError, match="headerChecksum"):
        lz4.frame.decompress(frame)  # what a strict reader says
    data, notes = decompress(LZ4, frame, magic=0)
    assert notes == [] and b"key-0" in data


def test_kip57_checksum_on_magic_1_is_decoded_with_a_warning():
    data, [(severity, text)] = decompress(LZ4, _kafka_lz4_magic0_frame(), magic=1)
    assert data is not None and severity == "warning" and "KIP-57" in text


def test_lz4_with_a_plainly_wrong_header_checksum_is_an_error():
    frame = bytearray(lz4.frame.compress(PAYLOAD))
    frame[6] ^= 0x5A
    data, [(severity, text)] = decompress(LZ4, bytes(frame))
    assert data is None and severity == "error" and "lz4" in text


@pytest.mark.parametrize("codec, compress", [
    (GZIP, gzip.compress),
    (SNAPPY, snappy.compress),
    (LZ4, lz4.frame.compress),
    (LZ4, lambda d: lz4.frame.compress(d, store_size=True)),
    (ZSTD, zstandard.ZstdCompressor().compress),
    (ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress),
])
def test_output_bound(codec, compress):
    bomb = compress(bytes(1 << 20))
    data, [(severity, text)] = decompress(codec, bomb, max_output=4096)
    assert data is None and severity == "error"
    assert codec_name(codec) in text and "4096" in text


def test_zstd_frame_header_claiming_a_huge_size_is_refused_before_allocating():
    frame = bytearray(zstandard.ZstdCompressor().compress(b"x" * 100))
    # frame header: magic, descriptor with a 1-byte (single segment) or larger size field;
    # rewrite it as an 8-byte content size of 2**60
    descriptor = 0xC0 | 0x20  # 8-byte content size, single segment
    header = bytes(frame[:4]) + bytes([descriptor]) + struct.pack("<Q", 1 << 60)
    size_bytes = {0: 1, 1: 2, 2: 4, 3: 8}[frame[4] >> 6]
    forged = header + bytes(frame[5 + size_bytes:])
    data, [(severity, text)] = decompress(ZSTD, forged)
    assert data is None and str(1 << 60) in text


def test_snappy_preamble_claiming_a_huge_size_is_refused():
    data, [(severity, text)] = decompress(SNAPPY, b"\xff\xff\xff\xff\x0f" + b"\x00" * 10)
    assert data is None and "4294967295" in text


@pytest.mark.parametrize("codec, compress", [
    (GZIP, gzip.compress),
    (SNAPPY, snappy.compress),
    (LZ4, lz4.frame.compress),
    (ZSTD, zstandard.ZstdCompressor().compress),
])
def test_truncated_or_garbled_payloads_are_notes(codec, compress):
    good = compress(PAYLOAD)
    for broken in (good[:len(good) // 2], good[:5], b"", b"\x00garbage\xff" * 3):
        data, notes = decompress(codec, broken)
        assert data is None
        assert [severity for severity, _ in notes] == ["error"]
        assert codec_name(codec) in notes[0][1]


def test_concatenated_gzip_members_are_read_like_java():
    assert decompress(GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == (b"abcd", [])


def test_bytes_after_a_gzip_stream_are_a_warning():
    data, [(severity, _)] = decompress(GZIP, gzip.compress(b"ab") + b"junk")
    assert data == b"ab" and severity == "warning"


def test_default_bound_is_64_mib():
    assert codecs.DEFAULT_MAX_OUTPUT == 64 * 1024 * 1024


LARGE = bytes(range(256)) * (16 * 1024)  # 4 MiB that compress far beyond the first-try ratio


@pytest.mark.parametrize("codec, compress", [
    (LZ4, lz4.frame.compress),
    (LZ4, lambda d: lz4.frame.compress(d, store_size=True)),
    (ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress),
])
def test_output_beyond_the_first_try_bound_still_decodes(codec, compress):
    payload = compress(LARGE)
    assert codecs._FIRST_TRY_RATIO * len(payload) < len(LARGE)
    assert decompress(codec, payload) == (LARGE, [])


@pytest.mark.parametrize("within, compress", [
    (codecs._lz4_within, lz4.frame.compress),
    (codecs._zstd_within, zstandard.ZstdCompressor(write_content_size=False).compress),
])
def test_first_try_takes_what_fits_and_leaves_the_rest(within, compress):
    assert codecs._first_try(within, compress(PAYLOAD), 1 << 26) == PAYLOAD
    assert codecs._first_try(within, compress(LARGE), 1 << 26) is None  # beyond the bound
    assert codecs._first_try(within, compress(PAYLOAD)[:40], 1 << 26) is None  # damaged
    assert codecs._first_try(within, compress(PAYLOAD), 64 * 1024) is None  # bound not smaller


def test_bytes_after_an_lz4_frame_are_still_a_warning():
    data, [(severity, text)] = decompress(LZ4, lz4.frame.compress(PAYLOAD) + b"junk")
    assert data == PAYLOAD and severity == "warning" and "4 bytes" in text
