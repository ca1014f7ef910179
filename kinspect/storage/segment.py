"""Walk a log segment (or a KRaft .checkpoint) unit by unit, and get past damage.

    for kind, item, problems in walk_segment(buf, "00000000000000000000.log", checks=True):
        kind == "batch":   item is a decoded v2 batch or legacy message (kinspect.records);
                           with decode=False only its header (see header()), CRC unchecked
        kind == "damage":  item = {"position", "size", "resumed_at", "what"}: bytes that are not
                           a batch; the walk goes on at the next valid batch, if any
        kind == "padding": item = {"position", "size"}: zero bytes to the end (preallocated)

A unit is framed by its int64 offset and int32 length; its magic byte (unit byte 16) picks the
decoder. Where the framing fails (a length that cannot be, an unknown magic, a cut-off tail),
or where a batch fails its CRC and a valid batch starts inside it, the bytes up to the next
valid batch are damage: the scan looks for a plausible header whose CRC holds. Positions are
file positions; buf may be an mmap (memory stays at one batch).
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterator

from kinspect.records.crc import crc32c

from kinspect.problems import ERROR, INFO, Problem
from kinspect.records import batch as v2
from kinspect.records import legacy
from kinspect.records.checks import check_batch, check_offset_order
from kinspect.limits import Budget, Limits
from kinspect.records.codecs import DEFAULT_MAX_OUTPUT

FRAME = struct.Struct(">qi")
FRAME_SIZE = 12
MAGIC_AT = 16
MIN_LENGTH = {0: legacy.MIN_MESSAGE_SIZE[0], 1: legacy.MIN_MESSAGE_SIZE[1], 2: v2.MIN_BATCH_LENGTH}
_V2_CHECKED = struct.Struct(">Ihiqqqhii")  # crc .. records count, after the magic byte
# a v2 magic byte, 4 CRC bytes, then attributes whose reserved bits (0xFF80) are clear
_V2_CANDIDATE = re.compile(rb"\x02....\x00[\x00-\x7f]", re.S)
# a legacy magic byte and its attributes (codec and timestamp type bits only)
_LEGACY_CANDIDATE = re.compile(rb"[\x00\x01][\x00-\x0f]")
_NONZERO = re.compile(rb"[^\x00]")

Item = tuple[str, dict, list[Problem]]
CRC_BUDGET_PER_BYTE, CRC_BUDGET_MIN = 16, 1 << 20


def walk_segment(buf, path: str = "segment", *, checks: bool = False, decode: bool = True,
                 max_output: int = DEFAULT_MAX_OUTPUT) -> Iterator[Item]:
    view = memoryview(buf).cast("B") if not isinstance(buf, bytes) else memoryview(buf)
    data = buf if isinstance(buf, bytes) else view
    end = len(view)
    if isinstance(max_output, Budget):
        budget = max_output
    else:  # the bounds (Limits), or the bound of one batch: a budget for this file
        limits = max_output if isinstance(max_output, Limits) else Limits(max_batch_bytes=max_output)
        budget = Budget(limits, input_bytes=end)
    pos = index = 0
    previous_last = None
    crc_budget = [CRC_BUDGET_PER_BYTE * end + CRC_BUDGET_MIN]  # for resynchronising (find_next_batch)
    while pos < end:
        left = end - pos
        if _zero_from(view, pos, end):
            yield "padding", {"position": pos, "size": left}, [Problem(
                f"{left} zero bytes from byte {pos} to the end (preallocated or padded space)",
                path, pos, INFO, "trailing_zeros")]
            return
        trouble = _frame_trouble(data, view, pos, end)
        if trouble is None:
            length = FRAME.unpack_from(data, pos)[1]
            unit_end = pos + FRAME_SIZE + length
            problems: list[Problem] = []
            if not decode:
                yield "batch", header(data, view, pos), problems
                index += 1
                pos = unit_end
                continue
            budget.next_unit()  # each unit is consumed before the next is decoded
            unit = _decode_unit(data, view, pos, index, path, problems, budget, checks)
            if not unit["crc_valid"]:
                inner = find_next_batch(data, view, pos + 1, end, stop=unit_end, crc_budget=crc_budget)
                if inner is not None:
                    yield _damage(pos, inner, end, path,
                                  f"what looks like a batch of {FRAME_SIZE + length} bytes fails "
                                  f"its CRC and a valid batch starts inside it")
                    pos = inner
                    continue
            if checks:
                first = _first_offset(unit)
                check_offset_order(previous_last, first, f"{path} → batch[{index}]", pos,
                                   problems)
                previous_last = _last_offset(unit)
            yield "batch", unit, problems
            index += 1
            pos = unit_end
            continue
        resume = find_next_batch(data, view, pos + 1, end, crc_budget=crc_budget)
        if resume is None and crc_budget[0] < 0:
            trouble += (f"; the search for the next valid batch stopped after checking CRCs over "
                        f"{CRC_BUDGET_PER_BYTE} times the file's size (too many false starts)")
        yield _damage(pos, resume, end, path, trouble)
        if resume is None:
            return
        pos = resume


def _damage(pos: int, resume: int | None, end: int, path: str, trouble: str) -> Item:
    stop = end if resume is None else resume
    size = stop - pos
    tail = ("to the end of the file" if resume is None
            else f"to the next valid batch at byte {resume}")
    what = f"{size} bytes at byte {pos} are not a valid batch ({trouble}); skipped {tail}"
    return "damage", {"position": pos, "size": size, "resumed_at": resume, "what": trouble}, [
        Problem(what, path, pos, ERROR, "damage", None, size)]


def _frame_trouble(data, view: memoryview, pos: int, end: int) -> str | None:
    """Why the unit at pos cannot be framed, or None when it can."""
    left = end - pos
    if left < MAGIC_AT + 1:
        return f"only {left} bytes left, too few for a batch header"
    length = FRAME.unpack_from(data, pos)[1]
    magic = view[pos + MAGIC_AT]
    minimum = MIN_LENGTH.get(magic)
    if minimum is None:
        return f"unknown magic {magic}"
    if length < minimum:
        return f"length {length} is below the minimum {minimum} for magic {magic}"
    if length > left - FRAME_SIZE:
        return (f"a batch that declares {length} bytes after its length field, but only "
                f"{left - FRAME_SIZE} remain: truncated")
    return None


_V2_HEADER = v2.HEADER
_LEGACY_TIMESTAMP = struct.Struct(">q")


def header(data, view: memoryview, pos: int) -> dict:
    """The header fields of the framed unit at pos, without decoding or checking anything."""
    if view[pos + MAGIC_AT] == 2:
        (base_offset, length, _epoch, magic, _crc, attributes, last_delta, _first_ts, max_ts,
         producer_id, producer_epoch, sequence, _count) = _V2_HEADER.unpack_from(data, pos)
        return {"magic": 2, "position": pos, "size": FRAME_SIZE + length,
                "base_offset": base_offset, "last_offset": base_offset + last_delta,
                "max_timestamp": max_ts, "producer_id": producer_id,
                "producer_epoch": producer_epoch, "base_sequence": sequence,
                "is_transactional": bool(attributes & v2.TRANSACTIONAL_BIT),
                "is_control": bool(attributes & v2.CONTROL_BIT)}
    offset, size = FRAME.unpack_from(data, pos)
    magic = view[pos + MAGIC_AT]
    timestamp = _LEGACY_TIMESTAMP.unpack_from(data, pos + 18)[0] if magic == 1 else -1
    return {"magic": magic, "position": pos, "size": FRAME_SIZE + size, "base_offset": None,
            "last_offset": offset, "max_timestamp": timestamp, "producer_id": -1,
            "producer_epoch": -1, "base_sequence": -1, "is_transactional": False,
            "is_control": False}


def _decode_unit(data, view, pos, index, path, problems, max_output, checks) -> dict:
    where = f"{path} → batch[{index}]"
    if view[pos + MAGIC_AT] == 2:
        unit = v2.decode_batch(data, view, pos, index, path, 0, problems, max_output)
        if checks:
            check_batch(unit, where, problems)
        return unit
    return legacy.decode_message(data, view, pos, index, path, 0, problems, max_output, checks)


def _first_offset(unit: dict) -> int:
    if unit["magic"] == 2:
        return unit["base_offset"]
    return unit["records"][0]["offset"] if unit["records"] else unit["offset"]


def _last_offset(unit: dict) -> int:
    if unit["magic"] == 2:
        return unit["base_offset"] + unit["last_offset_delta"]
    return unit["offset"]


def _zero_from(view: memoryview, pos: int, end: int) -> bool:
    """Only zero bytes from pos to the end (a frame of zeros is never a batch)."""
    if end - pos < FRAME_SIZE or any(view[pos:pos + FRAME_SIZE]):
        return False
    return _NONZERO.search(view, pos) is None


def find_next_batch(data, view: memoryview, start: int, end: int, stop: int | None = None,
                    crc_budget: list | None = None) -> int | None:
    """The first position in [start, stop) where a whole unit with a valid CRC begins.

    ``crc_budget``: [bytes the walk may still run candidates' CRCs over]. Every candidate claims
    a length; a file of candidates each claiming half of it would cost its size squared. Once
    the budget is spent no candidate is taken, so the walk stays linear (and says why)."""
    stop = end if stop is None else stop
    best = None
    for pattern, check in ((_V2_CANDIDATE, _valid_v2), (_LEGACY_CANDIDATE, _valid_legacy)):
        found = _first_candidate(pattern, check, data, view, start, end,
                                 stop if best is None else best, crc_budget)
        if found is not None:
            best = found
    return best


def _first_candidate(pattern, check, data, view, start: int, end: int, stop: int,
                     crc_budget: list | None) -> int | None:
    search_from = start + MAGIC_AT
    while True:
        match = pattern.search(view, search_from, min(stop + MAGIC_AT + 2, end))
        if match is None:
            return None
        magic_at = match.start()
        if magic_at - MAGIC_AT >= stop:
            return None
        run_end = _zero_run_end(view, magic_at, end)
        # inside a run of zeros every byte matches the legacy pattern, but a unit whose magic
        # sits 8 or more bytes into the run has a zero length: check the first 8, skip the rest
        last = magic_at + (8 if run_end - magic_at > 10 else 0)
        for at in range(magic_at, last + 1):
            candidate = at - MAGIC_AT
            if candidate >= stop:
                return None
            if (candidate >= start and check(data, view, candidate, end)
                    and _crc_affordable(view, candidate, crc_budget)
                    and check(data, view, candidate, end, crc=True)):
                return candidate
        search_from = max(last + 1, run_end - 1)


def _zero_run_end(view: memoryview, pos: int, end: int) -> int:
    """The end of the run of zero bytes starting at pos (pos itself when view[pos] != 0)."""
    if view[pos] or pos + 1 >= end or view[pos + 1]:
        return pos
    nonzero = _NONZERO.search(view, pos, end)
    return end if nonzero is None else nonzero.start()


def _crc_affordable(view, pos: int, crc_budget: list | None) -> bool:
    """Whether the CRC of the unit claimed at pos may still be run (see find_next_batch)."""
    if crc_budget is None:
        return True
    crc_budget[0] -= FRAME_SIZE + FRAME.unpack_from(view, pos)[1]
    return crc_budget[0] >= 0


def _valid_v2(data, view, pos: int, end: int, crc: bool = False) -> bool:
    """A plausible v2 header at pos (and with ``crc``, its CRC holds)."""
    offset, length = FRAME.unpack_from(data, pos)
    if offset < 0 or length < v2.MIN_BATCH_LENGTH or length > end - pos - FRAME_SIZE:
        return False
    (crc_field, _attributes, last_delta, _first_ts, _max_ts, producer_id, epoch, sequence,
     count) = _V2_CHECKED.unpack_from(data, pos + MAGIC_AT + 1)
    if last_delta < 0 or count < 0 or producer_id < -1 or epoch < -1 or sequence < -1:
        return False
    return not crc or crc32c(view[pos + v2.CRC_START:pos + FRAME_SIZE + length]) == crc_field


def _valid_legacy(data, view, pos: int, end: int, crc: bool = False) -> bool:
    offset, length = FRAME.unpack_from(data, pos)
    magic = view[pos + MAGIC_AT]
    if offset < 0 or length < MIN_LENGTH[magic] or length > end - pos - FRAME_SIZE:
        return False
    crc_field = struct.unpack_from(">I", data, pos + FRAME_SIZE)[0]
    return not crc or zlib.crc32(view[pos + legacy.CRC_START:pos + FRAME_SIZE + length]) == crc_field
