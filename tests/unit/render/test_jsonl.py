import json

import pytest

from kinspect.records.stream import BatchStream
from kinspect.render import jsonl


def _batches(count: int) -> BatchStream:
    """A record set streamed (too big to hold): its batches are made again when read."""
    return BatchStream(lambda: iter([{"base_offset": n, "records": [{"offset": n}]} for n in range(count)]),
                       count)


@pytest.mark.parametrize("later", [{"error_codes": {3: "UNKNOWN_TOPIC_OR_PARTITION"}},  # int keys
                                   {"big": 1 << 70},  # beyond 64 bits: the standard library
                                   {"plain": 1}])
def test_a_streamed_record_set_is_written_once_whichever_encoder_takes_the_line(later):
    """orjson may meet a stream, then fail on what follows it and try again: the streams the
    failed try met are not kept (they were written again after the line's end)."""
    record = {"batches": _batches(3), **later, "tail": [_batches(2)]}
    line = jsonl.dumpb(record, newline=True)
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    got = json.loads(line)
    assert [b["base_offset"] for b in got["batches"]] == [0, 1, 2]
    assert [b["base_offset"] for b in got["tail"][0]] == [0, 1]
    assert {k: v for k, v in got.items() if k not in ("batches", "tail")} == json.loads(json.dumps(later))
