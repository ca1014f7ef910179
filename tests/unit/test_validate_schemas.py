"""validate's schema_value check: a key or value framed with a schema id whose schema is known
(the registry's _schemas topic beside the segments, the capture's own, or --schemas SOURCE) but
which does not read as it is a finding, with the record's offset, the batch's position, the schema
and the decoder's cause; an unknown id is one notice, not a finding per record.

Inputs are real: the lab's log dir (samples/schemas/logs, confluent-kafka's serializers through a
real broker) and its capture (tests/data/schemas), each with one value's payload damaged and the
batch's CRC made right again, so that only the schema check can see it.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

from crc32c import crc32c

from kinspect.records.checks import SCHEMA_CHECK
from kinspect.schemas.load import open_sources
from kinspect.validate import FileReport, Finding, check_family, validate_paths
from tests.unit.records.handmade import reseal
from tests.unit.schemas.fixtures import CAPTURE, LOGS

AVRO_SEGMENT = Path("lab-avro-0") / "00000000000000000000.log"
# the value of lab-avro's record 1: a V0 frame of schema id 3, then the Avro string "o-1"
RECORD_1 = b"\x00\x00\x00\x00\x03\x06o-1"


def _copy(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    shutil.copytree(LOGS, logs)
    return logs


def _damage_segment(logs: Path, replace: bytes) -> None:
    """lab-avro's one batch with record 1's payload (after its 5-byte frame) overwritten, the
    batch's CRC recomputed."""
    path = logs / AVRO_SEGMENT
    data = bytearray(path.read_bytes())
    at = data.find(RECORD_1)
    assert at > 0 and struct.unpack_from(">i", data, 8)[0] == len(data) - 12  # one batch
    data[at:at + len(replace)] = replace
    path.write_bytes(reseal(data))


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinspect", "validate", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def _findings(stdout: str) -> list[dict]:
    return [line for line in map(json.loads, stdout.splitlines()) if line.get("type") == "finding"]


def test_the_pristine_log_dir_and_capture_are_clean(tmp_path):
    logs = _copy(tmp_path)
    for path in (logs, CAPTURE):
        result = _run("--json", path)
        assert result.returncode == 0, result.stderr
        assert not _findings(result.stdout)
        assert "schema" not in result.stderr


def test_a_value_that_does_not_read_as_its_schema_is_a_finding(tmp_path):
    logs = _copy(tmp_path)
    _damage_segment(logs, RECORD_1[:5] + b"\xff" * 10)  # a varint that never ends
    result = _run("--json", logs)
    assert result.returncode == 1, result.stderr
    findings = _findings(result.stdout)
    assert [f["check"] for f in findings] == [SCHEMA_CHECK]
    found = findings[0]
    assert found["file"].endswith(str(AVRO_SEGMENT))
    assert found["position"] == 0 and found["batch"] == 0 and found["base_offset"] == 0
    assert found["path"] == "batch[0] → records[1]"
    assert found["expected"] == {"id": 3, "format": "avro", "subject": "lab-avro-value"}
    assert found["found"]["offset"] == 1 and found["found"]["error"]
    assert "offset 1" in found["what"] and "schema id 3" in found["what"]
    text = _run(logs)
    assert text.returncode == 1
    assert "schema_value at byte 0x0, batch[0] → records[1], base offset 0: the value of the record at offset 1" \
        in text.stdout
    assert check_family(SCHEMA_CHECK) == "schemas"


def test_the_segment_alone_finds_the_registry_beside_it_and_schemas_sources_too(tmp_path):
    logs = _copy(tmp_path)
    _damage_segment(logs, RECORD_1[:5] + b"\xff" * 10)
    assert _findings(_run("--json", logs / AVRO_SEGMENT).stdout)[0]["check"] == SCHEMA_CHECK
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(logs / AVRO_SEGMENT, alone / "00000000000000000000.log")
    segment = alone / "00000000000000000000.log"
    assert _run("--json", segment).returncode == 0  # no schema anywhere: nothing to check against
    result = _run("--json", "--schemas", LOGS, segment)
    assert [f["check"] for f in _findings(result.stdout)] == [SCHEMA_CHECK]


def test_an_unknown_schema_id_is_one_notice_not_a_finding(tmp_path):
    logs = _copy(tmp_path)
    path = logs / AVRO_SEGMENT
    data = bytearray(path.read_bytes())
    for at in range(len(data) - 5):  # every value of schema 3 now says schema 99
        if data[at:at + 5] == b"\x00\x00\x00\x00\x03" and data[at + 5] == 6:
            data[at + 4] = 99
    path.write_bytes(reseal(data))
    result = _run("--json", logs)
    assert result.returncode == 0, result.stderr
    assert not _findings(result.stdout)
    notices = [line for line in map(json.loads, result.stdout.splitlines()) if line.get("type") == "notice"]
    assert len(notices) == 1 and "schema id 99" in notices[0]["what"]
    assert result.stderr.count("schema id 99") == 1


def test_the_library_checks_only_with_schemas(tmp_path):
    logs = _copy(tmp_path)
    _damage_segment(logs, RECORD_1[:5] + b"\xff" * 10)
    schemas, problems = open_sources([], log_dirs=[logs])
    assert not problems
    events = list(validate_paths([logs / AVRO_SEGMENT], schemas=schemas))
    assert [e.check for e in events if isinstance(e, Finding)] == [SCHEMA_CHECK]
    assert isinstance(events[-1], FileReport) and events[-1].records == 6
    assert not [e for e in validate_paths([logs / AVRO_SEGMENT]) if isinstance(e, Finding)]


def _damage_capture(path: Path) -> int:
    """Every copy of lab-avro's record 1 in the capture (the Produce request, Fetch responses)
    damaged as in the segment, each batch's CRC recomputed; returns how many."""
    data = bytearray(path.read_bytes())
    damaged = 0
    at = data.find(RECORD_1)
    while at >= 0:
        start = _batch_around(data, at)
        data[at + 5:at + 15] = b"\xff" * 10
        end = start + 12 + struct.unpack_from(">i", data, start + 8)[0]
        struct.pack_into(">I", data, start + 17, crc32c(bytes(data[start + 21:end])))
        damaged += 1
        at = data.find(RECORD_1, at + 1)
    path.write_bytes(data)
    return damaged


def _batch_around(data: bytearray, at: int) -> int:
    """Where the v2 batch holding byte ``at`` starts: the nearest header before it whose CRC holds
    (the lab's batches each sit whole in one packet)."""
    for start in range(at - 61, max(at - 4096, 0), -1):
        length = struct.unpack_from(">i", data, start + 8)[0]
        end = start + 12 + length
        if data[start + 16] == 2 and at < end <= len(data) and \
                struct.unpack_from(">I", data, start + 17)[0] == crc32c(bytes(data[start + 21:end])):
            return start
    raise AssertionError("no batch around the record")


def test_a_capture_value_that_does_not_read_is_a_finding_with_its_exchange(tmp_path):
    capture = tmp_path / "damaged.pcap"
    shutil.copy(CAPTURE, capture)
    copies = _damage_capture(capture)
    assert copies == 2  # the Produce request and a Fetch response
    result = _run("--json", capture)
    assert result.returncode == 1, result.stderr
    findings = _findings(result.stdout)
    assert {f["check"] for f in findings} == {SCHEMA_CHECK}
    assert len(findings) == copies
    assert sorted(f["side"] for f in findings) == ["request", "response"]  # the Produce, the Fetch
    for found in findings:
        assert found["conn"] and found["correlation_id"] is not None
        assert found["found"]["offset"] == 1 and found["expected"]["id"] == 3
        assert found["path"] == "lab-avro-0 → batch[0] → records[1]" and found["base_offset"] == 0
        assert (found["topic"], found["partition"]) == ("lab-avro", 0)


def test_a_schema_source_that_cannot_be_read_is_exit_3_and_the_rest_is_checked(tmp_path):
    logs = _copy(tmp_path)
    _damage_segment(logs, RECORD_1[:5] + b"\xff" * 10)
    result = _run("--json", "--schemas", tmp_path / "missing", logs)
    assert result.returncode == 3
    assert f"--schemas {tmp_path / 'missing'}: no such file or directory" in result.stderr
    assert [f["check"] for f in _findings(result.stdout)] == [SCHEMA_CHECK]
