"""The decompression ratio of one batch (--max-ratio, at least 1 MiB a batch), as batch.py asks
kinspect.limits for it (issue 30, blind spots: only a hostile integration case noticed a change
to it, through its hang timer).

Each batch holds one record whose value is mostly zeros, so that a batch let through by a broken
bound still decodes in milliseconds: these tests fail fast, never by a timer. The file's own
bounds (--max-batch-bytes 64 MiB, --max-file-ratio) are far above every size here, so the ratio
is the only bound that can act."""

import random

import pytest

from kinspect.limits import MiB, Budget, Limits
from kinspect.records import decode_records
from tests.hostile.kafka import ZSTD, compress, compressed_batch, record


def _zstd_batch(value_size: int, incompressible: int = 0) -> bytes:
    """One zstd batch (no content size in its frame, as Java's producer writes it) of one record
    whose value is ``incompressible`` random bytes, then zeros up to ``value_size``."""
    value = random.Random(4).randbytes(incompressible) + bytes(value_size - incompressible)
    return compressed_batch(ZSTD, compress(ZSTD, record(None, value)), 1)


def _decode(batch: bytes, limits: Limits = Limits()):
    batches, problems = decode_records(batch, checks=True, partial_ok=False,
                                       max_output=Budget(limits, input_bytes=len(batch)))
    return batches[0], problems


def test_a_small_batch_inflating_past_the_ratio_floor_is_cut():
    batch = _zstd_batch(4 * MiB)  # about 150 bytes: 1000 times that is far below the 1 MiB floor
    assert len(batch) < 1024
    decoded, problems = _decode(batch)
    assert decoded["records"] == [] and decoded["crc_valid"]
    assert [p.check for p in problems] == ["decompress"]
    assert "more than 1048576" in problems[0].what and "raise it with --max-ratio" in problems[0].what


def test_the_floor_lets_a_small_batch_inflate_to_1_mib():
    decoded, problems = _decode(_zstd_batch(MiB - 100))
    assert problems == [] and len(decoded["records"][0]["value"]) == MiB - 100


def test_past_the_floor_the_bound_is_the_ratio_times_the_compressed_size():
    """3,000 random bytes keep the batch about 3 KB: 1000:1 allows about 3 MB."""
    cut = _zstd_batch(6 * MiB, incompressible=3000)
    decoded, problems = _decode(cut)
    bound = 1000 * (len(cut) - 61)  # the compressed records: the batch after its 61-byte header
    assert 3_000_000 < bound < 3_300_000
    assert decoded["records"] == [] and [p.check for p in problems] == ["decompress"]
    assert f"more than {bound}" in problems[0].what and "--max-ratio" in problems[0].what
    whole, problems = _decode(_zstd_batch(2 * MiB + MiB // 2, incompressible=3000))
    assert problems == [] and len(whole["records"][0]["value"]) == 2 * MiB + MiB // 2


@pytest.mark.parametrize("ratio, cut", [(1000, True), (100_000, False)])
def test_the_bound_is_the_option_given(ratio, cut):
    decoded, problems = _decode(_zstd_batch(4 * MiB), Limits(max_ratio=ratio))
    assert (decoded["records"] == []) is cut and bool(problems) is cut
