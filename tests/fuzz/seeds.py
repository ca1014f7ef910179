"""Seed corpora for the fuzz harnesses, built at run time from the real fixtures.

Whole files (cut at unit boundaries to the harness's -max_len) for the file parsers, and the
units inside them for the inner parsers: frames, bodies, record sets, codec payloads, internal
topic records. Everything is taken apart with kinspect's own readers; nothing is copied into the
repository. ``python tests/fuzz/seeds.py OUT [CORPUS...]`` writes every corpus (or those named)
to OUT/<corpus>/, for a long campaign that keeps its corpus.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import struct
import sys
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from pathlib import Path

import formats
from kinspect.capture.link import decode_tcp
from kinspect.capture.source import open_capture, sniff_format
from kinspect.capture.stream import StreamData, StreamEnd, StreamGap, StreamStart
from kinspect.capture.tcp import TcpReassembler
from kinspect.records import iter_batches
from kinspect.records import legacy
from kinspect.records.codecs import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kinspect.storage import segment
from kinspect.storage.files import describe
from kinspect.wire import messages
from kinspect.wire.apis import API_NAMES
from kinspect.wire.exchange import RAW
from kinspect.wire.frames import Frame, FrameBuffer
from kinspect.decode.pipeline import DecodeRun

REPO = Path(__file__).resolve().parents[2]
REALDATA = REPO / "tests" / "data" / "thirdparty"
FIXTURE_DIRS = (REPO / "pcaps", REPO / "samples", REPO / "tests" / "unit" / "records" / "fixtures",
                REALDATA)
MAX_SEEDS = 300           # per corpus: more only slows the start of a short run
MAX_FRAMES = 64           # per connection, for the frame and header seeds
KAFKA_PORTS = {9092, 9093, 19092, 29092}

# The (api_key, version, kind) a messages input selects, by its first two bytes.
BODY_KINDS = sorted(messages.DEFINED)


# -- the fixtures ---------------------------------------------------------------------------

@lru_cache(maxsize=None)
def fixture_files() -> tuple[Path, ...]:
    files = []
    for root in FIXTURE_DIRS:
        if root.is_dir():
            files += sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    return tuple(files)


@lru_cache(maxsize=None)
def captures() -> tuple[Path, ...]:
    out = []
    for path in fixture_files():
        with open(path, "rb") as f:
            if sniff_format(f.read(8)) is not None:
                out.append(path)
    return tuple(out)


def broker_files(kind: str) -> list[Path]:
    """The files of one kind (storage/files.py's) that brokers wrote: samples/ and realdata."""
    written = [p for p in fixture_files()
               if p.is_relative_to(REPO / "samples") or p.is_relative_to(REALDATA)]
    return [p for p in written if describe(p).kind == kind and not p.name.endswith(".txt")]


# -- captures: slices at packet boundaries -------------------------------------------------------

def _packet_spans(data: bytes, fmt: str) -> tuple[int, list[tuple[int, int]]]:
    """The length of the capture's head (before the first packet) and each packet's span."""
    capture = open_capture(io.BytesIO(data))  # streamed: offsets count from the file's start
    spans = []
    if fmt == "pcap":
        pos = 24
        for _, _, packet, _ in capture.packets():
            spans.append((pos, pos + 16 + len(packet)))
            pos += 16 + len(packet)
        return 24, spans
    parser = capture._parser
    previous = 0
    for _ in capture.packets():
        end = parser.offset
        spans.append((previous, end))
        previous = end
    if not spans:
        return 0, []
    first_end = spans[0][1]
    first_start = first_end - struct.unpack_from("<I" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">I",
                                                  data, first_end - 4)[0]
    spans[0] = (first_start, first_end)
    return first_start, spans


def capture_slices(fmt: str | None, max_len: int) -> Iterator[bytes]:
    """Each capture's head followed by runs of whole packets, every run under max_len."""
    for path in captures():
        data = _plain(path.read_bytes())
        found = sniff_format(data[:8])
        if fmt is not None and found != fmt:
            continue
        head_len, spans = _packet_spans(data, found)
        head = data[:head_len]
        run: list[tuple[int, int]] = []
        for start, end in spans:
            if run and head_len + end - run[0][0] > max_len:
                yield head + data[run[0][0]:run[-1][1]]
                run = []
            if head_len + end - start <= max_len:
                run.append((start, end))
        if run:
            yield head + data[run[0][0]:run[-1][1]]


def _plain(data: bytes) -> bytes:
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


# -- captures: packets, segments, streams, exchanges -----------------------------------------------

def packets() -> Iterator[tuple[int, bytes]]:
    for path in captures():
        with open_capture(str(path)) as capture:
            for _, linktype, data, _ in capture.packets():
                yield linktype, bytes(data)


def _client_first(flow) -> bool:
    """Whether this direction goes client → broker (the broker's port is the known or lower one)."""
    _, sport, _, dport = flow
    if (dport in KAFKA_PORTS) != (sport in KAFKA_PORTS):
        return dport in KAFKA_PORTS
    return dport < sport


@lru_cache(maxsize=None)
def connections() -> tuple[list, ...]:
    """Per TCP connection of every capture, its segments [(flow, flags, seq, ack, payload)] and
    its reassembled events [(reverse, kind, data, missing)] (reverse: broker → client)."""
    found: dict = {}
    for path in captures():
        reassembler = TcpReassembler()
        with open_capture(str(path)) as capture:
            for ts, linktype, data, _ in capture.packets():
                seg = decode_tcp(linktype, data)
                if seg is None:
                    continue
                src, dst, sport, dport, seq, flags, payload, ack = seg
                flow = (src, sport, dst, dport)
                conn = found.setdefault((path, frozenset((flow, (dst, dport, src, sport)))), ([], []))
                conn[0].append((flow, flags, seq, ack, payload))
                for event in reassembler.segment(ts, src, sport, dst, dport, seq, flags, payload, ack):
                    _record_event(found, path, event)
        for event in reassembler.finish():
            _record_event(found, path, event)
    return tuple(found.values())


def _record_event(found: dict, path, event) -> None:
    src, sport, dst, dport = flow = event.flow
    conn = found.get((path, frozenset((flow, (dst, dport, src, sport)))))
    if conn is None:
        return
    reverse = not _client_first(flow)
    if type(event) is StreamData:
        conn[1].append((reverse, formats.DATA, event.data, 0))
    elif type(event) is StreamGap:
        conn[1].append((reverse, formats.GAP, b"", event.missing))
    elif type(event) is StreamEnd:
        conn[1].append((reverse, formats.END, b"", 0))


def frames(reverse: bool) -> Iterator[bytes]:
    """Frame payloads (after the size) of one side of every connection, by kinspect's framing."""
    for _, events in connections():
        buffer = FrameBuffer(lambda buf, pos, end: False)
        taken = 0
        for side, kind, data, _ in events:
            if side != reverse or kind != formats.DATA:
                continue
            for item in buffer.feed(data, 0.0):
                if type(item) is Frame and not item.damaged and taken < MAX_FRAMES:
                    taken += 1
                    yield item.payload


@lru_cache(maxsize=None)
def bodies() -> tuple[tuple[int, int, str, bytes], ...]:
    """(api_key, version, kind, body) of every request and response in the captures, the
    kafkajs fixtures and kafka-rust's Fetch responses."""
    out = []
    for path in captures():
        for record in DecodeRun(str(path)).raw_records():
            raw = record.get(RAW)
            if raw is None:
                continue
            key, version = record["api_key"], record["api_version"]
            request, request_at, response, response_at, _ = raw
            out.append((key, version, "request", bytes(request[request_at:])))
            if response is not None:
                out.append((key, version, "response", bytes(response[response_at:])))
    out += _kafkajs_bodies()
    for path in (REALDATA / "kafka-rust").glob("fetch*.kafka.*"):
        out.append((1, 0, "response", path.read_bytes()[4:]))
    return tuple(out)


def _kafkajs_bodies() -> list[tuple[int, int, str, bytes]]:
    keys = {name.lower(): key for key, name in API_NAMES.items()}
    out = []
    for path in sorted((REALDATA / "kafkajs" / "src" / "protocol" / "requests").glob("*/fixtures/v*_re*.json")):
        match = re.match(r"v(\d+)_(request|response)", path.name)
        key = keys.get(path.parts[-3].lower())
        if match is None or key is None:
            continue
        version, kind = int(match[1]), match[2]
        lay = messages.layout(key, version, kind)
        if lay is None:
            continue
        try:
            body = bytes(json.loads(path.read_text())["data"])
        except (ValueError, KeyError, TypeError):
            continue
        out.append((key, version, kind, body[1:] if lay.flexible and body[:1] == b"\0" else body))
    return out


# -- record sets, codec payloads, internal topic records -------------------------------------------

@lru_cache(maxsize=None)
def record_sets() -> tuple[bytes, ...]:
    """The record sets of Produce and Fetch bodies, Java-written record fixtures, and segments."""
    out = []
    for key, version, kind, body in bodies():
        if key in (0, 1):
            decoded, _ = messages.decode_body(key, version, kind, body, raw_records=True)
            out += [r for r in _values_of(decoded, "records") if isinstance(r, bytes) and r]
    out += [p.read_bytes() for p in fixture_files() if p.suffix == ".bin"]
    out += [p.read_bytes() for p in broker_files("log") + broker_files("kraft_snapshot")]
    return tuple(out)


def _values_of(value, key: str) -> Iterator:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == key:
                yield v
            else:
                yield from _values_of(v, key)
    elif isinstance(value, list):
        for item in value:
            yield from _values_of(item, key)


def units(data: bytes) -> list[tuple[int, int, dict]]:
    """(start, end, unit) of each whole unit of a record set, by kinspect's walker."""
    out = []
    for unit, _ in iter_batches(data):
        if unit is not None:
            size = unit["batch_length"] if unit["magic"] == 2 else unit["message_size"]
            out.append((unit["position"], unit["position"] + 12 + size, unit))
    return out


def unit_runs(data: bytes, max_len: int, keep: Callable[[dict], bool] = lambda unit: True
              ) -> Iterator[bytes]:
    """Runs of consecutive whole units that ``keep`` accepts, each under max_len."""
    run_start = run_end = None
    for start, end, unit in units(data):
        if not keep(unit) or end - start > max_len:
            if run_start is not None:
                yield data[run_start:run_end]
            run_start = None
            continue
        if run_start is not None and end - run_start > max_len:
            yield data[run_start:run_end]
            run_start = None
        if run_start is None:
            run_start = start
        run_end = end
    if run_start is not None:
        yield data[run_start:run_end]


def codec_payloads() -> Iterator[tuple[int, int, bytes]]:
    """(codec, magic, compressed payload) of every compressed batch and legacy wrapper."""
    for data in record_sets():
        view = memoryview(data)
        for start, end, unit in units(data):
            codec = unit["attributes"] & 7
            if codec == NONE:
                continue
            if unit["magic"] == 2:
                yield codec, 2, data[start + 61:end]
            else:
                value = legacy._read_message(data, view, start)[7]
                if value:
                    yield codec, unit["magic"], value


def library_payloads() -> Iterator[tuple[int, int, bytes]]:
    """The framings the fixtures may lack, made by the codec libraries kinspect reads them with:
    raw and xerial snappy, lz4 frames with and without content size, zstd with and without a
    content size, gzip of two members."""
    import lz4.frame
    import snappy
    import zstandard

    text = b"".join(b"kinspect fuzz seed %d " % i for i in range(64))
    block = snappy.compress(text)
    yield SNAPPY, 2, block
    yield SNAPPY, 1, b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    yield LZ4, 2, lz4.frame.compress(text, store_size=True)
    yield LZ4, 0, lz4.frame.compress(text, store_size=False, content_checksum=True)
    yield ZSTD, 2, zstandard.ZstdCompressor().compress(text)
    yield ZSTD, 2, zstandard.ZstdCompressor(write_content_size=False).compress(text)
    yield GZIP, 1, gzip.compress(text[:100]) + gzip.compress(text[100:])


def internal_records() -> Iterator[tuple[str, bytes | None, bytes | None]]:
    """(topic, key, value) of the records of every internal topic's segment."""
    for path in broker_files("log") + broker_files("kraft_snapshot"):
        topic = describe(path).records_topic
        if topic is None:
            continue
        for kind, unit, _ in segment.walk_segment(path.read_bytes()):
            if kind == "batch" and not unit.get("is_control"):
                for record in unit["records"]:
                    yield topic, record["key"], record["value"]


# -- adversarial seeds: the shapes of issue 10's hostile inputs, small enough to be mutated -------

LIE = 0x7FFFFFFF  # a length or count of 2 GiB
MINIMAL_RECORD = b"\x0c\x00\x00\x00\x01\x01\x00"  # length 6, all deltas 0, null key and value


def _handmade():
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.unit.records import handmade
    return handmade


def adversarial_record_sets() -> list[bytes]:
    """Record-count amplification (streamed past --max-records), lying lengths and counts, a
    decompression bomb, a legacy wrapper nesting another."""
    import zstandard

    hm = _handmade()
    many = MINIMAL_RECORD * 9000  # within small bounds (options 4) but past the records held: streamed
    zeros = bytes(64 << 20)
    bomb = hm.v2_batch(zstandard.ZstdCompressor(level=19).compress(zeros), 1, attributes=ZSTD)
    lying = bytearray(hm.v2_batch(MINIMAL_RECORD, 1))
    struct.pack_into(">i", lying, 57, LIE)  # records count
    plain = hm.legacy_message(0, 1, 0, None, b"v")
    nested = hm.legacy_message(0, 1, GZIP, None, gzip.compress(
        hm.legacy_message(0, 1, GZIP, None, gzip.compress(plain * 3))))
    return [hm.v2_batch(zstandard.ZstdCompressor().compress(many), 9000, attributes=ZSTD),
            hm.v2_batch(MINIMAL_RECORD * 1000, 1000), bomb, hm.reseal(lying),
            struct.pack(">qi", 0, LIE) + bytes(64), nested,
            hm.legacy_message(0, 0, GZIP, None, gzip.compress(plain * 5000, 9))]


def adversarial_payloads() -> list[tuple[int, int, bytes]]:
    import lz4.frame
    import zstandard

    zeros = bytes(64 << 20)
    return [(ZSTD, 2, zstandard.ZstdCompressor(level=19).compress(zeros)),
            (ZSTD, 2, zstandard.ZstdCompressor(write_content_size=False).compress(zeros[:8 << 20])),
            (GZIP, 2, gzip.compress(zeros[:8 << 20], 9)),
            (LZ4, 2, lz4.frame.compress(zeros[:1 << 20])),
            (SNAPPY, 2, b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, LIE) + b"\0" * 16)]


def adversarial_bodies() -> list[tuple[int, int, str, bytes]]:
    """Arrays and strings that claim 2 GiB, arrays of many small entries."""
    hm = _handmade()
    produce_v9 = b"\x00" + struct.pack(">hi", -1, 30000) + hm.uvarint(LIE)
    produce_v3 = struct.pack(">hhii", -1, -1, 30000, LIE)
    many_topics = b"\x00" + struct.pack(">hi", -1, 30000) + hm.uvarint(2001) + b"\x02a\x01\x00" * 2000
    metadata_v0 = struct.pack(">i", LIE) + bytes(16)
    string_v0 = struct.pack(">ih", 1, 0x7FFF) + b"t"
    return [(0, 9, "request", produce_v9), (0, 3, "request", produce_v3),
            (0, 9, "request", many_topics), (3, 0, "response", metadata_v0),
            (3, 0, "request", string_v0)]


def adversarial_captures(fmt: str) -> list[bytes]:
    """A pcap record and a pcapng block that claim 2 GiB."""
    if fmt == "pcap":
        head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
        return [head + struct.pack("<IIII", 0, 0, LIE, LIE) + bytes(64)]
    shb = struct.pack("<IIIHHq", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1) + struct.pack("<I", 28)
    idb = struct.pack("<IIHHI", 1, 20, 1, 0, 0) + struct.pack("<I", 20)
    return [shb + idb + struct.pack("<IIIIIII", 6, LIE & ~3, 0, 0, 0, LIE, LIE) + bytes(64)]


def out_of_order_storm(count: int = 500) -> bytes:
    """One direction: a SYN, then ``count`` one-byte segments in reverse order, then the rest."""
    out = bytearray(b"\0") + formats.segment(0, 0x02, 999, None, b"")
    for i in reversed(range(1, count)):
        out += formats.segment(0, 0x18, 1000 + i, 1, b"x")
    out += formats.segment(0, 0x18, 1000, 1, b"x") + formats.segment(0, 0x18, 1000 + count, 1, b"y" * 64)
    return bytes(out)


def lying_stream() -> bytes:
    """A request frame of 2 GiB, then a gap, then more bytes."""
    return (b"\0" + formats.stream_op(formats.DATA, data=struct.pack(">i", LIE) + bytes(100))
            + formats.stream_op(formats.GAP, missing=1000)
            + formats.stream_op(formats.DATA, data=bytes(200)))


# -- the corpora --------------------------------------------------------------------------------

COORDINATOR_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state",
                      "__cluster_metadata")
CHECKPOINT_KINDS = ("leader_epoch_checkpoint", "offset_checkpoint", "partition_metadata",
                    "meta_properties", "quorum_state", "clean_shutdown")


def _pcap(max_len):
    yield from (b"\0" + s for s in capture_slices("pcap", max_len - 1))


def _pcapng(max_len):
    yield from (b"\0" + s for s in capture_slices("pcapng", max_len - 1))


def _source(max_len):
    for number, s in enumerate(capture_slices(None, max_len - 1)):
        yield bytes([number % 4]) + s  # the four ways in: stream, gzip, cut gzip, mapped file


def _captures(max_len):
    return (b"\0" + s for s in capture_slices(None, max_len - 1))


def _link(max_len):
    index = {linktype: i for i, linktype in enumerate(formats.LINK_TYPES)}
    seen = set()
    for linktype, data in packets():
        shape = (linktype, len(data) // 64, data[:1])
        if shape not in seen and linktype in index:
            seen.add(shape)
            yield bytes([index[linktype]]) + data[:max_len - 1]


def _tcp(max_len):
    for segments, _ in connections():
        flows: dict = {}
        out = bytearray(b"\0")
        for flow, flags, seq, ack, payload in segments:
            if flow not in flows:
                flows[flow] = 0 if _client_first(flow) else 1
            encoded = formats.segment(flows[flow], flags, seq, ack, payload)
            if len(out) + len(encoded) > max_len:
                yield bytes(out)
                out = bytearray(b"\0")
            out += encoded
        if len(out) > 1:
            yield bytes(out)


def _stream_ops(events, both: bool, reverse_only: bool, max_len: int, head: bytes):
    out = bytearray(head)
    for reverse, kind, data, missing in events:
        if not both and reverse != reverse_only:
            continue
        encoded = formats.stream_op(kind, reverse and both, data, missing)
        if len(out) + len(encoded) > max_len:
            if len(out) > len(head):
                yield bytes(out)
            out = bytearray(head)
            if len(encoded) > max_len - len(head):
                continue
        out += encoded
    if len(out) > len(head):
        yield bytes(out)


def _frames(max_len):
    for _, events in connections():
        yield from _stream_ops(events, False, False, max_len, b"\0")
        yield from _stream_ops(events, False, True, max_len, b"\0")


def _session(max_len):
    for _, events in connections():
        yield from _stream_ops(events, True, False, max_len, b"\0")


def _headers(max_len):
    for payload in frames(False):
        yield b"\0" + payload[:max_len - 1]
    for payload in frames(True):
        yield b"\1" + payload[:max_len - 1]


def _messages(max_len):
    index = {kind: i for i, kind in enumerate(BODY_KINDS)}
    for key, version, kind, body in bodies():
        at = index.get((key, version, kind))
        if at is not None and len(body) + 3 <= max_len:
            yield struct.pack(">HB", at, 0) + body


def _records(max_len):
    for data in record_sets():
        yield from (b"\0" + run for run in unit_runs(data, max_len - 1))


def _legacy(max_len):
    for data in record_sets():
        yield from (b"\0" + run for run in unit_runs(data, max_len - 1, lambda u: u["magic"] < 2))


def _codecs(max_len):
    for codec, magic, payload in [*codec_payloads(), *library_payloads()]:
        if len(payload) + 3 <= max_len:
            yield bytes([codec, magic, 0]) + payload


def _segment(max_len):
    for path in broker_files("log") + broker_files("kraft_snapshot"):
        info = describe(path)
        topic = info.records_topic
        flags = 0x01 | 0x02  # records and data
        if info.kind == "kraft_snapshot":
            flags |= 0x10
        topic_bits = (COORDINATOR_TOPICS.index(topic) + 1) << 5 if topic in COORDINATOR_TOPICS else 0
        for run in unit_runs(path.read_bytes(), max_len - 2):
            yield bytes([flags | topic_bits, 0]) + run


def _index(max_len):
    for kind, suffix in ((0, ".index"), (1, ".timeindex")):
        for path in broker_files(suffix[1:]):
            log = path.with_name(path.name.split(".", 1)[0] + ".log")
            entries = path.read_bytes()[:max_len // 4]
            logs = list(unit_runs(log.read_bytes(), max_len - 5 - len(entries))) if log.is_file() else []
            yield bytes([kind]) + formats.pair(entries, logs[0] if logs else None)


def _snapshot(max_len):
    return (p.read_bytes()[:max_len] for p in broker_files("producer_snapshot"))


def _txnindex(max_len):
    for path in broker_files("txnindex"):
        log = path.with_name(path.name.split(".", 1)[0] + ".log")
        entries = path.read_bytes()[:max_len // 4]
        logs = list(unit_runs(log.read_bytes(), max_len - 4 - len(entries))) if log.is_file() else []
        yield formats.pair(entries, logs[0] if logs else None)


def _checkpoints(max_len):
    for number, kind in enumerate(CHECKPOINT_KINDS):
        for path in broker_files(kind):
            yield bytes([number]) + path.read_bytes()[:max_len - 1]


def _coordinator(max_len):
    for topic, key, value in internal_records():
        encoded = bytes([COORDINATOR_TOPICS.index(topic)]) + formats.nullable(key) + formats.nullable(value)
        if len(encoded) <= max_len:
            yield encoded


def _replay(max_len):
    for path in broker_files("log"):
        if describe(path).records_topic != "__consumer_offsets":
            continue
        out = bytearray(b"\0")
        for kind, unit, _ in segment.walk_segment(path.read_bytes()):
            if kind != "batch":
                continue
            producer = unit.get("producer_id", -1) & 0xFF
            if unit.get("is_control"):
                marker = (unit.get("control") or {}).get("type")
                flags = formats.CONTROL_COMMIT if marker == "COMMIT" else formats.CONTROL_ABORT
                entries = [formats.replay_entry(flags, producer, 1, None, None)]
            else:
                flags = formats.TRANSACTIONAL if unit.get("is_transactional") else 0
                entries = [formats.replay_entry(flags, producer, 1, r["key"], r["value"])
                           for r in unit["records"]]
            for entry in entries:
                if len(out) + len(entry) > max_len:
                    yield bytes(out)
                    out = bytearray(b"\0")
                out += entry
        if len(out) > 1:
            yield bytes(out)


def _tls(max_len):
    """Real TLS from OpenSSL (Python's ssl in memory, tests/unit/tls/memtls.py): TLS 1.3 and 1.2
    (AES-GCM, ChaCha20), fresh and resumed; every kind of input of fuzz_tls from them, and
    record streams of every kind sealed with the fixed keys."""
    import random
    import tempfile

    sys.path.insert(0, str(REPO))
    from kinspect.tls.handshake import HandshakeReader
    from kinspect.tls.keys import SUITES
    from tests.unit.tls.memtls import converse

    requests = [("client", b"request-%d " % i * 40) for i in range(3)] + [("server", b"response " * 300)]
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        for n, (version, cipher) in enumerate([("1.3", None), ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256"),
                                               ("1.2", "ECDHE-ECDSA-CHACHA20-POLY1305")]):
            keyfile = work / f"keys-{n}.log"
            out: dict = {}
            wires = [converse(work, keyfile, requests, version, cipher=cipher, out=out)]
            wires.append(converse(work, keyfile, requests, version, cipher=cipher, session=out["session"],
                                  contexts_used=out["contexts"]))
            text = keyfile.read_bytes()
            yield bytes([formats.TLS_KEYLOG]) + text
            for wire in wires:
                yield bytes([formats.TLS_LAYER]) + formats.tls_conversation(text, wire)
                for side, wanted in (("client", 1), ("server", 2)):
                    stream = b"".join(data for s, data in wire if s == side)
                    yield bytes([formats.TLS_FRAME]) + stream
                    reader = HandshakeReader(frozenset({wanted}))
                    for _, body in reader.feed(stream[5:5 + int.from_bytes(stream[3:5], "big")]):
                        yield bytes([formats.TLS_EXTENSIONS, 35 + body[34]]) + body
    rng = random.Random(15)
    for mode, code in enumerate(formats.TLS_SUITES):
        suite = SUITES[code]
        yield bytes([formats.TLS_RECORDS, mode]) + _sealed(suite, rng)


def _sealed(suite, rng) -> bytes:
    """Records sealed with fuzz_tls's fixed keys: data, padded, empty, a handshake message, an
    alert, all padding (TLS 1.3), a ChangeCipherSpec, and one sealed at the wrong number."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

    key, iv = formats.tls_fixed_keys(suite)
    aead = (AESGCM if suite.aead == "aes-gcm" else ChaCha20Poly1305)(key)
    out, seq = bytearray(), 0
    kinds = [(23, 0), (23, 9), (23, 0), (22, 0), (23, 0), (21, 0), (0, 5), (23, 0)]
    for inner, padding in kinds:
        content = rng.randbytes(rng.choice([0, 1, 60, 300])) if inner != 0 else b""
        if suite.tls13:
            body = content + bytes([inner]) if inner else b""
            body += bytes(padding)
            header = b"\x17\x03\x03" + (len(body) + 16).to_bytes(2, "big")
            out += header + aead.encrypt((int.from_bytes(iv, "big") ^ seq).to_bytes(12, "big"), body, header)
        else:
            explicit = rng.randbytes(8) if suite.aead == "aes-gcm" else b""
            nonce = iv + explicit if explicit else (int.from_bytes(iv, "big") ^ seq).to_bytes(12, "big")
            aad = seq.to_bytes(8, "big") + b"\x17\x03\x03" + len(content).to_bytes(2, "big")
            fragment = explicit + aead.encrypt(nonce, content, aad)
            out += b"\x17\x03\x03" + len(fragment).to_bytes(2, "big") + fragment
        seq += 1
    if suite.tls13:
        out += b"\x14\x03\x03\x00\x01\x01"
    return bytes(out)


@lru_cache(maxsize=None)
def _memtls_conversations() -> tuple:
    """(key log, [(side, wire bytes)]) of real TLS from OpenSSL in memory (tests/unit/tls/memtls.py):
    TLS 1.3 (fresh and resumed) and TLS 1.2 with AES-GCM and ChaCha20, each key log written by
    both sides, as Python's SSLContext.keylog_filename does."""
    return tuple(_conversations())


def _conversations():
    import tempfile

    sys.path.insert(0, str(REPO))
    from tests.unit.tls import memtls
    from tests.unit.tls.memtls import converse

    requests = [("client", b"request-%d " % i * 20) for i in range(3)] + [("server", b"response " * 100)]
    memtls._ca.clear()  # its certificates in this directory, not in one another corpus removed
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        for n, (version, cipher) in enumerate([("1.3", None), ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256"),
                                               ("1.2", "ECDHE-ECDSA-CHACHA20-POLY1305"),
                                               ("1.2", "ECDHE-ECDSA-AES256-GCM-SHA384")]):
            keyfile = work / f"keys-{n}.log"
            out: dict = {}
            first = converse(work, keyfile, requests, version, cipher=cipher, out=out)
            yield keyfile.read_bytes(), first
            again = converse(work, keyfile, requests, version, cipher=cipher, session=out["session"],
                             contexts_used=out["contexts"])
            yield keyfile.read_bytes(), again
    memtls._ca.clear()


def _keylog(max_len):
    """fuzz_keylog: the key logs OpenSSL wrote (one connection, then two), as they are, with CRLF
    line ends, cut in a line, among junk lines, in each mode (text, file in chunks, growing file)."""
    junk = b"x\n# comment\nCLIENT_RANDOM zz zz\nNOT_A_LABEL " + b"ab" * 32 + b" " + b"cd" * 32 + b"\n\xff\n"
    for text, _ in _memtls_conversations():
        lines = text.splitlines(keepends=True)
        for variant in (text, text.replace(b"\n", b"\r\n"), text[:len(text) // 2],
                        b"".join(line + junk[:i * 7 % len(junk)] for i, line in enumerate(lines))):
            yield bytes([0, 0]) + variant
            yield bytes([1, 61]) + variant
            yield bytes([2, 128]) + variant


def _tls_handshake(max_len):
    """fuzz_tls_handshake: from real conversations, each side's handshake messages (the plaintext
    records' fragments) with the types it keeps, each side's TLS bytes, and the conversation with
    its key log; cut in pieces of one byte, of a few, and of a record's size. And a ClientHello in
    one-byte records (issue 30's hostile shape)."""
    sys.path.insert(0, str(REPO))
    from tests.hostile.inputs_tls import client_hello

    sizes = [bytes([1, 1]), bytes([3, 1, 7, 200]), bytes([1, 0]), bytes([2, 5, 60])]
    for text, wire in _memtls_conversations():
        for side, mask in (("client", 0b000001), ("server", 0b000010), ("server", 0b111111)):
            stream = b"".join(data for s, data in wire if s == side)
            messages, pos = bytearray(), 0
            while pos + 5 <= len(stream) and stream[pos] in (20, 22):  # up to the first protected record
                length = int.from_bytes(stream[pos + 3:pos + 5], "big")
                if stream[pos] == 22:
                    messages += stream[pos + 5:pos + 5 + length]
                pos += 5 + length
            for size in sizes[:2]:
                yield bytes([0]) + size + bytes([mask]) + bytes(messages)
            yield bytes([1]) + sizes[2] + stream
            yield bytes([1]) + sizes[3] + stream
        for size in sizes[1:]:  # not all in one-byte pieces: a conversation so costs 0.2 s
            yield bytes([2]) + size + formats.tls_conversation(text, wire)
    hello = client_hello(bytes(range(32)), 300)
    one_byte = b"".join(b"\x16\x03\x01\x00\x01" + hello[i:i + 1] for i in range(len(hello)))
    yield bytes([0]) + sizes[0] + bytes([1]) + hello
    yield bytes([1]) + sizes[1] + one_byte
    yield bytes([2]) + sizes[3] + formats.tls_conversation(b"", [("client", one_byte)])


CORPORA: dict[str, Callable[[int], Iterable[bytes]]] = {
    "pcap": _pcap, "pcapng": _pcapng, "source": _source, "captures": _captures, "link": _link,
    "tcp": _tcp, "frames": _frames, "headers": _headers, "messages": _messages,
    "session": _session, "records": _records, "legacy": _legacy, "codecs": _codecs,
    "segment": _segment, "index": _index, "snapshot": _snapshot, "txnindex": _txnindex,
    "checkpoints": _checkpoints, "coordinator": _coordinator, "replay": _replay, "tls": _tls,
    "keylog": _keylog, "tls_handshake": _tls_handshake, "schemas": lambda max_len: _schema_seeds(),
}


def _schema_seeds() -> Iterator[bytes]:
    """fuzz_schemas' inputs: every key and value of the schema fixtures (samples/schemas), a
    header's bytes first where the serializer put the id in one, and hostile payloads."""
    from kinspect.storage.segment import walk_segment
    logs = Path(__file__).resolve().parents[2] / "samples" / "schemas" / "logs"
    for log in sorted(logs.glob("lab-*/*.log")):
        for kind, item, _ in walk_segment(log.read_bytes()):
            for record in (item.get("records") or ()) if kind == "batch" else ():
                headers = {h["key"]: h["value"] for h in record["headers"]}
                for is_key, data in ((1, record["key"]), (0, record["value"])):
                    header = headers.get("__key_schema_id" if is_key else "__value_schema_id")
                    if data is not None and header is not None:
                        yield bytes([is_key | 2, len(header)]) + header + data
                    elif data is not None:
                        yield bytes([is_key]) + data
    for schema_id, payload in ((100, b"\x02" * 5000 + b"\x00\x02"), (101, b"\x80\xa8\xd6\xb9\x07\x00"),
                               (102, b"\x02\x02k\x02\x02j\x02\x02v\x00\x00"), (3, b"\xff" * 64)):
        yield b"\x00\x00" + schema_id.to_bytes(4, "big") + payload


def _message_seed(key: int, version: int, kind: str, body: bytes) -> bytes:
    return struct.pack(">HB", BODY_KINDS.index((key, version, kind)), 0) + body


ADVERSARIAL: dict[str, Callable[[], Iterable[bytes]]] = {
    "pcap": lambda: (b"\0" + s for s in adversarial_captures("pcap")),
    "pcapng": lambda: (b"\0" + s for s in adversarial_captures("pcapng")),
    "tcp": lambda: [out_of_order_storm()],
    "frames": lambda: [lying_stream()],
    "messages": lambda: (_message_seed(*body) for body in adversarial_bodies()),
    "records": lambda: (b"\4" + data for data in adversarial_record_sets()),
    "legacy": lambda: (b"\4" + data for data in adversarial_record_sets()[-2:]),
    "codecs": lambda: (bytes([codec, magic, 3]) + payload for codec, magic, payload in adversarial_payloads()),
}


def corpus(name: str, max_len: int) -> list[bytes]:
    """The seeds of one corpus: the adversarial ones, then distinct real ones, at most
    MAX_SEEDS, spread over all the fixtures."""
    unique = list(dict.fromkeys(s[:max_len] for s in CORPORA[name](max_len)))
    if len(unique) > MAX_SEEDS:
        step = len(unique) / MAX_SEEDS
        unique = [unique[int(i * step)] for i in range(MAX_SEEDS)]
    hostile = [s for s in ADVERSARIAL.get(name, list)() if len(s) <= max_len]
    return list(dict.fromkeys(hostile + unique))


def write_corpus(name: str, directory: str | Path, max_len: int) -> int:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    seeds = corpus(name, max_len)
    for seed in seeds:
        (directory / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
    return len(seeds)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python tests/fuzz/seeds.py OUT [CORPUS...]  (corpora: "
                 f"{', '.join(CORPORA)})")
    from harness import MAX_LEN

    out = Path(sys.argv[1])
    for name in sys.argv[2:] or CORPORA:
        print(f"{name}: {write_corpus(name, out / name, MAX_LEN[name])} seeds")
