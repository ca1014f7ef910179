"""Generators of hostile inputs, one per attack class of issue 10.

Each function writes one input under ``root`` and returns its path: a capture file, a segment
file inside a topic-partition directory (``t-0/00000000000000000000.log``), or a broker log
directory. Inputs are a few KB to a few tens of MB and take at most a few seconds each to make.
Real fixtures (pcaps/, samples/) are read as templates where a real file is what the attack
needs (a non-UTF-8 file name), never copied into the repository.
"""

from __future__ import annotations

import random
import shutil
import struct
from pathlib import Path

from kinspect.groups.partition import partition_for
from tests.hostile import kafka
from tests.hostile.kafka import (
    FETCH, GZIP, LZ4, MALFORMED_RECORD, MINIMAL_RECORD, NON_UTF8_HEADER_RECORD, OFFSET_COMMIT,
    PRODUCE, SNAPPY, ZSTD, batch, bomb, compress, compressed_batch, frame, produce,
    produce_response, record, request_header, response, response_header)
from tests.hostile.packets import ACK, PSH, Connection, PcapngWriter, PcapWriter
from tests.unit.records.handmade import legacy_message, uvarint, varint

REPO = Path(__file__).resolve().parents[2]
PCAPS = REPO / "pcaps"
SAMPLES = REPO / "samples" / "kafka-4.1.2" / "logs"

MIB = 1 << 20
AMPLIFIED_RECORDS = 9_000_000  # 63 MB of minimal records, within 64 MiB (--max-batch-bytes)
RATIO = 500  # decompressed per compressed byte of a "dense" batch: half kinspect's --max-ratio
ESCAPES = "\x1b]0;owned\x07\x1b[2J"  # set the window title, clear the screen
SEGMENT = "00000000000000000000.log"


# ---- shared shapes ----

def _one_connection(path: Path, exchanges, writer=None) -> Path:
    """A capture of one connection: handshake, each (request, response or None), FIN."""
    with writer or PcapWriter(path) as out:
        conn = Connection(out)
        conn.handshake()
        for req, resp in exchanges:
            conn.send(req)
            if resp is not None:
                conn.reply(resp)
        conn.close()
    return path


def _segment(root: Path, name: str, data: bytes, topic_dir: str | bytes = "t-0") -> Path:
    """``data`` as the first segment of a topic partition directory under root/name."""
    directory = root / name / _fs(topic_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SEGMENT
    path.write_bytes(data)
    return path


def _fs(name: str | bytes) -> str:
    """A file name of any bytes, as the str that os functions take (surrogate escapes)."""
    return name if isinstance(name, str) else name.decode("utf-8", "surrogateescape")


def _amplified_batch(record_bytes: bytes = MINIMAL_RECORD, count: int = AMPLIFIED_RECORDS
                     ) -> bytes:
    return _dense_batch(record_bytes * count, count)


def _dense_batch(records: bytes, count: int) -> bytes:
    """A zstd batch of ``records``, then random-valued records until it decompresses to at most
    RATIO times its size: all of it passes a ratio bound, as the attack would make it."""
    rng = random.Random(count)
    filler = []
    while True:
        data = records + b"".join(filler)
        payload = compress(ZSTD, data)
        if len(data) <= RATIO * len(payload):
            return compressed_batch(ZSTD, payload, count + len(filler))
        missing = len(data) // RATIO - len(payload)
        filler += [record(None, rng.randbytes(1000)) for _ in range(missing // 1000 + 1)]


def _offsets_dir(log_dir: Path, group: str) -> Path:
    directory = log_dir / f"__consumer_offsets-{partition_for(group)}"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _string16(raw: bytes) -> bytes:
    return struct.pack(">h", len(raw)) + raw


def _offset_commit_record(group: bytes, topic: bytes, partition: int, offset: int) -> bytes:
    key = struct.pack(">h", 1) + _string16(group) + _string16(topic) + struct.pack(">i", partition)
    value = struct.pack(">hqi", 3, offset, -1) + _string16(b"") + struct.pack(">q", 1_763_760_000_000)
    return record(key, value)


def _group_metadata_record(group: bytes, member: bytes, client_id: bytes, host: bytes) -> bytes:
    """GroupMetadataValue v3 of one member with empty subscription and assignment."""
    key = struct.pack(">h", 2) + _string16(group)
    value = (struct.pack(">h", 3) + _string16(b"consumer") + struct.pack(">i", 1)
             + _string16(b"range") + _string16(member) + struct.pack(">q", 1_763_760_000_000)
             + struct.pack(">i", 1) + _string16(member) + struct.pack(">h", -1)
             + _string16(client_id) + _string16(host) + struct.pack(">iiii", 10000, 10000, 0, 0))
    return record(key, value)


# ---- record-count amplification: one batch, millions of 7-byte records ----

def amplified_produce_v3(root: Path, count: int = AMPLIFIED_RECORDS) -> Path:
    return _one_connection(root / "amplified-produce-v3.pcap", [
        (produce(3, 1, {0: _amplified_batch(count=count)}), produce_response(3, 1))])


def amplified_produce_v9(root: Path, count: int = AMPLIFIED_RECORDS) -> Path:
    return _one_connection(root / "amplified-produce-v9.pcap", [
        (produce(9, 1, {0: _amplified_batch(count=count)}), produce_response(9, 1))])


def amplified_fetch_v12(root: Path, count: int = AMPLIFIED_RECORDS) -> Path:
    return _one_connection(root / "amplified-fetch-v12.pcap", [
        (kafka.fetch(12, 1), kafka.fetch_response(12, 1, _amplified_batch(count=count)))])


def amplified_segment(root: Path, count: int = AMPLIFIED_RECORDS) -> Path:
    return _segment(root, "amplified-segment", _amplified_batch(count=count))


def amplified_valid_segment(root: Path, count: int = 2_000_000) -> Path:
    """2 million honest records (offset deltas 0, 1, 2, ...): nothing to report, only many."""
    records = b"".join([varint(5 + len(d)) + b"\0\0" + d + b"\x01\x01\x00"
                        for d in map(varint, range(count))])
    return _segment(root, "amplified-valid-segment", _dense_batch(records, count))


def amplified_plain_segment(root: Path, count: int = 30_000_000 // len(MINIMAL_RECORD)) -> Path:
    """A 30 MB segment of one uncompressed batch of 4.3 million minimal records: no
    decompression bound applies, only the memory bound."""
    return _segment(root, "amplified-plain-segment", batch(MINIMAL_RECORD * count, count))


def malformed_records_produce(root: Path, count: int = 8_000_000) -> Path:
    """8 million records, each one byte longer than its fields: each would be one problem."""
    return _one_connection(root / "malformed-records-produce.pcap", [
        (produce(9, 1, {0: _amplified_batch(MALFORMED_RECORD, count)}), produce_response(9, 1))])


def non_utf8_header_keys_segment(root: Path, count: int = 6_000_000) -> Path:
    """6 million records, each with a header key that is not UTF-8: a warning per record."""
    return _segment(root, "non-utf8-header-keys", _amplified_batch(NON_UTF8_HEADER_RECORD, count))


def amplified_offsets_log_dir(root: Path, count: int = AMPLIFIED_RECORDS) -> Path:
    """A broker log dir whose __consumer_offsets partition holds the amplified batch."""
    log_dir = root / "amplified-offsets-logdir"
    (_offsets_dir(log_dir, "g") / SEGMENT).write_bytes(_amplified_batch(count=count))
    return log_dir


# ---- array amplification ----

def array_produce_request(root: Path, count: int = 10_000_000) -> Path:
    """A 30 MB Produce v9 request of 10 million topic entries (empty name, no partitions)."""
    body = (b"\x00" + struct.pack(">hi", -1, 30000) + uvarint(count + 1) + b"\x01\x01\x00" * count
            + b"\x00")
    req = frame(request_header(PRODUCE, 9, 1) + body)
    return _one_connection(root / "array-produce-request.pcap", [(req, produce_response(9, 1))])


def array_offset_commit_response(root: Path, count: int = 3_000_000) -> Path:
    """An OffsetCommit v8 response of 3 million partitions (7 bytes each) to a one-partition
    commit: what `offsets --capture` reads."""
    body = (struct.pack(">i", 0) + uvarint(2) + b"\x02t" + uvarint(count + 1)
            + b"\x00\x00\x00\x00\x00\x00\x00" * count + b"\x00" + b"\x00")
    resp = frame(response_header(OFFSET_COMMIT, 8, 1) + body)
    return _one_connection(root / "array-offset-commit-response.pcap", [
        (kafka.offset_commit(8, 1, "g", "t"), resp)])


# ---- out-of-order storms ----

def _storm(path: Path, acks: bool, count: int) -> Path:
    """A hole at the first byte, 60k one-byte segments after it in reverse order, then the
    rest of a 2 MB Produce request in order (100-byte segments), and at last the hole."""
    value = b"x" * (2 * MIB)
    req = produce(3, 1, {0: batch(record(b"k", value), 1)})
    with PcapWriter(path) as out:
        conn = Connection(out)
        conn.handshake()
        for at in range(count, 0, -1):
            conn.client_segment(at, req[at:at + 1])
            if acks:
                conn.server_segment()  # a duplicate ACK of the hole
        for at in range(count + 1, len(req), 100):
            conn.client_segment(at, req[at:at + 100])
            if acks:
                conn.server_segment()
        conn.client_segment(0, req[:1])
        conn.client_seq += len(req)
        conn.server_segment()
        conn.reply(produce_response(3, 1))
        conn.close()
    return path


def out_of_order_storm(root: Path, count: int = 60_000) -> Path:
    return _storm(root / "out-of-order-storm.pcap", False, count)


def out_of_order_storm_acks(root: Path, count: int = 60_000) -> Path:
    return _storm(root / "out-of-order-storm-acks.pcap", True, count)


# ---- decompression ----

def zeros_segment(root: Path, count: int = 2000) -> Path:
    """A 3 MB segment of 2,000 zstd batches, each 60 MiB of zeros (issue 10's case): within a
    64 MiB per-batch bound, 120 GB in all, each at a ratio of 38,000."""
    payload = bomb(ZSTD, 60 * MIB)
    data = b"".join(compressed_batch(ZSTD, payload, 1, base_offset=i) for i in range(count))
    return _segment(root, "zeros-2000-batches", data)


def zeros_dense_segment(root: Path, count: int = 48) -> Path:
    """A 6 MB segment of 48 zstd batches of 60 MiB each (zeros, then random bytes so that each
    decompresses at RATIO): every batch passes the per-batch bounds, 3 GB in all."""
    data = b"\0" * (60 * MIB)
    data += random.Random(1).randbytes(len(data) // RATIO)
    payload = compress(ZSTD, data)
    return _segment(root, "zeros-dense-batches",
                    b"".join(compressed_batch(ZSTD, payload, 1, base_offset=i) for i in range(count)))


def _bombs() -> dict[int, bytes]:
    """Per codec, a batch that decompresses past the bound (zstd: 1 GiB from 33 KB)."""
    sizes = {GZIP: 128 * MIB, LZ4: 128 * MIB, SNAPPY: 72 * MIB, ZSTD: 1024 * MIB}
    return {codec: compressed_batch(codec, bomb(codec, size), 1, base_offset=i)
            for i, (codec, size) in enumerate(sizes.items())}


def bombs_segment(root: Path) -> Path:
    return _segment(root, "bombs-segment", b"".join(_bombs().values()))


def bombs_produce(root: Path) -> Path:
    return _one_connection(root / "bombs-produce.pcap", [
        (produce(3, 1, dict(enumerate(_bombs().values()))), produce_response(3, 1, 4))])


# ---- 2 GiB length fields ----

LIE = 0x7FFFFFFF


def lying_frame_size(root: Path) -> Path:
    """A request frame whose size says 2 GiB (4 KB follow), and on a second connection an
    honest request answered by a frame of 2 GiB."""
    path = root / "len2g-frame.pcap"
    lying = struct.pack(">i", LIE) + request_header(PRODUCE, 3, 1) + b"\x00" * 4096
    with PcapWriter(path) as out:
        first = Connection(out, sport=40001)
        first.handshake()
        first.send(lying)
        second = Connection(out, sport=40002)
        second.handshake()
        second.send(produce(3, 1, {0: batch(MINIMAL_RECORD, 1)}))
        second.reply(struct.pack(">ii", LIE, 1) + b"\x00" * 4096)
    return path


def lying_array_counts(root: Path) -> Path:
    """Produce v3 and v9 whose topic arrays say 2**31-1 entries, and an OffsetCommit v8
    response whose partitions array does."""
    v3 = frame(request_header(PRODUCE, 3, 1) + struct.pack(">hhii", -1, -1, 30000, LIE)
               + b"\x00\x01t" + b"\x00" * 64)
    v9 = frame(request_header(PRODUCE, 9, 2) + b"\x00" + struct.pack(">hi", -1, 30000)
               + uvarint(LIE) + b"\x02t\x01\x00\x00")
    commit = frame(response_header(OFFSET_COMMIT, 8, 3) + struct.pack(">i", 0) + uvarint(2)
                   + b"\x02t" + uvarint(LIE) + b"\x00" * 14)
    return _one_connection(root / "len2g-array.pcap", [
        (v3, None), (v9, None), (kafka.offset_commit(8, 3, "g", "t"), commit)])


def _lying_records() -> list[bytes]:
    """Records whose length, key length, header count, header key length are 2**31-1."""
    def framed(body):
        return varint(len(body)) + body
    return [varint(LIE) + b"\x00" * 16,
            framed(b"\x00\x00\x00" + varint(LIE) + b"\x00\x00\x00"),
            framed(b"\x00\x00\x00\x01\x01" + varint(LIE)),
            framed(b"\x00\x00\x00\x01\x01\x02" + varint(LIE) + b"\x00\x00")]


def lying_string_lengths(root: Path) -> Path:
    """A compact transactional id of 2 GiB (v9), a record set of 2 GiB (v3), a client id
    of 32767 bytes with 8 there, and records whose length, key length and header count are
    2**31-1 inside CRC-valid batches."""
    txn = frame(request_header(PRODUCE, 9, 1) + uvarint(LIE) + b"\x00" * 64)
    records = frame(request_header(PRODUCE, 3, 2) + struct.pack(">hhii", -1, -1, 30000, 1)
                    + b"\x00\x01t" + struct.pack(">iii", 1, 0, LIE) + b"\x00" * 64)
    client = frame(struct.pack(">hhih", PRODUCE, 3, 3, 0x7FFF) + b"12345678")
    inside = {i: batch(body, 1) for i, body in enumerate(_lying_records()[:3])}
    return _one_connection(root / "len2g-string.pcap", [
        (txn, None), (records, None), (client, None),
        (produce(3, 4, inside), produce_response(3, 4, 3))])


def lying_pcap_record(root: Path) -> Path:
    """A handshake, then a pcap record header whose captured length is 2 GiB (1 KB follows)."""
    path = root / "len2g-pcap-record.pcap"
    with PcapWriter(path) as out:
        Connection(out).handshake()
        out.raw(struct.pack("<IIII", 1_763_760_001, 0, LIE, LIE) + b"\x00" * 1024)
    return path


def lying_pcapng_block(root: Path) -> Path:
    """A pcapng whose third block says it is 2 GiB long (and its packet as much)."""
    path = root / "len2g-pcapng-block.pcapng"
    with PcapngWriter(path, 1_763_760_000_000_000) as out:
        Connection(out).handshake()
        out.file.write(struct.pack("<IIIIIII", 6, 0x7FFFFFF0, 0, 0, 0, 0x7FFFFFD0, 0x7FFFFFD0)
                       + b"\x00" * 1024)
    return path


def lying_batch_length(root: Path) -> Path:
    """An honest batch, a v2 batch header saying 2 GiB, an honest batch, a legacy message
    whose size says 2 GiB, and an honest batch."""
    honest = batch(MINIMAL_RECORD, 1)
    lying = bytearray(batch(MINIMAL_RECORD, 1, base_offset=1))
    struct.pack_into(">i", lying, 8, LIE)
    legacy = bytearray(legacy_message(3, 1, 0, b"k", b"v"))
    struct.pack_into(">i", legacy, 8, LIE)
    data = (honest + bytes(lying) + batch(MINIMAL_RECORD, 1, base_offset=2) + bytes(legacy)
            + batch(MINIMAL_RECORD, 1, base_offset=4))
    return _segment(root, "len2g-batch", data)


def lying_record_lengths(root: Path) -> Path:
    """CRC-valid batches whose record length, key length, header count and header key length
    are 2**31-1, plain and zstd-compressed."""
    pairs = [(codec, body) for codec in (0, ZSTD) for body in _lying_records()]
    data = b"".join(batch(body, 1, codec, base_offset=i) for i, (codec, body) in enumerate(pairs))
    return _segment(root, "len2g-record", data)


# ---- half-open connections ----

def _client(i: int) -> dict:
    """Client address and port of connection ``i``: 10.1.0.0 onwards, never the broker's."""
    return {"client": f"10.{1 + (i >> 16)}.{i >> 8 & 255}.{i & 255}", "sport": 1024 + i % 60000}


def half_open_syn(root: Path, count: int = 200_000) -> Path:
    path = root / "half-open-syn.pcap"
    with PcapWriter(path) as out:
        for i in range(count):
            Connection(out, **_client(i)).syn()
    return path


def half_open_partial(root: Path, count: int = 200_000) -> Path:
    """Each connection: a SYN, then the first 40 bytes of a 1000-byte Produce request."""
    path = root / "half-open-partial.pcap"
    partial = (struct.pack(">i", 1000) + request_header(PRODUCE, 3, 1))[:40].ljust(40, b"\x00")
    with PcapWriter(path) as out:
        for i in range(count):
            conn = Connection(out, **_client(i))
            conn.syn()
            conn.client_segment(0, partial, ACK | PSH)
    return path


# ---- many batches, deep legacy nesting ----

def many_batches_produce(root: Path, count: int = 200_000) -> Path:
    """A 13.6 MB Produce request of 200,000 one-record batches in one partition."""
    records = b"".join(batch(MINIMAL_RECORD, 1, base_offset=i) for i in range(count))
    return _one_connection(root / "many-batches-produce.pcap", [
        (produce(3, 1, {0: records}), produce_response(3, 1))])


def _nested_wrapper(depth: int) -> bytes:
    """Gzip wrappers (magic 1) nested ``depth`` deep around one message."""
    message = legacy_message(0, 1, 0, b"k", b"v")
    for _ in range(depth):
        message = legacy_message(0, 1, GZIP, None, kafka.compress(GZIP, message))
    return message


def _amplified_wrapper(count: int) -> bytes:
    """A gzip wrapper of ``count`` empty magic-1 messages (1.9 million: 64 MB, within the bound,
    at a ratio of 340)."""
    inner = legacy_message(0, 1, 0, None, None) * count
    return legacy_message(count - 1, 1, GZIP, None, kafka.compress(GZIP, inner))


def legacy_nesting_segment(root: Path) -> Path:
    return _segment(root, "legacy-nesting", _nested_wrapper(300))


def legacy_amplified_segment(root: Path, count: int = 1_900_000) -> Path:
    return _segment(root, "legacy-amplified", _amplified_wrapper(count))


def legacy_produce_v2(root: Path, count: int = 1_900_000) -> Path:
    return _one_connection(root / "legacy-produce-v2.pcap", [
        (produce(2, 1, {0: _nested_wrapper(300), 1: _amplified_wrapper(count)}),
         produce_response(2, 1, 2))])


# ---- timestamps and names ----

def far_future_pcapng(root: Path) -> Path:
    """An honest Produce exchange whose packets are stamped in the year 11,476."""
    path = root / "year-11476.pcapng"
    return _one_connection(path, [(produce(9, 1, {0: batch(MINIMAL_RECORD, 1)}),
                                   produce_response(9, 1))],
                           PcapngWriter(path, 300_000_000_000 * 1_000_000))


def non_utf8_file_name(root: Path) -> Path:
    """A real capture (librdkafka, pcaps/) under a file name that is not UTF-8."""
    path = root / _fs(b"capture-\xff\xfe.pcap")
    shutil.copyfile(PCAPS / "librdkafka-mtu1500.pcap", path)
    return path


def non_utf8_segment_name(root: Path) -> Path:
    """A real zstd segment (samples/) in a topic-partition directory named in no encoding."""
    return _segment(root, "non-utf8-name", (SAMPLES / "codec-zstd-0" / SEGMENT).read_bytes(),
                    b"t\xff\xfe-0")


def non_utf8_log_dir(root: Path) -> Path:
    """A log dir named in no encoding: a real __consumer_offsets partition, a topic dir with a
    non-UTF-8 name, and a group whose name, topic and member are not UTF-8."""
    log_dir = root / _fs(b"logs-\xff")
    shutil.copytree(SAMPLES / "__consumer_offsets-12", log_dir / "__consumer_offsets-12")
    topic = log_dir / _fs(b"t\xff\xfe-0")
    topic.mkdir()
    shutil.copyfile(SAMPLES / "codec-zstd-0" / SEGMENT, topic / SEGMENT)
    group = b"g\xff\xfe"
    records = (_offset_commit_record(group, b"t\xff", 0, 7)
               + _group_metadata_record(group, b"m\xff", b"c\xff", b"/h\xff"))
    (_offsets_dir(log_dir, "g") / SEGMENT).write_bytes(batch(records, 2))
    return log_dir


def non_utf8_strings_capture(root: Path) -> Path:
    """A client id, group id and topic name that are not UTF-8, and an OffsetCommit answered."""
    header = struct.pack(">hhi", OFFSET_COMMIT, 2, 1) + _string16(b"client-\xff")
    body = (_string16(b"g\xff\xfe") + struct.pack(">i", -1) + _string16(b"") + struct.pack(">q", -1)
            + struct.pack(">i", 1) + _string16(b"t\xff") + struct.pack(">iiq", 1, 0, 42)
            + _string16(b"\xff"))
    commit_response = response(OFFSET_COMMIT, 2, 1, {"topics": [
        {"name": b"t\xff", "partitions": [{"partition_index": 0, "error_code": 0}]}]})
    return _one_connection(root / "non-utf8-strings.pcap", [
        (frame(header + body), commit_response),
        (produce(3, 2, {0: batch(record(b"\xff", b"\xfe", 0, [(b"\xff", b"\xfe")]), 1)},
                 topic=b"t\xff"), produce_response(3, 2, topic=b"t\xff"))])


# ---- terminal escape sequences ----

def _escaped_records() -> bytes:
    esc = ESCAPES.encode()
    return batch(b"".join(record(b"k" + esc, b"v" + esc, i, [(b"h" + esc, b"x" + esc)])
                          for i in range(3)), 3)


def escapes_capture(root: Path) -> Path:
    """Escapes in a client id, topic names, a group name, record keys, values, header keys."""
    client = "c" + ESCAPES
    topic = "t" + ESCAPES
    records = _escaped_records()
    return _one_connection(root / "escapes.pcap", [
        (produce(9, 1, {0: records}, topic=topic, client_id=client),
         produce_response(9, 1, topic=topic)),
        (kafka.request(FETCH, 12, 2, {"topics": [{"topic": topic, "partitions": [
            {"partition": 0}]}]}, client), kafka.fetch_response(12, 2, records, topic)),
        (kafka.offset_commit(8, 3, "g" + ESCAPES, topic, client),
         response(OFFSET_COMMIT, 8, 3, {"topics": [{"name": topic, "partitions": [
             {"partition_index": 0, "error_code": 0}]}]}))])


def escapes_segment(root: Path) -> Path:
    return _segment(root, "escapes-segment", _escaped_records())


def escapes_log_dir(root: Path) -> Path:
    """Offsets and group metadata whose group, topic, member, client id and host carry
    escapes, and a topic directory whose name does."""
    log_dir = root / "escapes-logdir"
    esc = ESCAPES.encode()
    group = "g" + ESCAPES
    records = (_offset_commit_record(group.encode(), b"t" + esc, 0, 7)
               + _group_metadata_record(group.encode(), b"m" + esc, b"c" + esc, b"/h" + esc))
    (_offsets_dir(log_dir, group) / SEGMENT).write_bytes(batch(records, 2))
    topic = log_dir / f"x{ESCAPES}-0"
    topic.mkdir()
    (topic / SEGMENT).write_bytes(_escaped_records())
    return log_dir

