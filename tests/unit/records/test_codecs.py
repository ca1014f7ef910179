import gzip
import os
import random
import struct
import zlib

import lz4.frame
import pytest
import snappy
import zstandard

from kinspect.decode.pipeline import DecodeRun
from kinspect.records import codecs
from kinspect.records.codecs import (GZIP, LZ4, SNAPPY, XERIAL_MAGIC, ZSTD, codec_name,
                                     decompress, xxh32)
from kinspect.records.recordset import decode_records
from tests.conftest import PCAPS, SAMPLES
from tests.unit.records.conftest import FIXTURES, java_fixture, kafka_rust_fetch

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


def test_kept_header_checksums_are_the_computed_ones():
    """The two-byte descriptors' checksums are kept once computed: each is xxh32's, first and
    later, from bytes or a view (lz4's own frames: header_checksum byte; every other pair)."""
    for flags in ({}, {"block_size": lz4.frame.BLOCKSIZE_MAX1MB}, {"content_checksum": True}):
        frame = lz4.frame.compress(b"abc" * 100, store_size=False, **flags)
        assert codecs._header_checksum(memoryview(frame)[4:6]) == frame[6]
        assert codecs._header_checksum(frame[4:6]) == frame[6]
    for pair in random.Random(57).sample(range(1 << 16), 2000):
        descriptor = pair.to_bytes(2, "big")
        expected = (xxh32(descriptor) >> 8) & 0xFF
        assert codecs._header_checksum(descriptor) == expected
        assert codecs._header_checksum(memoryview(descriptor)) == expected
    assert len(codecs._DESCRIPTOR_CHECKSUMS) <= 1 << 16
    long = bytes(range(10))
    assert codecs._header_checksum(long) == (xxh32(long) >> 8) & 0xFF


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


@pytest.mark.parametrize("codec, within, compress", [
    (LZ4, "_lz4_within", lz4.frame.compress),
    (ZSTD, "_zstd_within", zstandard.ZstdCompressor(write_content_size=False).compress),
])
def test_first_try_takes_what_fits_and_leaves_the_rest(codec, within, compress):
    codecs._load(codec)
    within = getattr(codecs, within)
    assert codecs._first_try(within, compress(PAYLOAD), 1 << 26) == PAYLOAD
    assert codecs._first_try(within, compress(LARGE), 1 << 26) is None  # beyond the bound
    assert codecs._first_try(within, compress(PAYLOAD)[:40], 1 << 26) is None  # damaged
    assert codecs._first_try(within, compress(PAYLOAD), 64 * 1024) is None  # bound not smaller


def test_bytes_after_an_lz4_frame_are_still_a_warning():
    data, [(severity, text)] = decompress(LZ4, lz4.frame.compress(PAYLOAD) + b"junk")
    assert data == PAYLOAD and severity == "warning" and "4 bytes" in text


# gzip: ISA-L inflates a payload that is one sound gzip member; anything else goes to zlib.
# Whatever the path, the bytes and notes must be zlib's.

def _gzip_by_zlib(payload: bytes, max_output: int = codecs.DEFAULT_MAX_OUTPUT):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codecs, "_one_gzip_member", lambda data, bound: None)
        return decompress(GZIP, payload, max_output)


@pytest.fixture(scope="module")
def real_gzip_payloads() -> dict[str, bytes]:
    """Every gzip payload kinspect meets in the committed captures, Kafka's own record fixtures,
    the sample segments and a Kafka 0.8 fetch: librdkafka, the Java clients, kafka-python,
    aiokafka and brokers from 0.8 to 4.1 wrote them."""
    found: dict[str, bytes] = {}
    source = ""
    real = codecs._DECODERS[GZIP]

    def collect(payload, max_output, magic, notes):
        found[f"{source}#{len(found)}"] = bytes(payload)
        return real(payload, max_output, magic, notes)

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(codecs._DECODERS, GZIP, collect)
        for path in sorted(PCAPS.glob("*.pcap*")):
            source = path.name
            for _ in DecodeRun(path).records():
                pass
        for path in sorted(FIXTURES.glob("*_gzip_*.bin")) + sorted(SAMPLES.rglob("*.log")):
            source = path.name
            decode_records(path.read_bytes())
        source = "kafka-rust gzip fetch"
        for *_, records in kafka_rust_fetch("fetch1.mytopic.1p.gzip.kafka.0821"):
            decode_records(records)
    return found


def test_real_gzip_payloads_come_from_many_writers(real_gzip_payloads):
    sources = {name.split("#")[0] for name in real_gzip_payloads}
    assert len(real_gzip_payloads) >= 40
    assert {"kafka41-librdkafka-mtu1500.pcap", "aiokafka-mtu1500.pcapng", "2_gzip_create.bin",
            "kafka-rust gzip fetch"} <= sources


def test_real_gzip_payloads_take_the_isal_path_and_give_zlibs_bytes(real_gzip_payloads):
    for name, payload in real_gzip_payloads.items():
        by_isal = codecs._one_gzip_member(payload, codecs.DEFAULT_MAX_OUTPUT)
        assert by_isal is not None, name
        assert by_isal == zlib.decompress(payload, 31), name
        assert decompress(GZIP, payload) == _gzip_by_zlib(payload) == (by_isal, []), name


def _damaged(payload: bytes) -> dict[str, bytes]:
    flipped_crc = bytearray(payload)
    flipped_crc[-8] ^= 0x01
    flipped_size = bytearray(payload)
    flipped_size[-4] ^= 0x01
    damaged = {
        "empty": b"", "magic only": payload[:2], "header only": payload[:10],
        "cut in the deflate data": payload[:len(payload) // 2], "cut in the trailer": payload[:-3],
        "no trailer": payload[:-8], "CRC-32 wrong": bytes(flipped_crc), "size wrong": bytes(flipped_size),
        "trailing junk": payload + b"junk", "trailing zeros": payload + bytes(7),
        "a second member": payload + gzip.compress(b"second"),
        "a second member cut": payload + gzip.compress(PAYLOAD)[:30],
        "not deflate": payload[:2] + b"\x07" + payload[3:],
        "zlib wrapper, not gzip": zlib.compress(PAYLOAD),
    }
    for bit in (0x20, 0x40, 0x80):  # reserved header flags: zlib refuses them, ISA-L would not
        damaged[f"reserved flag {bit:#x}"] = payload[:3] + bytes([payload[3] | bit]) + payload[4:]
    return damaged


def test_damaged_real_gzip_payloads_give_zlibs_bytes_and_notes(real_gzip_payloads):
    notes_seen = set()
    for name, payload in list(real_gzip_payloads.items())[::5]:
        for damage, broken in _damaged(payload).items():
            got = decompress(GZIP, broken)
            assert got == _gzip_by_zlib(broken), (name, damage)
            notes_seen.update(text.split(":")[0] for _, text in got[1])
    assert {"gzip payload does not decompress", "gzip stream is truncated"} & notes_seen
    assert any("bytes after the end of the gzip stream" in text for text in notes_seen)


def test_the_bound_on_real_gzip_payloads_is_zlibs(real_gzip_payloads):
    for name, payload in list(real_gzip_payloads.items())[::3]:
        size = len(zlib.decompress(payload, 31))
        for bound in (size - 1, size, size + 1, 0):
            got = decompress(GZIP, payload, max_output=bound)
            assert got == _gzip_by_zlib(payload, bound), (name, bound)
            assert (got[0] is None) == (bound < size), (name, bound)


def _fixed_huffman_gzip(bits: str, content: bytes) -> bytes:
    """A gzip member around one final fixed-Huffman block given as bits in stream order."""
    bits += "0" * (-len(bits) % 8)
    body = bytes(int(bits[i:i + 8][::-1], 2) for i in range(0, len(bits), 8))
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + body
            + struct.pack("<II", zlib.crc32(content), len(content)))


# final bit, block type 1 (fixed) LSB first, then codes MSB first:
# "a" = 10010001, match length 3 = 0000001, distance code 1 (2 back) = 00001, end of block = 0000000
_TOO_FAR_BACK = "1" + "10" + "10010001" + "0000001" + "00001" + "0000000"
_BAD_DISTANCE_CODE = "1" + "10" + "10010001" + "0000001" + "11110" + "0000000"
_RESERVED_BLOCK_TYPE = "1" + "11"


@pytest.mark.parametrize("bits, content, zlib_says", [
    (_TOO_FAR_BACK, b"aaaa", "invalid distance too far back"),
    (_BAD_DISTANCE_CODE, b"aaaa", "invalid distance code"),
    (_RESERVED_BLOCK_TYPE, b"", "invalid block type"),
])
def test_invalid_deflate_data_with_a_matching_trailer_is_zlibs_error(bits, content, zlib_says):
    broken = _fixed_huffman_gzip(bits, content)
    assert codecs._one_gzip_member(broken, 1 << 20) is None
    data, notes = decompress(GZIP, broken)
    assert data is None and notes == [("error", "gzip payload does not decompress: "
                                                f"Error -3 while decompressing data: {zlib_says}")]


def test_random_damage_to_real_gzip_payloads_gives_zlibs_result(real_gzip_payloads):
    rng = random.Random(20261122)
    payloads = list(real_gzip_payloads.values())
    decoded = 0
    for _ in range(3000):
        broken = bytearray(rng.choice(payloads))
        for _ in range(rng.choice((1, 1, 2, 3))):
            at = rng.randrange(len(broken)) if rng.random() < 0.6 else rng.randrange(min(12, len(broken)))
            broken[at] ^= 1 << rng.randrange(8)
        got = decompress(GZIP, bytes(broken))
        assert got == _gzip_by_zlib(bytes(broken)), bytes(broken).hex()
        decoded += got[0] is not None
    assert decoded > 0  # flips in MTIME, XFL and OS leave the content sound


def _lz4_within_by_the_class(frame, bound: int):
    """What _lz4_within gave before it called the C chunk decoder itself."""
    inflater = lz4.frame.LZ4FrameDecompressor()
    try:
        data = inflater.decompress(frame, max_length=bound)
    except RuntimeError:
        return "error"
    return data if inflater.eof and not inflater.unused_data else None


def test_lz4_within_gives_what_the_frame_class_gives():
    codecs._load(LZ4)
    rng = random.Random(57)
    text = b"".join(b"%d kafka record %d;" % (i, i * i) for i in range(3000))
    frames = []
    for size in (0, 1, 100, 5000, len(text)):
        frame = lz4.frame.compress(text[:size])
        frames += [frame, frame + b"\x00\x01", frame[:-1], frame[:len(frame) // 2], b"", frame[:4]]
        damaged = bytearray(frame)
        if len(damaged) > 12:
            damaged[rng.randrange(7, len(damaged))] ^= 0x55
        frames.append(bytes(damaged))
    for frame in frames:
        for bound in (0, 10, 4096, 1 << 20):
            for buf in (frame, memoryview(b"xx" + frame)[2:]):
                try:
                    got = codecs._lz4_within(buf, bound)
                except RuntimeError:
                    got = "error"
                assert got == _lz4_within_by_the_class(buf, bound), (frame[:20], bound)


FIRST_USE = """
import sys
LIBRARIES = {"isal", "snappy", "cramjam", "lz4", "zstandard"}
from kinspect.records import codecs
assert not LIBRARIES & set(sys.modules), LIBRARIES & set(sys.modules)
import gzip, lz4.frame, snappy, zstandard
good = {codecs.GZIP: gzip.compress(b"k" * 100), codecs.SNAPPY: snappy.compress(b"k" * 100),
        codecs.LZ4: lz4.frame.compress(b"k" * 100), codecs.ZSTD: zstandard.compress(b"k" * 100)}
codec = int(sys.argv[1])
# the first payload of the codec in this process is damaged: its library's own error is a note
data, notes = codecs.decompress(codec, good[codec][:len(good[codec]) // 2] + b"\\x00" * 9)
assert data is None and notes and notes[0][0] == "error", notes
assert codecs.decompress(codec, good[codec]) == (b"k" * 100, [])
"""


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_a_codec_library_is_imported_at_its_first_payload_and_its_errors_are_notes(codec):
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-c", FIRST_USE, str(codec)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
