"""One rule for directories across decode, validate, dump and offsets: a directory is walked,
files are recognised, what is skipped is counted (listed with -v), a run that found nothing to
read exits 3 saying so, and what cannot be read exits 3 with its cause, never an internal error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import PCAPS, SAMPLES

SEGMENT_DIR = SAMPLES / "kafka-4.1.2/logs/__consumer_offsets-24"
COMMANDS = {
    "decode": ["decode"], "validate": ["validate"], "validate --strict": ["validate", "--strict"],
    "dump": ["dump"], "offsets": ["offsets", "group-classic"],
}


def kinspect(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], capture_output=True,
                          text=True, timeout=120, **kwargs)


@pytest.fixture
def garbage(tmp_path):
    root = tmp_path / "__consumer_offsets-24"  # offsets reads a partition directory of that name
    root.mkdir()
    (root / "notes.txt").write_text("not Kafka\n" * 10)
    (root / "random.bin").write_bytes(bytes(range(256)) * 4)
    return root


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_an_empty_directory_is_no_success(tmp_path, command):
    (tmp_path / "__consumer_offsets-24").mkdir()
    proc = kinspect(*COMMANDS[command], tmp_path / "__consumer_offsets-24")
    assert proc.returncode == 3, proc.stderr
    assert "no files" in proc.stderr or "no segment" in proc.stderr


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_a_directory_of_garbage_is_no_success(garbage, command):
    proc = kinspect(*COMMANDS[command], garbage)
    assert proc.returncode == 3, proc.stderr
    assert "2 files skipped" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command, source, read", [
    ("decode", PCAPS / "librdkafka-produce-consume.pcapng", "capture.pcapng"),
    ("validate", PCAPS / "librdkafka-produce-consume.pcapng", "capture.pcapng"),
    ("dump", SEGMENT_DIR / "00000000000000000000.log", "00000000000000000000.log"),
    ("offsets", SEGMENT_DIR / "00000000000000000000.log", "00000000000000000000.log"),
])
def test_special_files_in_a_directory_are_skipped_and_listed_with_v(garbage, command, source, read):
    """A FIFO would block the run for good; a link loop is no file."""
    shutil.copy(source, garbage / read)
    os.mkfifo(garbage / "fifo")
    (garbage / "loop").symlink_to(garbage / "loop")
    proc = kinspect(*COMMANDS[command], garbage)
    assert proc.returncode in (0, 1), proc.stderr
    assert "a FIFO: 1" in proc.stderr and "a link loop: 1" in proc.stderr
    if command != "offsets":
        listed = kinspect(*COMMANDS[command], "-v", garbage).stderr
        assert f"skipped {garbage / 'fifo'}: a FIFO" in listed and f"skipped {garbage / 'notes.txt'}" in listed


def test_a_decode_directory_reads_its_captures(tmp_path):
    for name in ("librdkafka-produce-consume.pcapng", "librdkafka-mtu1500.pcap"):
        shutil.copy(PCAPS / name, tmp_path / name)
    (tmp_path / "README").write_text("captures")
    both = [json.loads(line) for line in kinspect("decode", "--json", tmp_path).stdout.splitlines()]
    names = ("librdkafka-mtu1500.pcap", "librdkafka-produce-consume.pcapng")
    one_by_one = [json.loads(line) for name in names
                  for line in kinspect("decode", "--json", tmp_path / name).stdout.splitlines()]
    assert [{k: v for k, v in r.items() if k != "capture"} for r in both] == one_by_one and both
    assert {r["capture"] for r in both} == {str(tmp_path / name) for name in names}


@pytest.mark.parametrize("command", ["dump", "validate", "decode"])
def test_permission_denied_is_exit_3(tmp_path, command):
    """As root (the suite runs as root) without CAP_DAC_OVERRIDE, by util-linux's setpriv: a file
    and a directory that cannot be read."""
    (tmp_path / "closed").mkdir()
    shutil.copy(SEGMENT_DIR / "00000000000000000000.log", tmp_path / "closed" / "00000000000000000000.log")
    shutil.copy(SEGMENT_DIR / "00000000000000000000.log", tmp_path / "00000000000000000000.log")
    (tmp_path / "00000000000000000000.log").chmod(0)
    (tmp_path / "closed").chmod(0)
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-m", "kinspect"]
    for target in (tmp_path / "00000000000000000000.log", tmp_path / "closed",
                   tmp_path / "closed" / "00000000000000000000.log"):
        proc = subprocess.run([*drop, command, target], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 3, (target, proc.stderr)
        assert "Permission denied" in proc.stderr and "internal error" not in proc.stderr
    (tmp_path / "closed").chmod(0o755)
