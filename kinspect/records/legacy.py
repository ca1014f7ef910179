"""Legacy message sets (magic 0 and 1), including compressed wrapper messages.

Message: int64 offset, int32 message_size, uint32 crc, int8 magic, int8 attributes,
[int64 timestamp if magic 1], int32-length key, int32-length value. The CRC-32 covers
magic..end. A compressed wrapper's value is a compressed message set one level deep; magic-1
inner offsets are relative (the wrapper carries the last inner offset), magic-0 absolute.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from kinspect.limits import OPTION, Budget, Limits
from kinspect.problems import ERROR, WARNING, Problem, ProblemCap
from kinspect.records.checks import check_legacy_message
from kinspect.records.codecs import codec_name, decompress
from kinspect.records.stream import STREAM_CHUNK, RecordStream

HEADER = struct.Struct(">qiIbb")  # offset, message_size, crc, magic, attributes
FRAME = struct.Struct(">qi")
MIN_MESSAGE_SIZE = {0: 14, 1: 22}
CRC_START = 16
TIMESTAMP_TYPE_BIT = 0x08
CODEC_MASK = 0x07

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def decode_message(buf, view: memoryview, pos: int, index: int, path: str, base: int,
                   problems: list[Problem], max_output: int | Budget, checks: bool) -> dict:
    """Decode one top-level message occupying buf[pos:pos + 12 + message_size]; ``max_output``:
    the Budget of the unit of work, or (alone) the bound of one wrapper's decompression."""
    where = f"{path} → batch[{index}]"
    (offset, size, crc, magic, attributes, timestamp, key, value, computed,
     error) = _read_message(buf, view, pos)
    budget = (max_output if isinstance(max_output, Budget)
              else Budget(Limits(max_batch_bytes=max_output), input_bytes=12 + size))
    codec = attributes & CODEC_MASK
    message = {
        "magic": magic, "offset": offset, "message_size": size, "crc": crc,
        "crc_valid": computed == crc, "attributes": attributes, "compression": codec_name(codec),
        "timestamp_type": _timestamp_type(magic, attributes), "timestamp": timestamp,
        "position": base + pos, "records": [],
    }
    if computed != crc:
        problems.append(Problem(f"message CRC-32 is {crc:#010x} but the bytes give {computed:#010x}",
                                where, base + pos + 12, ERROR, "crc", computed, crc))
    if error:
        problems.append(Problem(error, where, base + pos, ERROR, "record_length"))
        return message
    raw_offsets = None
    if codec == 0:
        message["records"] = [{"offset": offset, "timestamp": timestamp, "key": key,
                               "value": value, "headers": ()}]
    else:
        value_at = base + pos + 12 + size - (len(value) if value is not None else 0)
        cap = ProblemCap(problems)
        message["records"], raw_offsets = _decompress_wrapper(
            message, value, where, value_at, cap, budget)
        cap.close(where, base + pos)
    if checks:
        check_legacy_message(message, raw_offsets, where, problems)
    return message


def _read_message(data, view: memoryview, pos: int) -> tuple:
    offset, size, crc, magic, attributes = HEADER.unpack_from(data, pos)
    end = pos + 12 + size
    cursor = pos + 18
    timestamp = None
    if magic == 1:
        (timestamp,) = _I64.unpack_from(data, cursor)
        cursor += 8
    key, cursor, error = _sized_bytes(data, cursor, end, "key")
    value = None
    if error is None:
        value, cursor, error = _sized_bytes(data, cursor, end, "value")
    if error is None and cursor != end:
        error = f"{end - cursor} bytes after the value, inside the message size"
    computed = zlib.crc32(view[pos + CRC_START:end])
    return offset, size, crc, magic, attributes, timestamp, key, value, computed, error


def _sized_bytes(data, pos: int, end: int, name: str) -> tuple[bytes | None, int, str | None]:
    if end - pos < 4:
        return None, pos, f"{name} length runs past the end of the message"
    (size,) = _I32.unpack_from(data, pos)
    pos += 4
    if size == -1:
        return None, pos, None
    if size < 0 or size > end - pos:
        return None, pos, f"{name} length {size} does not fit the {end - pos} bytes left"
    return bytes(data[pos:pos + size]), pos + size, None


def _timestamp_type(magic: int, attributes: int) -> str | None:
    if magic == 0:
        return None
    return "LogAppendTime" if attributes & TIMESTAMP_TYPE_BIT else "CreateTime"


def _decompress_wrapper(wrapper: dict, value: bytes | None, where: str, at: int,
                        problems, budget: Budget) -> tuple[list[dict], list[int] | None]:
    if value is None:
        problems.append(Problem(f"compressed ({wrapper['compression']}) wrapper message has a "
                                f"null value", where, at, ERROR, "decompress"))
        return [], None
    bound, option = budget.inflate_bound(len(value))
    data, notes = decompress(wrapper["attributes"] & CODEC_MASK, value, bound, wrapper["magic"],
                             f"raise it with {option}")
    for severity, text in notes:
        problems.append(Problem(f"{text} (wrapper message at byte {wrapper['position']:#x})",
                                where, at, severity, "decompress"))
    if data is None:
        return [], None
    budget.inflated(len(data))
    codec, size = wrapper["attributes"] & CODEC_MASK, len(data)
    again = lambda: decompress(codec, value, size, wrapper["magic"], "")[0]  # noqa: E731
    return _decode_inner(data, wrapper, where, at, problems, budget, again)


def _decode_inner(data: bytes, wrapper: dict, where: str, at: int, problems, budget: Budget,
                  again=None) -> tuple[list[dict] | WrapperStream, list[int]]:
    """Inner messages of a wrapper; problem offsets are the wrapper value's position. Past
    what the budget lets it hold, inner messages are checked and counted now, and decompressed
    and walked again (``again()`` gives the bytes) when the output is written."""
    held, allowed = budget.records_left, budget.decode_allowed()
    records: list[dict] = []
    raw_offsets: list[int] = []
    view = memoryview(data)
    codec = f"{wrapper['compression']}-decompressed"
    pos, end, last = 0, len(data), None
    while pos < end:
        if len(raw_offsets) >= allowed:
            problems.append(Problem(f"{budget.cut_note(len(raw_offsets))} ({codec} byte {pos})",
                                    _inner(where, raw_offsets), at, ERROR, "records_cut"))
            break
        left = end - pos
        if left < 17:
            problems.append(Problem(f"decompressed message set ends with {left} bytes that are "
                                    f"not a message ({codec} byte {pos})",
                                    _inner(where, raw_offsets), at, ERROR, "decompress"))
            break
        _, size = FRAME.unpack_from(data, pos)
        magic = data[pos + 16]
        if magic not in MIN_MESSAGE_SIZE or size < MIN_MESSAGE_SIZE[magic] or size > left - 12:
            problems.append(Problem(
                f"decompressed bytes are not a message set: message of size {size}, magic {magic} "
                f"with {left - 12} bytes left ({codec} byte {pos})",
                _inner(where, raw_offsets), at, ERROR, "decompress"))
            break
        fields = _read_message(data, view, pos)
        (offset, _, crc, magic, attributes, timestamp, key, value, computed, error) = fields
        if error:
            problems.append(Problem(f"{error} ({codec} byte {pos})", _inner(where, raw_offsets),
                                    at, ERROR, "record_length"))
            break
        if computed != crc:
            problems.append(Problem(
                f"inner message CRC-32 is {crc:#010x} but the bytes give {computed:#010x} "
                f"({codec} byte {pos})", _inner(where, raw_offsets), at, ERROR, "crc", computed,
                crc))
        if attributes & CODEC_MASK:
            problems.append(Problem(
                f"inner message is itself compressed ({codec_name(attributes & CODEC_MASK)}): "
                f"wrappers nest one level only ({codec} byte {pos})",
                _inner(where, raw_offsets), at, ERROR, "wrapper_nesting"))
        raw_offsets.append(offset)
        if len(records) < held:
            records.append(_inner_record(fields))
        last = fields
        pos += 12 + size
    budget.decoded(len(raw_offsets))
    budget.hold_records(len(records))
    resolve = _resolver(wrapper, raw_offsets)
    resolve(records)
    if len(raw_offsets) > len(records):
        if again is None:  # no compressed bytes to read again (not reached by decode_message)
            problems.append(Problem(
                f"wrapper holds {len(raw_offsets)} inner messages: only the first {len(records)} "
                f"are kept in the output (raise it with {OPTION['eager_records']})", where, at,
                WARNING, "records_cut", len(raw_offsets), len(records)))
            return records, raw_offsets
        final = [_inner_record(last)]
        resolve(final)
        return WrapperStream(again, pos, resolve, len(raw_offsets),
                             records[0] if records else None, final[0]), raw_offsets
    return records, raw_offsets


def _inner_record(fields: tuple, stored_crc: bool = False) -> dict:
    offset, _, crc, magic, attributes, timestamp, key, value, computed, _ = fields
    record = {"offset": offset, "timestamp": timestamp, "key": key, "value": value,
              "headers": (), "crc_valid": computed == crc, "magic": magic, "attributes": attributes}
    if stored_crc:
        record["crc"] = crc
    return record


class WrapperStream(RecordStream):
    """The inner messages of a wrapper with more of them than may be held: the first walk
    counted them and found their problems; reading decompresses and walks them again,
    ``size`` at a time, up to where the first walk stopped."""

    __slots__ = ("_again", "_resolve", "_stored_crc")

    def __init__(self, again, stop: int, resolve, count: int, first: dict | None,
                 last: dict | None, each=None, stored_crc: bool = False):
        self._again, self._stop, self._resolve = again, stop, resolve
        self._count, self._first, self._last, self._each = count, first, last, each
        self._stored_crc = stored_crc

    def mapped(self, each) -> WrapperStream:
        inner = self._each
        composed = each if inner is None else (lambda record: each(inner(record)))
        return WrapperStream(self._again, self._stop, self._resolve, self._count, self._first,
                             self._last, composed, self._stored_crc)

    def with_stored_crc(self) -> WrapperStream:
        """The same records, each with the CRC its message stores (``crc``, as dump shows it)."""
        return WrapperStream(self._again, self._stop, self._resolve, self._count, None, None,
                             self._each, True)

    def chunks(self, size: int = 0) -> Iterator[list[dict]]:
        size = size or STREAM_CHUNK
        data = self._again()
        if data is None:
            return
        view = memoryview(data)
        pos, chunk = 0, []
        while pos < self._stop:
            fields = _read_message(data, view, pos)
            chunk.append(_inner_record(fields, self._stored_crc))
            pos += 12 + fields[1]
            if len(chunk) >= size or pos >= self._stop:
                self._resolve(chunk)
                yield chunk if self._each is None else list(map(self._each, chunk))
                chunk = []

    def __repr__(self) -> str:
        return f"<WrapperStream of {self._count} inner messages>"


def _inner(where: str, raw_offsets: list[int]) -> str:
    return f"{where} → records[{len(raw_offsets)}]"


def _resolver(wrapper: dict, raw_offsets: list[int]):
    """How inner records get their absolute offsets and effective timestamps, as Kafka's
    consumer computes them: a function applied to each list of records as it is built."""
    magic = wrapper["magic"]
    shift = wrapper["offset"] - raw_offsets[-1] if raw_offsets else 0
    append_time = wrapper["timestamp"] if wrapper["timestamp_type"] == "LogAppendTime" else None

    def resolve(records: list[dict]) -> None:
        for record in records:
            if magic == 0:
                record["timestamp"] = None
                continue
            record["offset"] += shift
            if append_time is not None:
                record["timestamp"] = append_time
    return resolve