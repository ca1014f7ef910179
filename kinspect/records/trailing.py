"""The end of a record set that holds no whole unit: a unit cut off (normal at the end of a
Fetch response, an error in a file), or zero padding; the problems the record-set walkers give."""

from __future__ import annotations

import struct

from kinspect.problems import ERROR, INFO, Problem

FRAME = struct.Struct(">qi")
FRAME_SIZE = 12


def cut_off(view: memoryview, pos: int, end: int, where: str, base: int, partial_ok: bool,
            problems: list[Problem]) -> bool:
    """Whether view[pos:end] is too short for the unit it starts (and if so, its problem is
    added): fewer bytes than a unit's offset and length, or a length past the end."""
    left = end - pos
    if left < FRAME_SIZE:
        trailing(view, pos, end, where, base, partial_ok, problems,
                 f"{left} bytes at byte {base + pos:#x} are too few for a batch header")
        return True
    length = FRAME.unpack_from(view, pos)[1]
    if length > left - FRAME_SIZE:
        trailing(view, pos, end, where, base, partial_ok, problems,
                 f"batch at byte {base + pos:#x} declares {length} bytes after its length "
                 f"field but only {left - FRAME_SIZE} remain")
        return True
    return False


def trailing(view: memoryview, pos: int, end: int, where: str, base: int, partial_ok: bool,
             problems: list[Problem], detail: str) -> None:
    if all_zero(view, pos, end):
        zero_padding(pos, end, where, base, problems)
        return
    if partial_ok:
        problems.append(Problem(f"partial trailing batch: {detail} (normal when a broker cuts a "
                                f"fetch at its size limit)", where, base + pos, INFO,
                                "partial_trailing", None, end - pos))
    else:
        problems.append(Problem(f"truncated batch: {detail}", where, base + pos, ERROR,
                                "partial_trailing", None, end - pos))


def all_zero(view: memoryview, pos: int, end: int) -> bool:
    """Zero padding (a preallocated segment), not the zero high bytes of a cut-off offset."""
    return end - pos >= FRAME_SIZE and not view[pos:end].tobytes().strip(b"\x00")


def zero_padding(pos: int, end: int, where: str, base: int, problems: list[Problem]) -> None:
    problems.append(Problem(f"{end - pos} zero bytes after the last batch (preallocated or "
                            f"padded space)", where, base + pos, INFO, "trailing_zeros"))
