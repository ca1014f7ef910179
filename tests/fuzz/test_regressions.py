"""What the fuzz harnesses found, each turned into a test of the fixed behaviour (or, where the
parser is being rewritten, an expected failure that says so). Inputs are the minimized fuzz
inputs or small hand-built structures that fail the same way."""

from __future__ import annotations

import json
import struct

import pytest

from kinspect.groups.describe import member_rows
from kinspect.groups.replay import OffsetsReplay
from kinspect.render.jsonl import dumpb
from tests.unit.groups.handmade import group_key, string


def _classic_group_with_assignment(assignment: bytes) -> bytes:
    """GroupMetadataValue v0 of a "consumer" group: one member, the given assignment bytes."""
    out = struct.pack(">h", 0) + string("consumer") + struct.pack(">i", 1) + string("range")
    out += string("m-1") + struct.pack(">i", 1)
    out += string("m-1") + string("client") + string("/10.0.0.1") + struct.pack(">i", 10000)
    out += struct.pack(">i", 0)  # subscription bytes
    return out + struct.pack(">i", len(assignment)) + assignment


def test_a_member_assigned_a_topic_whose_name_is_not_utf8_is_written_as_json():
    # fuzz_replay: describe.member_rows grouped the assignment by topic name, and a name that
    # is not UTF-8 stays bytes, which no JSON object can have as a key (TypeError in dumpb)
    assignment = (struct.pack(">hi", 0, 1) + struct.pack(">h", 2) + b"\xffx"
                  + struct.pack(">ii", 1, 7) + struct.pack(">i", -1))
    replay = OffsetsReplay()
    replay.record(0, group_key("g"), _classic_group_with_assignment(assignment))
    view = replay.finish()
    rows = member_rows(view, view.groups["g"])
    assert json.loads(dumpb(rows[0]))["assignment"] == {"\\xffx": [7]}


def _crc_bytes_of_a_walk(data: bytes, monkeypatch) -> int:
    """Bytes the segment walk runs a CRC over, both kinds, while walking ``data``."""
    import zlib

    from kinspect.storage import segment

    checked = [0]

    def counting(crc):
        def count(view, *rest):
            checked[0] += len(view)
            return crc(view, *rest)
        return count

    monkeypatch.setattr(segment, "crc32c", counting(segment.crc32c))
    monkeypatch.setattr(segment.zlib, "crc32", counting(zlib.crc32))
    for _ in segment.walk_segment(data, "x.log", checks=True):
        pass
    return checked[0]


def test_resynchronising_over_plausible_headers_is_linear(monkeypatch):
    size = 1 << 18
    header = struct.pack(">qiib", 0, size // 2, 0, 2) + b"\x11\x22\x33\x44" + struct.pack(
        ">hiqqqhii", 0, 0, 0, 0, -1, -1, -1, 0)
    data = header.ljust(64, b"\x01") * (size // 64)
    from kinspect.storage import segment

    # the resynchronising budget, plus the CRCs decoding runs over the units it frames
    bound = segment.CRC_BUDGET_PER_BYTE * size + segment.CRC_BUDGET_MIN + 2 * size
    assert _crc_bytes_of_a_walk(data, monkeypatch) <= bound
