"""No output over an input: a report or a redirected stdout that is an input, or inside an input
directory, is refused with exit 2 before anything is written; inputs are only ever read."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PCAPS, SAMPLES

SEGMENT = "00000000000000000000.log"
LOGS = SAMPLES / "kafka-4.1.2/logs"


def kinspect(*args, stdout=subprocess.PIPE, **kwargs):
    return subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, **kwargs)


@pytest.fixture
def inputs(tmp_path):
    """A partition directory, a __consumer_offsets partition and a capture, copied."""
    root = tmp_path / "inputs"
    root.mkdir()
    shutil.copytree(LOGS / "codec-zstd-0", root / "codec-zstd-0")
    shutil.copytree(LOGS / "__consumer_offsets-24", root / "__consumer_offsets-24")
    shutil.copy(PCAPS / "librdkafka-produce-consume.pcapng", root / "capture.pcapng")
    return root


def snapshot(root):
    """Every file's bytes, mtime and ctime (a write or a chmod changes the ctime)."""
    return {p: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ctime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("report, named", [
    ("codec-zstd-0/" + SEGMENT, "codec-zstd-0/" + SEGMENT),               # the input itself
    ("codec-zstd-0/" + SEGMENT, "codec-zstd-0"),                           # a file of an input directory
    ("codec-zstd-0/report.xml", "codec-zstd-0"),                           # a new file inside it
    ("codec-zstd-0/../codec-zstd-0/" + SEGMENT, "codec-zstd-0/" + SEGMENT),  # another path to it
    ("link.xml", "codec-zstd-0/" + SEGMENT),                               # a symbolic link to it
    ("hard.xml", "codec-zstd-0/" + SEGMENT),                               # a hard link to it
])
def test_a_junit_report_over_an_input_is_refused(inputs, report, named):
    (inputs / "link.xml").symlink_to(inputs / "codec-zstd-0" / SEGMENT)
    os.link(inputs / "codec-zstd-0" / SEGMENT, inputs / "hard.xml")
    before = snapshot(inputs)
    proc = kinspect("validate", "--junit", report, named, cwd=inputs)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "kinspect never writes over what it reads" in proc.stderr
    assert ("is the input" in proc.stderr) or ("is inside the input directory" in proc.stderr)
    assert snapshot(inputs) == before and not (inputs / "codec-zstd-0/report.xml").exists()


def test_a_junit_report_beside_the_inputs_is_written(inputs, tmp_path):
    proc = kinspect("validate", "--junit", tmp_path / "report.xml", inputs / "codec-zstd-0")
    assert proc.returncode == 0 and (tmp_path / "report.xml").read_bytes().startswith(b"<?xml")


@pytest.mark.parametrize("args, target", [
    (["decode"], "capture.pcapng"),
    (["decode", "--json"], "capture.pcapng"),
    (["dump"], "codec-zstd-0/" + SEGMENT),
    (["dump", "--format", "kafka"], "codec-zstd-0"),
    (["validate"], "codec-zstd-0/" + SEGMENT),
    (["offsets", "--capture"], "capture.pcapng"),
    (["offsets", "--log-dir"], "."),
])
def test_stdout_appended_to_an_input_is_refused(inputs, args, target):
    victim = inputs / (target if target.endswith((".log", ".pcapng")) else "codec-zstd-0/" + SEGMENT)
    before = snapshot(inputs)
    with open(victim, "ab") as stdout:  # >> in the shell: nothing lost yet
        proc = kinspect(*args, target, stdout=stdout, cwd=inputs)
    assert proc.returncode == 2
    assert "stdout is" in proc.stderr and "kinspect never writes over what it reads" in proc.stderr
    assert snapshot(inputs) == before


COMMANDS = [
    ["decode", "capture.pcapng"], ["decode", "-v", "capture.pcapng"],
    ["decode", "--json", "-j2", "-"], ["decode", "--summary", "capture.pcapng"],
    ["dump", "--records", "--data", "."], ["dump", "--json", "--records", "--data", "."],
    ["dump", "--format", "kafka", "--data", "."],
    ["validate", "-v", "."], ["validate", "--json", "."],
    ["offsets", "--log-dir", "."], ["offsets", "--all-groups", "--history", "--log-dir", "."],
    ["offsets", "group-classic", "__consumer_offsets-24"],
    ["offsets", "--all-groups", "--capture", "capture.pcapng"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_read_only_inputs_are_only_read(inputs, tmp_path, command):
    for path in inputs.rglob("*"):
        path.chmod(0o555 if path.is_dir() else 0o444)
    inputs.chmod(0o555)
    before = snapshot(inputs)
    trace = tmp_path / "trace"
    with open(inputs / "capture.pcapng" if "-" in command else os.devnull, "rb") as stdin:
        proc = subprocess.run(["strace", "-f", "-qq", "-y", "-o", str(trace), "-e",
                               "trace=open,openat,openat2,creat,truncate,ftruncate,rename,renameat,"
                               "renameat2,unlink,unlinkat", sys.executable, "-m", "kinspect", *command],
                              cwd=inputs, stdin=stdin, capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stderr
    assert snapshot(inputs) == before
    calls = trace.read_text().splitlines()
    assert any("O_RDONLY" in call and str(inputs) in call for call in calls)  # the inputs were read
    written = [target for target in map(_written_path, calls) if target is not None]
    assert [t for t in written if Path(inputs, t).resolve().is_relative_to(inputs)] == []


WRITING = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC")


def _written_path(line: str) -> str | None:
    """The path a traced call writes, creates, truncates, renames or unlinks (None: it only reads)."""
    call = line.split(" ", 1)[-1].lstrip()
    name = call.split("(", 1)[0]
    if name in ("open", "openat", "openat2") and not any(flag in call for flag in WRITING):
        return None
    if name in ("ftruncate",):
        return re.search(r"\(\d+<([^>]*)>", call).group(1)
    quoted = re.search(r'"([^"]*)"', call)
    return quoted.group(1) if quoted else None


def test_the_trace_reader_sees_writes_and_not_reads():
    assert _written_path('7 openat(AT_FDCWD</x>, "a.log", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666) '
                         '= 3</x/a.log>') == "a.log"
    assert _written_path('7 openat(AT_FDCWD</x>, "a.log", O_RDONLY|O_CLOEXEC) = 3</x/a.log>') is None
    assert _written_path("7 ftruncate(3</x/a.log>, 0) = 0") == "/x/a.log"
    assert _written_path('7 unlink("/x/a.log") = 0') == "/x/a.log"
