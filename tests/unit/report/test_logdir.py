"""A log dir for the report, on samples/ written by real Kafka brokers."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kinspect.report.logdir import POINTS, LogDirUnreadable, Partition, read_log_dir
from tests.conftest import REPO

LOGS = REPO / "samples" / "kafka-4.1.2" / "logs"


def test_sizes_batches_codecs_and_points_are_storages():
    found = read_log_dir(LOGS)
    by_name = {p.name: p for p in found.partitions}
    assert by_name["codec-gzip-0"].log_bytes == (LOGS / "codec-gzip-0" / "00000000000000000000.log").stat().st_size
    dump = subprocess.run([sys.executable, "-m", "kinspect", "dump", "--json", str(LOGS / "codec-zstd-0")],
                          capture_output=True, text=True, timeout=120, cwd=REPO).stdout
    batches = [json.loads(line) for line in dump.splitlines() if '"batch"' in line]
    batches = [b for b in batches if b["type"] == "batch" and b["file"].endswith(".log")]
    part = by_name["codec-zstd-0"]
    assert part.batches == len(batches) and part.points == [(b["last_offset"], b["max_timestamp"]) for b in batches]
    assert found.codecs["zstd"] >= len(batches) and sum(sum(c.values()) for c in found.sizes.values()) == sum(
        found.codecs.values())
    assert [f["check"] for f in found.findings] == ["offset_delta_order"]  # compacted-0's gap, as validate says


def test_points_past_the_bound_are_sampled_evenly():
    part = Partition("t", 0)
    for k in range(POINTS * 8):
        part.point(k, k)
    assert len(part.points) <= POINTS and part.points[0] == (0, 0)
    steps = {b[0] - a[0] for a, b in zip(part.points, part.points[1:])}
    assert len(steps) == 1


def test_not_a_log_dir(tmp_path):
    with pytest.raises(LogDirUnreadable, match="not a directory"):
        read_log_dir(tmp_path / "missing")
    with pytest.raises(LogDirUnreadable, match="no partition directories"):
        read_log_dir(tmp_path)
