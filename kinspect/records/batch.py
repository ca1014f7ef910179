"""Record batch v2 (magic 2): the 61-byte header, CRC-32C, and the records inside.

``decode_batch`` is called by the record-set walker once it has framed a batch: the batch
occupies ``buf[pos:pos + 12 + batch_length]`` and its magic byte is 2. The records loop is
the hot path: kinspect.native.v2records decodes regular batches in C; anything irregular, or
a machine without the accelerator, takes the Python loop, which reports each problem with its
path and byte.
"""

from __future__ import annotations

import mmap
import struct

from kinspect.records.crc import crc32c

from kinspect import native
from kinspect.limits import Budget, Limits
from kinspect.problems import ERROR, WARNING, Problem, ProblemCap
from kinspect.records.codecs import codec_name, decompress
from kinspect.records.control import decode_control
from kinspect.records.packed import scan as pack
from kinspect.records.stream import STREAM_CHUNK, RecordStream

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
MIN_BATCH_LENGTH = HEADER_SIZE - 12
CRC_START = 21  # the CRC covers attributes..end of batch

TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40
CODEC_MASK = 0x07


class _Bad(Exception):
    """A record that cannot be decoded; carries the check name and the record-relative detail."""

    def __init__(self, check: str, what: str):
        super().__init__(what)
        self.check = check
        self.what = what


def decode_batch(buf, view: memoryview, pos: int, index: int, path: str, base: int,
                 problems: list[Problem], max_output: int | Budget) -> dict:
    """``max_output``: the Budget of the unit of work, or (alone) the bound of one batch."""
    (base_offset, batch_length, leader_epoch, _magic, crc, attributes, last_offset_delta,
     base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
     records_count) = HEADER.unpack_from(buf, pos)
    end = pos + 12 + batch_length
    budget = (max_output if isinstance(max_output, Budget)
              else Budget(Limits(max_batch_bytes=max_output), input_bytes=end - pos))
    where = f"{path} → batch[{index}]"
    computed = crc32c(view[pos + CRC_START:end])
    crc_valid = computed == crc
    if not crc_valid:
        problems.append(Problem(
            f"batch CRC-32C is {crc:#010x} but the bytes give {computed:#010x}",
            where, base + pos + 17, ERROR, "crc", computed, crc))
    codec = attributes & CODEC_MASK
    log_append_time = bool(attributes & TIMESTAMP_TYPE_BIT)
    batch = {
        "magic": 2, "base_offset": base_offset, "batch_length": batch_length,
        "partition_leader_epoch": leader_epoch, "crc": crc, "crc_valid": crc_valid,
        "attributes": attributes, "compression": codec_name(codec),
        "timestamp_type": "LogAppendTime" if log_append_time else "CreateTime",
        "is_transactional": bool(attributes & TRANSACTIONAL_BIT),
        "is_control": bool(attributes & CONTROL_BIT),
        "has_delete_horizon": bool(attributes & DELETE_HORIZON_BIT),
        "last_offset_delta": last_offset_delta, "base_timestamp": base_timestamp,
        "max_timestamp": max_timestamp, "producer_id": producer_id,
        "producer_epoch": producer_epoch, "base_sequence": base_sequence,
        "records_count": records_count, "position": base + pos, "records": [],
    }
    payload_start = pos + HEADER_SIZE
    fixed_timestamp = max_timestamp if log_append_time else None
    if codec == 0:
        if isinstance(buf, bytes):
            data, start, shift = buf, payload_start, base
        elif budget.pack_records and view.readonly and type(view.obj) is mmap.mmap:
            data, start, shift = view, payload_start, base  # a read-only mapped file: packed where it lies
        else:  # copy only this batch's records, never the whole (maybe mmapped) buffer
            data, start, shift = bytes(view[payload_start:end]), 0, base + payload_start
        stop, compressed_at, codec_label = end - payload_start + start, None, ""
    else:
        bound, option = budget.inflate_bound(end - payload_start)
        data, notes = decompress(codec, view[payload_start:end], bound, 2, f"raise it with {option}")
        for severity, text in notes:
            problems.append(Problem(f"{text} (batch at byte {base + pos:#x})", where,
                                    base + payload_start, severity,
                                    "codec" if codec > 4 else "decompress"))
        if data is None:
            return batch
        budget.inflated(len(data))
        start, stop, shift, compressed_at, codec_label = 0, len(data), 0, base + payload_start, codec_name(codec)
    allowed = budget.decode_allowed()
    limit = min(budget.records_left + 1, allowed)
    cap, bad_keys = ProblemCap(problems), []
    packed = (pack(data, start, stop, base_offset, base_timestamp, fixed_timestamp, limit)
              if budget.pack_records and not attributes & CONTROL_BIT else None)
    if packed is None and data is view:  # to be decoded: this batch's records copied out
        data, start, stop, shift = bytes(view[payload_start:end]), 0, end - payload_start, base + payload_start
    got = None if _fast is None or packed is not None else _fast(
        data, start, stop, base_offset, base_timestamp, fixed_timestamp, limit, bad_keys,
        cap.room("headers"))
    if packed is not None:  # regular, kept as bytes for an output that writes them from there
        records, framed, after = packed, len(packed), stop
        budget.held(framed)
    elif got is not None and got[1] >= stop:  # the common case: regular, and few enough to hold
        records = got[0]
        framed, after = len(records), stop
        budget.held(framed)
        if got[2]:  # header keys that are not UTF-8: the warnings the Python loop gives
            _key_warnings(bad_keys, got[2], cap, where, 0, shift, compressed_at)
            cap.close(where, base + pos)
    else:
        window = _Window(data, base_offset, base_timestamp, fixed_timestamp, where, shift,
                         compressed_at, codec_label)
        if got is not None:  # C decoded the first records, as many as may be held: not again
            records, after, bad = got
            framed = len(records)
            if bad:
                _key_warnings(bad_keys, bad, cap, where, 0, shift, compressed_at)
        else:
            records, framed, after = window.decode(start, stop, cap, 0, limit)
        if after < stop and framed < allowed:  # more records than may be held at once: stream them
            records, framed, after = _stream(window, start, stop, cap, view[payload_start:end],
                                             codec, len(data), records, framed, after, allowed)
        else:
            budget.held(len(records))
        if after < stop:
            cap.append(Problem(budget.cut_note(framed), where,
                               shift + after if compressed_at is None else compressed_at,
                               ERROR, "records_cut"))
        cap.close(where, base + pos)
    budget.decoded(framed)
    batch["records"] = records
    if framed != records_count and after >= stop:
        problems.append(Problem(
            f"records count field says {records_count} but the batch holds {framed} records",
            where, base + pos + 57, ERROR, "records_count", framed, records_count))
    if batch["is_control"] and records:
        control, complaints = decode_control(records[0]["key"], records[0]["value"])
        batch["control"] = control
        for text in complaints:
            problems.append(Problem(text, f"{where} → records[0]", base + pos, ERROR,
                                    "control_record"))
    return batch


def _stream(window: "_Window", start: int, stop: int, cap: ProblemCap, payload, codec: int,
            size: int, head: list[dict], head_framed: int, after: int, allowed: int
            ) -> tuple[RecordStream, int, int]:
    """The records of a batch too big to hold, counted (and their problems found) in chunks
    now, from where the first window (``head``, ending at ``after``) stopped, up to ``allowed``
    framed in all; decoded again chunk by chunk, from the start, when the output is written.
    Returns the stream, the records framed, and where they end."""
    good, framed = len(head), head_framed
    first, last = (head[0], head[-1]) if head else (None, None)
    pos = after
    while pos < stop and framed < allowed:
        chunk, n, pos = window.decode(pos, stop, cap, framed, min(STREAM_CHUNK, allowed - framed))
        if chunk:
            first = chunk[0] if first is None else first
            last = chunk[-1]
        good += len(chunk)
        framed += n
    if codec == 0:
        data = window.data
    else:  # the compressed bytes are kept, not the decompressed ones: inflated again when read
        window.data = None
        data = (codec, payload, size)
    return RecordStream(window, data, start, pos, good, first, last), framed, pos


class _Window:
    """Decodes the records of one batch's record bytes a window at a time."""

    __slots__ = ("data", "base_offset", "base_timestamp", "fixed_timestamp", "where", "shift",
                 "compressed_at", "codec")

    def __init__(self, data, base_offset, base_timestamp, fixed_timestamp, where, shift,
                 compressed_at, codec):
        self.data, self.base_offset, self.base_timestamp = data, base_offset, base_timestamp
        self.fixed_timestamp, self.where, self.shift = fixed_timestamp, where, shift
        self.compressed_at, self.codec = compressed_at, codec

    def decode(self, pos: int, end: int, problems, first_index: int, limit: int
               ) -> tuple[list[dict], int, int]:
        """Up to ``limit`` records from data[pos:end]: (records, records framed, position after
        them; ``end`` when nothing more can be framed)."""
        if _fast is not None:
            bad_keys: list = []
            room = getattr(problems, "room", None)  # a ProblemCap: only the warnings it shows
            got = _fast(self.data, pos, end, self.base_offset, self.base_timestamp,
                        self.fixed_timestamp, limit, bad_keys,
                        *(() if room is None else (room("headers"),)))
            if got is not None:
                records, after, bad = got
                if bad:
                    _key_warnings(bad_keys, bad, problems, self.where, first_index, self.shift,
                                  self.compressed_at)
                return records, len(records), after
        return decode_py(self.data, pos, end, self.base_offset, self.base_timestamp,
                         self.fixed_timestamp, self.where, problems, self.shift,
                         self.compressed_at, self.codec, first_index, limit)


_fast = native.v2records.decode if native.v2records is not None else None
MAX_BAD_RECORDS = 10_000  # records of one batch that do not decode before the rest is given up


def decode_py(data: bytes, pos: int, end: int, base_offset: int, base_timestamp: int,
              fixed_timestamp: int | None, where: str, problems, shift: int,
              compressed_at: int | None, codec: str = "", first_index: int = 0,
              limit: int | None = None) -> tuple[list[dict], int, int]:
    """The Python loop, native/_v2records.c decode's twin: the same records as the C fast path,
    and every problem on the way.

    Problem offsets are ``shift + position`` for uncompressed data; inside a decompressed
    payload they are ``compressed_at`` (the payload's absolute position) and the text names
    the codec and the decompressed byte. A record without headers shares the empty tuple.
    Returns the records, how many were framed (decoded or not), and where the next one starts
    (``end`` once a record's length leaves nothing to frame).
    """
    records: list[dict] = []
    append = records.append
    counted = getattr(problems, "counted", None)  # a ProblemCap
    bad = 0  # records framed but not decoded
    record_end = pos  # where the last framed record ends: past start once a record is framed
    if limit is None:
        limit = end
    while pos < end and len(records) + bad < limit:
        start = pos
        index = first_index + len(records) + bad
        try:
            length, pos = _varint(data, pos, 5)
            record_end = pos + length
            if length < 6 or record_end > end:
                record_end = start
                raise _Bad("record_length", f"record length {length} does not fit the "
                                            f"{end - pos} bytes left in the batch")
            # pos + 1: past the record attributes, unused by Kafka
            timestamp_delta, pos = _varint(data, pos + 1, 10)
            offset_delta, pos = _varint(data, pos, 5)
            key, pos = _bytes_or_null(data, pos, record_end, "record_length", "key")
            value, pos = _bytes_or_null(data, pos, record_end, "record_length", "value")
            if record_end - pos == 1 and data[pos] == 0:  # no headers, and the record ends here
                headers = ()
            else:
                headers, pos = _decode_headers(
                    data, pos, record_end, problems, where, index,
                    shift + start if compressed_at is None else compressed_at)
                if pos != record_end:
                    raise _Bad("record_length", f"record length says {length} bytes but its "
                                                f"fields take {pos - record_end + length}")
            pos = record_end
        except (_Bad, IndexError) as e:
            check = e.check if type(e) is _Bad else "record_length"
            if counted is None or not counted(check, ERROR):  # past the first few, only counted
                what = e.what if type(e) is _Bad else "record is truncated"
                if compressed_at is None:
                    at = shift + start
                else:
                    at = compressed_at
                    what += f" (byte {start} of the {codec}-decompressed records)"
                problems.append(Problem(what, f"{where} → records[{index}]", at, ERROR, check))
            bad += 1
            if counted is not None and problems.seen.get(check, 0) >= MAX_BAD_RECORDS:
                problems.append(Problem(
                    f"{MAX_BAD_RECORDS} records of this batch do not decode: the remaining "
                    f"{end - pos} bytes of its records are not decoded", where,
                    shift + pos if compressed_at is None else compressed_at, ERROR, "records_cut"))
                return records, len(records) + bad, end
            if record_end <= start:  # its length did not frame it: nothing after it can be
                return records, len(records) + bad, end
            pos = record_end
            continue
        append({"offset": base_offset + offset_delta,
                "timestamp": (base_timestamp + timestamp_delta if fixed_timestamp is None
                              else fixed_timestamp),
                "key": key, "value": value, "headers": headers})
    return records, len(records) + bad, pos


# Varints of one and two bytes, zigzag-decoded: _ONE_BYTE[byte] when byte < 0x80, else
# _TWO_BYTES[byte][second] when second < 0x80. Tuple indexing is the interpreter's fastest.
# With raw = low 7 bits | second << 7, a row (one low) is an arithmetic run over second: even
# raws give raw >> 1, odd ones ~(raw >> 1). Built from ranges: a loop over all 16,384 raws was
# 15M instructions of every run's start-up.
_ONE_BYTE = tuple((raw >> 1) ^ -(raw & 1) for raw in range(0x80))
_TWO_BYTES = (None,) * 0x80 + tuple(
    tuple(range(low >> 1, (low >> 1) + (64 << 7), 64)) if not low & 1
    else tuple(range(~(low >> 1), ~(low >> 1) - (64 << 7), -64)) for low in range(0x80))


def _varint(data: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """The zigzag varint at ``pos`` (at most ``max_bytes`` long) and the position after it."""
    byte = data[pos]
    if byte < 0x80:
        return _ONE_BYTE[byte], pos + 1
    second = data[pos + 1]
    if second < 0x80:
        return _TWO_BYTES[byte][second], pos + 2
    raw, pos = _uvarint(data, pos, max_bytes)
    return (raw >> 1) ^ -(raw & 1), pos


def _uvarint(data: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    value = shift = 0
    limit = pos + max_bytes
    while pos < limit:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            bits = 32 if max_bytes == 5 else 64
            if value >> bits:
                raise _Bad("varint_bounds", f"varint value {value:#x} does not fit {bits} bits")
            return value, pos
        shift += 7
    raise _Bad("varint_bounds", f"varint longer than {max_bytes} bytes")


def _bytes_or_null(data: bytes, pos: int, record_end: int, check: str, what: str
                   ) -> tuple[bytes | None, int]:
    """A varint length, then that many bytes (length -1: None), inside the record."""
    size, pos = _varint(data, pos, 5)
    if size >= 0:
        stop = pos + size
        if stop > record_end:
            raise _Bad(check, f"{what} of {size} bytes overruns the record")
        return data[pos:stop], stop
    if size == -1:
        return None, pos
    raise _Bad(check, f"{what} length {size} is negative")


def _decode_headers(data: bytes, pos: int, record_end: int, problems: list[Problem], where: str,
                    index: int, at: int) -> tuple[list[dict] | tuple, int]:
    """The header count and headers of record ``index``; ``at`` locates its problems."""
    count, pos = _varint(data, pos, 5)
    if count == 0:
        return (), pos
    if count < 0 or count > (record_end - pos) // 2:
        raise _Bad("headers", f"header count {count} does not fit the record")
    headers = []
    for number in range(count):
        size, pos = _varint(data, pos, 5)
        stop = pos + size
        if size < 0 or stop > record_end:
            raise _Bad("headers", f"header[{number}] key length {size} is invalid here")
        try:
            key = data[pos:stop].decode()
        except UnicodeDecodeError:
            key = data[pos:stop].decode("utf-8", "replace")
            counted = getattr(problems, "counted", None)  # a ProblemCap: past its first few,
            if counted is None or not counted("headers", WARNING):  # only counted, never built
                problems.append(Problem(f"header[{number}] key is not valid UTF-8",
                                        f"{where} → records[{index}]", at, WARNING, "headers"))
        value, pos = _bytes_or_null(data, stop, record_end, "headers", f"header[{number}] value")
        headers.append({"key": key, "value": value})
    return headers, pos


def _key_warnings(bad_keys: list[tuple[int, int, int]], count: int, problems, where: str,
                  first_index: int, shift: int, compressed_at: int | None) -> None:
    """The warnings ``_decode_headers`` gives, for the ``count`` header keys that are not UTF-8
    the C loop decoded: ``bad_keys`` holds the first of them as (record index in the call,
    header number, position of the record), as many as ``problems`` shows; the rest (when it
    is a ProblemCap with no more room) are only counted."""
    for index, number, start in bad_keys:
        problems.append(Problem(f"header[{number}] key is not valid UTF-8",
                                f"{where} → records[{first_index + index}]",
                                shift + start if compressed_at is None else compressed_at,
                                WARNING, "headers"))
    if count > len(bad_keys):
        problems.count("headers", count - len(bad_keys), WARNING)
