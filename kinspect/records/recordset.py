"""Walk a record set: frame each unit (v2 batch or legacy message) and dispatch on its magic.

Every unit starts with int64 offset and int32 length (bytes that follow), and its magic byte
sits at unit byte 16 in all three formats, so framing is shared and mixed magics just work.
"""

from __future__ import annotations

from collections.abc import Iterator

from kinspect.limits import Budget
from kinspect.problems import ERROR, Problem, ProblemCap
from kinspect.records import batch as v2
from kinspect.records import legacy
from kinspect.records.checks import check_batch, check_offset_order
from kinspect.records.codecs import DEFAULT_MAX_OUTPUT
from kinspect.records.regular import decode_regular
from kinspect.records.stream import BATCH_CHUNK, BATCH_WEIGHT, BatchStream
from kinspect.records.trailing import FRAME, FRAME_SIZE, all_zero, cut_off, zero_padding

MAGIC_AT = 16
MIN_LENGTH = {0: legacy.MIN_MESSAGE_SIZE[0], 1: legacy.MIN_MESSAGE_SIZE[1], 2: v2.MIN_BATCH_LENGTH}


def decode_records(buf: bytes | bytearray | memoryview, path: str = "records", base: int = 0, *,
                   partial_ok: bool = True, checks: bool = False,
                   max_output: int | Budget = DEFAULT_MAX_OUTPUT
                   ) -> tuple[list[dict] | BatchStream, list[Problem]]:
    """Decode a record set: every v2 batch and legacy message, with the problems found.

    ``base`` is the absolute position of buf[0] (Problem offsets and batch positions are
    absolute); ``partial_ok`` makes a cut-off last unit informational (Fetch responses) rather
    than an error (segment files); ``checks`` adds the semantic checks of checks.py. With a
    Budget, a record set of more batches than it lets be held comes back as a BatchStream.
    """
    budget = max_output if isinstance(max_output, Budget) else None
    if budget is not None and budget.pack_records and _whole_bytes(buf):
        regular = decode_regular(buf, path, base, partial_ok, checks, budget)  # the common set, in one C call
        if regular is not None:
            return regular
    batches: list[dict] = []
    problems: list[Problem] = []
    start = budget.copy() if budget is not None else None
    cap = None  # once batches are streamed, problems of one check are counted past the first few
    count = 0
    for unit, unit_problems in iter_batches(buf, path, base, partial_ok=partial_ok,
                                            checks=checks, max_output=max_output):
        if unit is not None:
            count += 1
            if cap is None and budget is not None and not budget.hold_records(BATCH_WEIGHT):
                cap = ProblemCap(problems)
                batches = []  # more than may be held: read again when written (BatchStream)
            if cap is None:
                batches.append(unit)
        for problem in unit_problems:
            (cap or problems).append(problem)
    if cap is None:
        return batches, problems
    cap.close(path, base)

    def walk():
        again = start.copy()
        for number, (unit, _) in enumerate(iter_batches(buf, path, base, partial_ok=partial_ok,
                                                        max_output=again)):
            if number % BATCH_CHUNK == 0:
                again.next_unit()  # the chunk before was written out
            if unit is not None:
                yield unit

    return BatchStream(walk, count), problems


def _whole_bytes(buf) -> bool:
    """bytes, or a flat byte view of bytes: a mapped file's view is walked where it lies."""
    return type(buf) is bytes or (type(buf) is memoryview and type(buf.obj) in _COPIED
                                  and buf.format == "B" and buf.c_contiguous)


_COPIED = (bytes, bytearray)


def iter_batches(buf: bytes | bytearray | memoryview, path: str = "records", base: int = 0, *,
                 partial_ok: bool = True, checks: bool = False,
                 max_output: int = DEFAULT_MAX_OUTPUT) -> Iterator[tuple[dict | None, list[Problem]]]:
    """Yield (unit, problems) one unit at a time; trailing trouble comes as (None, problems).

    Memory stays bounded by the largest batch, so segment files can be streamed from mmap.
    """
    if isinstance(buf, bytes):
        view = memoryview(buf)
    else:  # bytearray, memoryview, mmap: read through a flat byte view, copy one batch at a time
        buf = view = memoryview(buf).cast("B")
    end = len(view)
    pos = 0
    index = 0
    previous_last = None
    while pos < end:
        problems: list[Problem] = []
        left = end - pos
        where = f"{path} → batch[{index}]"
        if cut_off(view, pos, end, where, base, partial_ok, problems):
            yield None, problems
            return
        length = FRAME.unpack_from(buf, pos)[1]
        magic = view[pos + MAGIC_AT] if length > MAGIC_AT - FRAME_SIZE else None
        minimum = MIN_LENGTH.get(magic)
        if magic is None or (minimum is not None and length < minimum):
            # a wrong length: nothing after this point can be framed
            if all_zero(view, pos, end):
                zero_padding(pos, end, where, base, problems)
            else:
                minimum = minimum or MAGIC_AT - FRAME_SIZE + 1
                problems.append(Problem(
                    f"length {length} is below the minimum {minimum}"
                    f"{'' if magic is None else f' for magic {magic}'}; the remaining {left} "
                    f"bytes cannot be framed", where, base + pos + 8, ERROR, "batch_length",
                    f">= {minimum}", length))
            yield None, problems
            return
        if minimum is None:  # unknown magic: the length is all we can trust, so skip the unit
            problems.append(Problem(f"unknown magic {magic}", where, base + pos + MAGIC_AT, ERROR,
                                    "magic", "0, 1 or 2", magic))
            yield None, problems
        elif magic == 2:
            unit = v2.decode_batch(buf, view, pos, index, path, base, problems, max_output)
            if checks:
                check_batch(unit, where, problems)
                check_offset_order(previous_last, unit["base_offset"], where, base + pos, problems)
                previous_last = unit["base_offset"] + unit["last_offset_delta"]
            yield unit, problems
        else:
            unit = legacy.decode_message(buf, view, pos, index, path, base, problems,
                                         max_output, checks)
            if checks:
                first = unit["records"][0]["offset"] if unit["records"] else unit["offset"]
                check_offset_order(previous_last, first, where, base + pos, problems)
                previous_last = unit["offset"]
            yield unit, problems
        pos += FRAME_SIZE + length
        index += 1
