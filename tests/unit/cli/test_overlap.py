"""No output over an input: a report, a kept capture or a redirected stdout that is an input (key
logs included), or a file an input directory holds that the command reads, is refused with exit 2
before anything is written; a new file inside an input directory is written; outputs are never
written through a symbolic link or into a FIFO; inputs are only ever read."""

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
    assert ("is the input" in proc.stderr) or ("is a file the input directory" in proc.stderr)
    assert snapshot(inputs) == before


@pytest.mark.parametrize("report", ["report.xml", "codec-zstd-0/report.xml"])
def test_a_new_junit_report_inside_the_input_directory_is_written(inputs, report):
    """validate . --junit ./report.xml, an ordinary CI layout: twice, the second over the first."""
    for _ in range(2):
        before = {p: v for p, v in snapshot(inputs).items() if p.name != "report.xml"}
        proc = kinspect("validate", "--junit", report, ".", cwd=inputs)
        assert proc.returncode == 0, proc.stderr
        assert (inputs / report).read_bytes().startswith(b"<?xml")
        assert {p: v for p, v in snapshot(inputs).items() if p.name != "report.xml"} == before


def test_a_junit_report_named_like_a_segment_of_the_directory_is_refused(inputs):
    """The file exists and validate would read it: writing it would overwrite an input."""
    shutil.copy(inputs / "codec-zstd-0" / SEGMENT, inputs / "codec-zstd-0" / "00000000000000000099.log")
    proc = kinspect("validate", "--junit", "codec-zstd-0/00000000000000000099.log", ".", cwd=inputs)
    assert proc.returncode == 2 and "is a file the input directory" in proc.stderr


def test_a_key_log_is_an_input_too(inputs):
    keys = inputs / "keys.log"
    keys.write_text("CLIENT_RANDOM " + "00" * 32 + " " + "11" * 48 + "\n")
    before = snapshot(inputs)
    with open(keys, "ab") as stdout:
        proc = kinspect("decode", "--keylog", keys, "capture.pcapng", stdout=stdout, cwd=inputs)
    assert proc.returncode == 2 and "stdout is the input" in proc.stderr
    proc = kinspect("validate", "--keylog", keys, "--junit", keys, "capture.pcapng", cwd=inputs)
    assert proc.returncode == 2 and "--junit" in proc.stderr and "is the input" in proc.stderr
    assert snapshot(inputs) == before


@pytest.mark.parametrize("link", ["keys.log", "other.log"])
def test_sniff_never_writes_its_capture_over_its_key_log(inputs, link):
    """sniff --write K --keylog K overwrote the key log with a pcapng; a hard link to it too."""
    keys = inputs / "keys.log"
    keys.write_text("CLIENT_RANDOM " + "00" * 32 + " " + "11" * 48 + "\n")
    if link != "keys.log":
        os.link(keys, inputs / link)
    before = snapshot(inputs)
    proc = kinspect("sniff", "lo", "--duration", "1", "--write", link, "--keylog", "keys.log",
                    cwd=inputs, timeout=60)
    assert proc.returncode == 2 and "--write" in proc.stderr and "is the input" in proc.stderr
    assert snapshot(inputs) == before


@pytest.mark.parametrize("command", [["validate", "--junit", "{out}", "capture.pcapng"],
                                     ["sniff", "lo", "--duration", "1", "--write", "{out}"]])
def test_an_output_is_never_written_through_a_symbolic_link(inputs, tmp_path, command):
    """Another user's link planted at a predictable path must not make kinspect write its target."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (inputs / "planted").symlink_to(victim)
    args = [a.replace("{out}", "planted") for a in command]
    proc = kinspect(*args, cwd=inputs, timeout=60)
    assert proc.returncode == 2 and "symbolic link" in proc.stderr, proc.stderr
    assert victim.read_bytes() == b"precious" and (inputs / "planted").is_symlink()


@pytest.mark.parametrize("command", [["validate", "--junit", "{out}", "capture.pcapng"],
                                     ["sniff", "lo", "--duration", "1", "--write", "{out}"]])
def test_an_output_that_is_a_fifo_is_refused_without_waiting(inputs, command):
    os.mkfifo(inputs / "fifo")
    args = [a.replace("{out}", "fifo") for a in command]
    proc = kinspect(*args, cwd=inputs, timeout=60)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr, proc.stderr


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
