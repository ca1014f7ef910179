"""Input built to break the output: every command ends with a documented exit code and no
traceback, and what it prints stays printable (file names that are not UTF-8, damaged legacy
wrappers, a group id that is not UTF-8, pcapng times no calendar holds, control characters)."""

from __future__ import annotations

import json
import os
import struct
import zlib

import pytest
from click.testing import CliRunner

from kinspect.cli import cli
from tests.conftest import PCAPS, SAMPLES
from tests.unit.capture.helpers import block

DEMO = PCAPS / "librdkafka-produce-consume.pcapng"
LEGACY = SAMPLES / "kafka-3.9.2-legacy" / "logs"
SEGMENT = "00000000000000000000.log"


def run(*args) -> tuple[int, str, str]:
    """Exit code, stdout, stderr of kinspect ARGS, in-process: an exception fails the test."""
    result = CliRunner().invoke(cli, [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def printable(text: str) -> bool:
    """Nothing that moves the cursor or recolours: C0 (but the newline), DEL, C1."""
    return not any((ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f for c in text)


# -- file names that are not UTF-8 ---------------------------------------------------------------

@pytest.fixture
def odd_names(tmp_path):
    """A segment and a capture whose names hold bytes that are not UTF-8."""
    directory = tmp_path / "odd"
    directory.mkdir()
    segment = os.fsdecode(bytes(directory) + b"/caf\xe9.log")
    capture = os.fsdecode(bytes(directory) + b"/cap\xff.pcapng")
    with open(segment, "wb") as f:
        f.write((SAMPLES / "kafka-4.1.2/logs/codec-zstd-0" / SEGMENT).read_bytes())
    with open(capture, "wb") as f:
        f.write(DEMO.read_bytes())
    return directory, segment, capture


@pytest.mark.parametrize("args", [["validate", "--json"], ["validate"], ["dump", "--json"], ["dump"],
                                  ["dump", "--format", "kafka"], ["dump", "--json", "--records", "--data"]])
def test_names_that_are_not_utf8_are_shown_as_escapes(odd_names, args):
    directory, segment, capture = odd_names
    code, out, err = run(*args, directory)
    assert code in (0, 1) and printable(out + err)
    if "--json" in args:
        out = "\n".join(line["file"] for line in json_lines(out))
    assert "caf\\xe9.log" in out
    if args[0] == "validate":
        assert "cap\\xff.pcapng" in out
    code, out, _ = run(*args, segment)  # named, not found in a directory
    assert code == 0 and "caf\\xe9.log" in (out.replace("\\\\", "\\") if "--json" in args else out)


def test_junit_names_files_that_are_not_utf8(odd_names, tmp_path):
    directory, _, _ = odd_names
    code, _, _ = run("validate", "--junit", tmp_path / "report.xml", directory)
    assert code == 0 and 'name="' in (tmp_path / "report.xml").read_text()
    assert "caf\\xe9.log" in (tmp_path / "report.xml").read_text()


def test_decode_notice_names_a_capture_that_is_not_utf8(tmp_path):
    name = os.fsdecode(bytes(tmp_path) + b"/cut\xff.pcapng")
    with open(name, "wb") as f:
        f.write(DEMO.read_bytes()[:20000])
    code, out, err = run("decode", "--json", name)
    assert code == 1
    notices = [line for line in json_lines(out) if line["type"] == "notice"]
    assert notices and notices[0]["source"].endswith("cut\\xff.pcapng") and "cut\\xff" in err


# -- damaged legacy wrappers ---------------------------------------------------------------------

def legacy_messages(data: bytes):
    pos = 0
    while pos + 12 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0]
        yield pos, size
        pos += 12 + size


def damaged_legacy(name: str, at: int, value: int) -> bytes:
    """A legacy segment with one byte changed and the CRC of its message made right again, so
    the damage reaches the decoder (and the dump's own walk of the wrapper)."""
    data = bytearray((LEGACY / name / SEGMENT).read_bytes())
    data[at] = value
    for pos, size in legacy_messages(bytes(data)):
        if pos <= at < pos + 12 + size:
            struct.pack_into(">I", data, pos + 12, zlib.crc32(bytes(data[pos + 16:pos + 12 + size])))
    return bytes(data)


@pytest.mark.parametrize("args", [["--records", "--data"], ["--format", "kafka", "--data"],
                                  ["--json", "--records", "--data"], ["--records", "--data", "--decode", "hex"]])
def test_a_wrapper_whose_inner_message_size_is_negative(tmp_path, args):
    # found by mutating the 3.9.2 broker's magic-0 snappy segment: an inner size of -2^31 + n
    # sent the dump's walk of the wrapper's inner CRCs backwards, off the buffer (struct.error)
    path = tmp_path / SEGMENT
    path.write_bytes(damaged_legacy("legacy-v0-snappy-0", 620, 0x80))
    code, out, err = run("dump", *args, "--type", "log", path)
    assert code in (0, 1) and out
    code, out, _ = run("validate", "--json", path)
    assert code == 1


# -- a group id that is not UTF-8 ----------------------------------------------------------------

@pytest.fixture
def odd_group(tmp_path):
    """The lab capture with its group renamed (same length) to one holding an escape sequence and
    a byte that is not UTF-8, beside a capture of other groups: names of two kinds to sort."""
    data = DEMO.read_bytes().replace(b"lab-librdkafka-group", b"lab-\x1b[31m\xffafka-group")
    path = tmp_path / "groups.pcapng"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("args", [[], ["--json"], ["--history"], ["--all-groups"],
                                  ["--state", "--members"], ["--json", "--all-groups", "--state", "--members"]])
def test_a_group_id_that_is_not_utf8(odd_group, tmp_path, args):
    import subprocess
    merged = tmp_path / "merged.pcapng"
    subprocess.run(["mergecap", "-w", str(merged), str(odd_group), str(PCAPS / "java-console-consumer.pcap")],
                   check=True)
    code, out, err = run("offsets", *args, "--capture", merged)
    assert code == 0 and printable(out + err)
    if "--json" in args:
        groups = [line["group"] for line in json_lines(out) if "group" in line]
        assert {"b64": "bGFiLRtbMzFt/2Fma2EtZ3JvdXA="} in groups and "java-console" in groups
    else:
        assert "lab-\\x1b[31m\\xffafka-group" in out


# -- pcapng times no calendar holds ------------------------------------------------------------

def retimed(data: bytes, tsresol: int | None = None, tsoffset: int | None = None) -> bytes:
    """A little-endian pcapng with every interface's if_tsresol / if_tsoffset replaced."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        btype, blen = struct.unpack_from("<II", data, pos)
        chunk = data[pos:pos + blen]
        if btype == 1:
            options, opt = [], 16
            while opt + 4 <= blen - 4:
                code, length = struct.unpack_from("<HH", chunk, opt)
                if code == 0:
                    break
                replaced = (code == 9 and tsresol is not None) or (code == 14 and tsoffset is not None)
                if not replaced:
                    options.append(chunk[opt:opt + 4 + length + (-length % 4)])
                opt += 4 + length + (-length % 4)
            if tsresol is not None:
                options.append(struct.pack("<HHB3x", 9, 1, tsresol))
            if tsoffset is not None:
                options.append(struct.pack("<HHq", 14, 8, tsoffset))
            chunk = block(1, chunk[8:16] + b"".join(options) + b"\0\0\0\0")
        out.append(chunk)
        pos += blen
    return b"".join(out)


TIMES = {
    "year 10000": dict(tsoffset=253402300800),
    "year 1900": dict(tsoffset=-3_000_000_000),
    "largest offset": dict(tsoffset=2**63 - 1),
    "smallest offset": dict(tsoffset=-2**63),
    "seconds": dict(tsresol=0),              # nanosecond counts read as seconds: year 5.7e10
    "2^-0": dict(tsresol=0x80),
    "10^-127": dict(tsresol=127),
    "2^-127": dict(tsresol=0xFF),
}
TIMED_COMMANDS = [["decode"], ["decode", "-v"], ["decode", "--json"], ["decode", "--summary"],
                  ["validate"], ["validate", "--json"], ["offsets", "--capture"],
                  ["offsets", "--history", "--capture"], ["offsets", "--json", "--history", "--capture"],
                  ["offsets", "--all-groups", "--members", "--state", "--capture"]]


def test_retimed_changes_nothing_else():
    assert retimed(DEMO.read_bytes()) == DEMO.read_bytes()


@pytest.mark.parametrize("times", TIMES, ids=list(TIMES))
def test_pcapng_times_no_calendar_holds(tmp_path, times):
    path = tmp_path / "times.pcapng"
    path.write_bytes(retimed(DEMO.read_bytes(), **TIMES[times]))
    for command in TIMED_COMMANDS:
        code, out, err = run(*command, path)
        assert code == 0, (command, err)
        assert out and "Traceback" not in err


# -- control characters --------------------------------------------------------------------------

RAW = [b"\x1b[2J", b"\x1b]0;", b"\x07", b"\x7f", b"\xc2\x9b", b"\x08"]


@pytest.fixture(scope="module")
def controlled(tmp_path_factory):
    """The lab capture with its group, topic and a client id renamed (same lengths) to names full of
    control characters, and a segment whose key, value and header key hold them (CRCs made right),
    in a directory whose name (so the topic) holds an escape sequence too."""
    import crc32c
    root = tmp_path_factory.mktemp("controlled")
    capture = DEMO.read_bytes()
    for old, new in [(b"lab-librdkafka-group", b"grp-\x1b[31m-\x00\x7f---group"),
                     (b"lab-librdkafka", b"lab-\x1b]0;\x07kafka"),
                     (b"librdkafka-consumer", b"libr\x1b[2Jka\x07\x7f\r\n\xc2\x9bmer")]:
        assert len(old) == len(new)
        capture = capture.replace(old, new)
    (root / "capture.pcapng").write_bytes(capture)
    segment = (SAMPLES / "kafka-4.1.2/logs/record-shapes-0" / SEGMENT).read_bytes()
    for old, new in [(b"plain", b"\x1b[2J\x07"),
                     (b"key, value, two headers", b"v\x1b]0;t\x07\r\n\x7f\xc2\x9bxxxxxxxxxxx"),
                     (b"\x04h1", b"\x04\x1b\x08")]:
        assert len(old) == len(new) and segment.count(old) == 1
        segment = segment.replace(old, new)
    segment = bytearray(segment)
    pos = 0
    while pos + 61 <= len(segment):
        end = pos + 12 + struct.unpack_from(">i", segment, pos + 8)[0]
        struct.pack_into(">I", segment, pos + 17, crc32c.crc32c(bytes(segment[pos + 21:end])))
        pos = end
    directory = root / "t\x1b[31m-0"
    directory.mkdir()
    (directory / SEGMENT).write_bytes(bytes(segment))
    return root / "capture.pcapng", directory


CONTROLLED_COMMANDS = [
    (["decode", "--port", "42347"], "capture", "libr\\x1b[2Jka\\x07\\x7f\\r\\n\\x9bmer"),
    (["decode", "--port", "42347", "-v"], "capture", "'grp-\\x1b[31m-\\x00\\x7f---group'"),
    (["decode", "--port", "42347", "--summary", "--errors"], "capture", "Exchanges by API"),
    (["validate", "-v"], "capture", "capture.pcapng"),
    (["offsets", "--port", "42347", "--all-groups", "--members", "--state", "--capture"], "capture",
     "grp-\\x1b[31m-\\x00\\x7f---group  lab-\\x1b]0;\\x07kafka"),
    (["offsets", "--port", "42347", "--history", "--capture"], "capture", "lab-\\x1b]0;\\x07kafka"),
    (["dump", "--records", "--data"], "segment",
     "key=\\x1b[2J\\x07 value=v\\x1b]0;t\\x07\\r\\n\\x7f\\x9bxxxxxxxxxxx  headers \\x1b\\x08=a"),
    (["dump", "--records"], "segment", "headers [\\x1b\\x08,h2]"),
    (["dump", "--records", "--data", "--decode", "hex"], "segment", "t\\x1b[31m-0"),
    (["validate"], "segment", "t\\x1b[31m-0"),
]


@pytest.mark.parametrize("command, target, shown", CONTROLLED_COMMANDS,
                         ids=[" ".join(c[0]) for c in CONTROLLED_COMMANDS])
def test_control_characters_are_escaped_when_piped(controlled, command, target, shown):
    capture, directory = controlled
    code, out, err = run(*command, capture if target == "capture" else directory)
    assert code in (0, 1) and printable(out + err)
    assert shown in out


def on_a_terminal(*args) -> bytes:
    """What kinspect ARGS writes to a pseudo-terminal (stdout and stderr both)."""
    import pty
    import subprocess
    import sys
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "kinspect", *map(str, args)], stdin=subprocess.DEVNULL,
                            stdout=secondary, stderr=secondary, env={**os.environ, "COLUMNS": "250"})
    os.close(secondary)
    written = bytearray()
    while True:
        try:
            chunk = os.read(primary, 1 << 16)
        except OSError:  # EIO: the terminal's other end has closed
            break
        if not chunk:
            break
        written += chunk
    os.close(primary)
    assert proc.wait(60) in (0, 1)
    return bytes(written)


@pytest.mark.parametrize("command, target, shown", CONTROLLED_COMMANDS + [
    (["dump", "--format", "kafka", "--data"], "segment", "key: \\x1b[2J\\x07 payload: v\\x1b]0;t\\x07\\r\\n"),
], ids=[" ".join(c[0]) for c in CONTROLLED_COMMANDS] + ["dump --format kafka"])
def test_control_characters_are_escaped_on_a_terminal(controlled, command, target, shown):
    capture, directory = controlled
    written = on_a_terminal(*command, capture if target == "capture" else directory)
    for raw in RAW:
        assert raw not in written
    assert shown.encode() in written.replace(b"\r\n", b"\n") or "--summary" in command


def test_kafka_format_is_escaped_piped_too_and_kafka_exact_is_kafka_dump_logs_bytes(controlled):
    # kafka-dump-log prints keys and values raw: --format kafka-exact gives those bytes, to diff
    # against it; --format kafka escapes them even piped (a pipe often ends at a terminal)
    import subprocess
    import sys
    _, directory = controlled

    def dump(style: str) -> bytes:
        proc = subprocess.run([sys.executable, "-m", "kinspect", "dump", "--format", style,
                               "--data", str(directory)], capture_output=True)
        assert proc.returncode == 0
        return proc.stdout

    exact = dump("kafka-exact")
    assert b"key: \x1b[2J\x07 payload: v\x1b]0;t\x07\r\n\x7f\xc2\x9b" in exact
    assert b"Dumping " + bytes(directory / SEGMENT) + b"\n" in exact
    escaped = dump("kafka")
    assert b"\x1b" not in escaped and b"key: \\x1b[2J\\x07 payload:" in escaped


def test_usage_errors_escape_what_they_quote():
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "kinspect", "offsets", "g\x1b[2Jx", "y\x1b]0;z"],
                          capture_output=True)
    assert proc.returncode == 2 and b"\x1b" not in proc.stderr and b"y\\x1b]0;z" in proc.stderr
