"""kinspect dump as kafka-dump-log users run it: inside a partition directory, with bare file names."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import SAMPLES

LOGS = SAMPLES / "kafka-4.1.2/logs"
INTERNAL = sorted(d for d in LOGS.iterdir() if d.name.startswith("__") and (d / "00000000000000000000.log").exists())


@pytest.mark.parametrize("partition", INTERNAL, ids=lambda d: d.name)
def test_a_bare_name_in_the_partition_directory_matches_kafka_dump_log(partition):
    """The topic comes from the real path: __consumer_offsets records stay decoded, and the
    output stays kafka-dump-log's, line for line (its output, recorded beside the file)."""
    proc = subprocess.run([sys.executable, "-m", "kinspect", "dump", "--data", "--format", "kafka-exact",
                           "--show-secrets", "00000000000000000000.log"], cwd=partition,
                          capture_output=True, text=True)
    assert proc.stdout == (partition / "00000000000000000000.log.dump.txt").read_text()
