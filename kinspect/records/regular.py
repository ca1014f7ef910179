"""The common record set in one go: whole v2 batches, CRCs right, records regular, kept packed.

A Produce request or a Fetch response usually carries a record set of one or a few regular
v2 batches (a Fetch response's maybe followed by one its size limit cut off).
``decode_regular`` decodes such a set for an output that keeps records packed
(Budget.pack_records) with one C call (``native.v2records.frame``: framing, CRC-32C, header
fields, and the scan of uncompressed records), calling back into Python only to decompress.
The result is what recordset.decode_records gives for the same set: the same batch dicts (key
for key, in order), the same problems, the same Budget left. Anything else (a unit of another
magic or too short, a bad CRC, a codec note, records that can't be packed, a control batch,
more batches or records than the Budget lets be held) returns None with the Budget as it was,
and the general walk decodes the set and reports what it finds.
"""

from __future__ import annotations

from kinspect import native
from kinspect.limits import Budget
from kinspect.problems import Problem
from kinspect.records import batch as v2
from kinspect.records.checks import check_batch, check_offset_order
from kinspect.records.codecs import codec_name, decompress
from kinspect.records.crc import crc32c
from kinspect.records.packed import PackedRecords
from kinspect.records.stream import BATCH_WEIGHT
from kinspect.records.trailing import FRAME, FRAME_SIZE, cut_off

_RECORDS_AT = v2.HEADER_SIZE  # 61
_STATE = ("inflate_left", "records_left", "decode_left", "inflate_low", "decode_low")
_CODEC_NAMES = {codec: codec_name(codec) for codec in range(8)}
# checks.check_batch on a packed batch that is not a control batch finds something only when
# one of the conditions decode_regular tests holds (reserved attribute bits, lastOffsetDelta,
# maxTimestamp, producer fields): otherwise it is not called. Keep the two in step
# (tests/unit/records/test_regular.py breaks each rule and compares with the general walk).
_RESERVED_BITS = 0xFF80


def decode_regular(data: bytes | memoryview, path: str, base: int, partial_ok: bool, checks: bool,
                   budget: Budget) -> tuple[list[dict], list[Problem]] | None:
    """The batches of a record set of regular v2 batches (maybe followed by a cut-off one) and
    their problems, or None (and ``budget`` untouched) when the set needs the general walk."""
    if _frame is None:  # data: bytes, or a flat view of bytes (recordset._whole_bytes)
        return None
    most = budget.records_left // BATCH_WEIGHT  # batches that may be held: more are streamed
    framed, framed_end = _frame(data, min(budget.records_left + 1, budget.decode_allowed()), most)
    if framed_end < len(data) and (len(framed) >= most or not _cut_off_at(data, framed_end)):
        return None
    view = memoryview(data)
    state = (budget.inflate_left, budget.records_left, budget.decode_left, budget.inflate_low,
             budget.decode_low)
    batches: list[dict] = []
    problems: list[Problem] = []
    previous_last = None
    for index, (pos, base_offset, batch_length, leader_epoch, crc, attributes, last_offset_delta,
                base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
                records_count, packed) in enumerate(framed):
        if attributes & v2.CONTROL_BIT:  # its control record is decoded and checked: not here
            return _restore(budget, state)
        end = pos + 12 + batch_length
        codec = attributes & v2.CODEC_MASK
        log_append_time = attributes & v2.TIMESTAMP_TYPE_BIT
        fixed_timestamp = max_timestamp if log_append_time else None
        if codec == 0:  # kept as bytes (to_json reads bytes): a view's records copied out
            if type(data) is bytes:
                records_data, start, stop = data, pos + _RECORDS_AT, end
            else:
                records_data = data[pos + _RECORDS_AT:end].tobytes()
                start, stop = 0, end - pos - _RECORDS_AT
            limit = min(budget.records_left + 1, budget.decode_allowed())
        else:
            bound, option = budget.inflate_bound(end - pos - _RECORDS_AT)
            records_data, notes = decompress(codec, view[pos + _RECORDS_AT:end], bound,
                                             2, f"raise it with {option}")
            if notes or records_data is None:
                return _restore(budget, state)
            budget.inflated(len(records_data))
            start, stop = 0, len(records_data)
            limit = min(budget.records_left + 1, budget.decode_allowed())
            packed = _scan(records_data, 0, stop, base_offset, base_timestamp, fixed_timestamp,
                           limit)
        # frame scanned with the set's first limit, which later batches' may be below
        if packed is None or packed[0] > limit or packed[0] != records_count:
            return _restore(budget, state)
        count, largest = packed
        budget.held(count)
        budget.decoded(count)
        transactional = attributes & v2.TRANSACTIONAL_BIT
        unit = {
            "magic": 2, "base_offset": base_offset, "batch_length": batch_length,
            "partition_leader_epoch": leader_epoch, "crc": crc, "crc_valid": True,
            "attributes": attributes, "compression": _CODEC_NAMES[codec],
            "timestamp_type": "LogAppendTime" if log_append_time else "CreateTime",
            "is_transactional": bool(transactional), "is_control": False,
            "has_delete_horizon": bool(attributes & v2.DELETE_HORIZON_BIT),
            "last_offset_delta": last_offset_delta, "base_timestamp": base_timestamp,
            "max_timestamp": max_timestamp, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "base_sequence": base_sequence,
            "records_count": records_count, "position": base + pos,
            "records": PackedRecords(records_data, start, stop, base_offset, base_timestamp,
                                     fixed_timestamp, count, largest),
        }
        if checks:
            if (attributes & _RESERVED_BITS
                    or (count and last_offset_delta != count - 1)
                    or (max_timestamp < 0 if log_append_time else count and largest != max_timestamp)
                    or (producer_id < 0 or producer_epoch < 0 if transactional
                        else producer_id >= 0 and base_sequence < 0)):
                check_batch(unit, f"{path} → batch[{index}]", problems)  # it finds something
            if previous_last is not None:
                check_offset_order(previous_last, base_offset, f"{path} → batch[{index}]",
                                   base + pos, problems)
            previous_last = base_offset + last_offset_delta
        if not budget.hold_records(BATCH_WEIGHT):  # more batches than may be held: streamed
            return _restore(budget, state)
        batches.append(unit)
    if framed_end < len(data):
        cut_off(view, framed_end, len(data), f"{path} → batch[{len(framed)}]", base,
                partial_ok, problems)
    return batches, problems


def _cut_off_at(data: bytes | memoryview, pos: int) -> bool:
    """Whether the unit at ``pos`` is cut off by the end of data (trailing.cut_off's test)."""
    left = len(data) - pos
    return left < FRAME_SIZE or FRAME.unpack_from(data, pos)[1] > left - FRAME_SIZE


def _restore(budget: Budget, state: tuple) -> None:
    for name, value in zip(_STATE, state):
        setattr(budget, name, value)
    return None


def frame_py(data: bytes | memoryview, limit: int, max_batches: int) -> tuple[list[tuple], int]:
    """native.v2records.frame's twin: the whole v2 batches with matching CRCs data starts
    with, at most ``max_batches``, a tuple per batch of its position, its 13 header fields
    and, for an uncompressed batch that is not a control batch, what packed.scan gives for
    its records with ``limit`` (else None); and the position where they stop."""
    if type(data) is not bytes:  # any flat buffer, as C takes it
        data = bytes(data)
    batches = []
    pos, size = 0, len(data)
    while pos < size and len(batches) < max_batches:
        if size - pos < _RECORDS_AT:
            break
        length = FRAME.unpack_from(data, pos)[1]
        if length < v2.MIN_BATCH_LENGTH or length > size - pos - 12 or data[pos + 16] != 2:
            break
        end = pos + 12 + length
        header = v2.HEADER.unpack_from(data, pos)
        crc, attributes = header[4], header[5]
        if crc32c(memoryview(data)[pos + v2.CRC_START:end]) != crc:
            break
        packed = None
        if not attributes & (v2.CODEC_MASK | v2.CONTROL_BIT):
            fixed = header[8] if attributes & v2.TIMESTAMP_TYPE_BIT else None
            packed = scan_py(data, pos + _RECORDS_AT, end, header[0], header[7], fixed, limit)
        batches.append((pos, header[0], header[1], header[2], crc, attributes, *header[6:], packed))
        pos = end
    return batches, pos


def scan_py(data: bytes, start: int, stop: int, base_offset: int, base_timestamp: int,
            fixed_timestamp: int | None, limit: int) -> tuple[int, int | None] | None:
    """native.v2records.scan's twin: (count, largest timestamp) when every record of
    data[start:stop] decodes cleanly, its header keys are UTF-8, its offset deltas are 0, 1,
    2, ... and there are at most ``limit`` of them; None otherwise."""
    problems: list[Problem] = []
    records, framed, after = v2.decode_py(data, start, stop, base_offset, base_timestamp,
                                          fixed_timestamp, "", problems, 0, None, "", 0, limit)
    if problems or after < stop or framed != len(records):
        return None
    for delta, record in enumerate(records):
        if record["offset"] != base_offset + delta or not _fits(record["offset"]) or not _fits(
                record["timestamp"]):
            return None
    if fixed_timestamp is not None or not records:
        return len(records), None
    return len(records), max(record["timestamp"] for record in records)


def _fits(number: int) -> bool:
    return -(1 << 63) <= number < (1 << 63)


_frame = native.v2records.frame if native.v2records is not None else None
_scan = native.v2records.scan if native.v2records is not None else None
