"""kinspect dump as kafka-dump-log users run it: inside a partition directory, with bare file names."""

from __future__ import annotations

import json
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


def test_every_json_line_of_a_file_carries_its_topic_and_partition():
    """As kcat -J's messages do: a batch line read alone says where its records came from."""
    proc = subprocess.run([sys.executable, "-m", "kinspect", "dump", "--json", "--records", "--data",
                           LOGS / "codec-zstd-0", LOGS / "__consumer_offsets-24"], capture_output=True, text=True)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    batches = [line for line in lines if line["type"] == "batch"]
    assert {(b["topic"], b["partition"]) for b in batches} == {("codec-zstd", 0), ("__consumer_offsets", 24)}
    assert all(list(line)[:4] == ["type", "file", "topic", "partition"] for line in lines if line["type"] != "file")


def test_kafka_dump_log_options_are_taken():
    """--files A,B --deep-iteration --print-data-log, as kafka-dump-log takes them."""
    segment = LOGS / "codec-none-0/00000000000000000000.log"
    index = LOGS / "codec-none-0/00000000000000000000.index"

    def run(*args):
        return subprocess.run([sys.executable, "-m", "kinspect", "dump", *map(str, args)],
                              capture_output=True, text=True).stdout
    theirs = run("--files", f"{segment},{index}", "--deep-iteration", "--print-data-log")
    assert theirs == run(segment, index, "--records", "--data") and "offset 0" in theirs
