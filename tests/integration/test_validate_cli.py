"""`kinspect validate` as CI runs it: a subprocess, exit codes, JSON Lines, JUnit XML.

The exhaustive damage loops are in tests/unit/test_validate.py (in-process); these few runs
check what only the command line can: codes, streams, files written.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib

import pytest
from crc32c import crc32c

from tests.conftest import PCAPS, REPO, SAMPLES
from tests.samples_oracle import counts, oracle

FIXTURES = REPO / "tests" / "unit" / "records" / "fixtures"
# a broker's partition dir: a segment, its indexes (offset, time, aborted transactions), a producer
# snapshot, checkpoints, and kafka-dump-log's text for each
PARTITION = SAMPLES / "kafka-4.1.2" / "logs" / "transactions-0"
SEGMENT = PARTITION / "00000000000000000000.log"


def kinspect(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinspect", "validate", *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=cwd or REPO)


@pytest.fixture
def fixtures(tmp_path):
    """A fixture directory as a project keeps it: pristine, damaged, warning-only, not Kafka."""
    good = (FIXTURES / "2_gzip_create.bin").read_bytes()
    (tmp_path / "good.bin").write_bytes(good)
    bad = bytearray(good)
    bad[17] ^= 0xFF  # the CRC
    (tmp_path / "bad.bin").write_bytes(bytes(bad))
    warned = bytearray((FIXTURES / "2_none_create.bin").read_bytes())
    warned[21] |= 0x01  # a reserved attribute bit, CRC resealed: a warning only
    struct.pack_into(">I", warned, 17, crc32c(bytes(warned[21:])))
    (tmp_path / "warned.bin").write_bytes(bytes(warned))
    legacy = bytearray((FIXTURES / "1_none_create.bin").read_bytes())
    (tmp_path / "legacy.bin").write_bytes(bytes(legacy))
    (tmp_path / "notes.txt").write_text("not Kafka data\n")
    return tmp_path


def test_clean_inputs_exit_0(fixtures):
    done = kinspect(fixtures / "good.bin", fixtures / "legacy.bin", PARTITION,
                    PCAPS / "librdkafka-produce-consume.pcapng")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "4 file(s): 4 OK, 0 with problems, 0 unreadable"
    batches, records = counts(SEGMENT)
    assert f"OK         {SEGMENT}  segment: {batches} batches, {records} records" in lines
    # the directory's other files are counted, not read (-v names them)
    others = len([p for p in PARTITION.iterdir() if p != SEGMENT])
    assert done.stderr == (f"kinspect: {others} files skipped (not a capture, segment or record "
                           f"file: {others}); -v lists them\n")


def test_damage_exits_1_and_says_where(fixtures):
    done = kinspect(fixtures)
    assert done.returncode == 1
    out = done.stdout
    assert f"FAIL       {fixtures / 'bad.bin'}  records: 1 batches, 7 records; 1 error" in out
    assert "  error   crc at byte 0x11, batch[0], base offset 100: batch CRC-32C is " in out
    assert f"OK         {fixtures / 'warned.bin'}  records: 1 batches, 7 records; 1 warning" in out
    assert "reserved_attributes at byte 0x15" in out
    assert "notes.txt" not in out  # a directory walk skips what is not Kafka data


def test_strict_fails_on_warnings(fixtures):
    assert kinspect(fixtures / "warned.bin").returncode == 0
    done = kinspect("--strict", fixtures / "warned.bin")
    assert done.returncode == 1 and "FAIL" in done.stdout


@pytest.mark.parametrize("args", [(), ("--no-such-option", "x"), ("--junit", "/", "x")])
def test_usage_errors_exit_2(args):
    assert kinspect(*args).returncode == 2


def test_unreadable_inputs_exit_3(fixtures):
    done = kinspect(fixtures / "bad.bin", fixtures / "notes.txt", fixtures / "missing.bin")
    assert done.returncode == 3  # unreadable wins over problems
    assert f"kinspect: {fixtures / 'notes.txt'}: not a capture, log segment or record file" \
        in done.stderr
    assert f"kinspect: {fixtures / 'missing.bin'}: No such file or directory" in done.stderr
    assert kinspect("--skip-unknown", fixtures / "notes.txt", fixtures / "good.bin").returncode == 0


def test_json_lines_one_object_per_finding_and_per_file(fixtures):
    done = kinspect("--json", fixtures, PARTITION)
    records = [json.loads(line) for line in done.stdout.splitlines()]
    files = {r["file"]: r for r in records if r["type"] == "file"}
    findings = [r for r in records if r["type"] == "finding"]
    assert set(files) == {str(fixtures / n) for n in ("bad.bin", "good.bin", "legacy.bin",
                                                      "warned.bin")} | {str(SEGMENT)}
    assert files[str(fixtures / "bad.bin")]["status"] == "problems"
    assert files[str(fixtures / "warned.bin")]["status"] == "ok"
    segment = files[str(SEGMENT)]
    assert (segment["status"], segment["batches"], segment["records"]) == ("ok", *counts(SEGMENT))
    crc = next(f for f in findings if f["check"] == "crc")
    original = struct.unpack(">I", (FIXTURES / "2_gzip_create.bin").read_bytes()[17:21])[0]
    assert (crc["file"], crc["severity"], crc["position"], crc["batch"], crc["base_offset"],
            crc["expected"], crc["found"]) == (str(fixtures / "bad.bin"), "error", 17, 0, 100,
                                               original, original ^ 0xFF000000)
    assert done.returncode == 1


def test_verbose_shows_information(tmp_path):
    first = int(oracle(SEGMENT)[0]["size"])  # the segment's first batch, then zeros
    (tmp_path / SEGMENT.name).write_bytes(SEGMENT.read_bytes()[:first] + bytes(1000))
    assert "trailing_zeros" not in kinspect(tmp_path).stdout
    done = kinspect("-v", tmp_path)
    assert f"info    trailing_zeros at byte {first:#x}" in done.stdout and done.returncode == 0


def test_a_damaged_capture_names_the_exchange(tmp_path):
    raw = bytearray((PCAPS / "kafka-python-sll2.pcap").read_bytes())
    at = raw.index(b"\x02" + struct.pack(">I", _first_produce_crc()))
    raw[at + 30] ^= 0x10
    (tmp_path / "damaged.pcap").write_bytes(bytes(raw))
    done = kinspect("--json", tmp_path / "damaged.pcap")
    findings = [json.loads(line) for line in done.stdout.splitlines()]
    crc = next(f for f in findings if f["type"] == "finding" and f["check"] == "crc")
    assert crc["api"].startswith("Produce v") and crc["side"] == "request"
    assert crc["correlation_id"] is not None and crc["conn"] and crc["topic"]
    assert done.returncode == 1


def _first_produce_crc() -> int:
    from kinspect.decode.pipeline import DecodeRun
    for record in DecodeRun(str(PCAPS / "kafka-python-sll2.pcap")).records():
        if record.get("api_name") == "Produce" and record.get("request"):
            for topic in record["request"]["topic_data"]:
                for partition in topic["partition_data"]:
                    if partition["records"]:
                        return partition["records"][0]["crc"]
    raise AssertionError("no Produce request with records in the capture")


# ------------------------------------------------------------------ JUnit

def test_junit_report_for_ci(fixtures, tmp_path_factory):
    # (not inside the fixtures directory: kinspect refuses to write inside what it reads)
    report = tmp_path_factory.mktemp("out") / "validate.xml"
    done = kinspect("--junit", report, fixtures, fixtures / "missing.bin")
    assert done.returncode == 3
    root = ET.parse(report).getroot()
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {str(fixtures / n) for n in ("bad.bin", "good.bin", "legacy.bin",
                                                        "warned.bin", "missing.bin")}
    for suite in suites.values():  # counts agree with the testcases, as CI tools expect
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases) > 0
        assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert int(suite.get("errors")) == sum(c.find("error") is not None for c in cases)
        assert all(c.get("name") and c.get("classname") for c in cases)
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites.values())
    _follows_the_jenkins_schema(root)
    assert int(root.get("failures")) == 1 and int(root.get("errors")) == 1
    bad = suites[str(fixtures / "bad.bin")]
    [failure] = bad.iter("failure")
    assert failure.get("type") == "crc" and "crc at byte 0x11" in failure.get("message")
    names = [c.get("name") for c in bad.findall("testcase")]
    assert names[:2] == ["framing", "crc"] and "compression" in names
    warned = suites[str(fixtures / "warned.bin")]
    assert warned.find(".//failure") is None
    assert "reserved_attributes" in warned.find(".//system-out").text
    [error] = suites[str(fixtures / "missing.bin")].iter("error")
    assert error.get("type") == "unreadable"


def test_junit_strict_turns_warnings_into_failures(fixtures, tmp_path):
    report = tmp_path / "strict.xml"
    kinspect("--strict", "--junit", report, fixtures / "warned.bin")
    [failure] = ET.parse(report).getroot().iter("failure")
    assert failure.get("type") == "reserved_attributes"


def test_legacy_fixture_damage_through_the_command(fixtures):
    legacy = bytearray((fixtures / "legacy.bin").read_bytes())
    second = 12 + struct.unpack_from(">i", legacy, 8)[0]
    legacy[second + 40] ^= 0x01  # inside the second message's value
    (fixtures / "legacy.bin").write_bytes(bytes(legacy))
    done = kinspect("--json", fixtures / "legacy.bin")
    [crc] = [json.loads(line) for line in done.stdout.splitlines()
             if json.loads(line).get("check") == "crc"]
    assert crc["position"] == second + 12 and crc["batch"] == 1
    computed = zlib.crc32(bytes(legacy[second + 16:second + 12 +
                                       struct.unpack_from(">i", legacy, second + 8)[0]]))
    assert crc["expected"] == computed


# Jenkins' JUnit schema (junit-10.xsd): the attributes each element may carry, and the order of
# a testcase's children; a stricter reader than GitLab's or GitHub's report actions.
ATTRIBUTES = {
    "testsuites": {"name", "time", "tests", "failures", "disabled", "errors"},
    "testsuite": {"name", "tests", "failures", "errors", "time", "disabled", "skipped",
                  "timestamp", "hostname", "id", "package", "file", "log", "url", "version"},
    "properties": set(), "property": {"name", "value"},
    "testcase": {"name", "assertions", "time", "classname", "status"},
    "failure": {"type", "message"}, "error": {"type", "message"}, "skipped": {"message"},
    "system-out": set(), "system-err": set(),
}
CASE_ORDER = ["skipped", "error", "failure", "system-out", "system-err"]


def _follows_the_jenkins_schema(element) -> None:
    assert set(element.attrib) <= ATTRIBUTES[element.tag], element.tag
    if element.tag == "testsuite":
        assert element.get("name") is not None and element.get("tests") is not None
        tags = [child.tag for child in element]
        assert tags == sorted(tags, key=["properties", "testcase", "system-out",
                                         "system-err"].index)
    if element.tag == "testcase":
        assert element.get("name")
        tags = [child.tag for child in element]
        assert tags == sorted(tags, key=CASE_ORDER.index) and tags.count("skipped") <= 1
    for child in element:
        _follows_the_jenkins_schema(child)
