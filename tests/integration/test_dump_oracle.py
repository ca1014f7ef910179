"""kinspect dump agrees with kafka-dump-log (kafka.tools.DumpLogSegments from the lab's Kafka
jars): run live on the samples/ log dirs (Kafka 4.1.2 and 3.9.2 brokers) and on damaged copies
of their files, and as kept beside each sample file (<file>.dump.txt).

The comparison is line for line (--format kafka against kafka-dump-log's stdout, and its
stderr summaries) and field by field (JSON events against the fields parsed back from
kafka-dump-log's lines: batches, offsets, positions, counts, CRC validity, records).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kinspect.storage import files
from kinspect.storage.dump import DumpOptions, dump_file
from kinspect.render.kafka_format import KafkaFormat
from tests.conftest import SAMPLES
from tests.lab.kafka import KafkaTools, LabError

DUMPED = (".log", ".index", ".timeindex", ".snapshot", ".txnindex", ".checkpoint")
DECODERS = {"__consumer_offsets": "offsets", "__transaction_state": "transaction-log",
            "__cluster_metadata": "cluster-metadata", "__share_group_state": "share-group-state"}
NOISE = re.compile(r"^(SLF4J|WARNING: |log4j|\s*at |Picked up )")


@pytest.fixture(scope="session")
def kafka_dump_log():
    try:
        tools = KafkaTools()
    except LabError as e:
        pytest.fail(f"the lab's Kafka jars are not available: {e}")

    def run(paths: list[Path], decoder: str | None, cwd: Path) -> tuple[str, list[str]]:
        names = [str(p.relative_to(cwd)) for p in paths]
        args = ["--files", ",".join(names), "--deep-iteration", "--print-data-log"]
        if decoder:
            args.append(f"--{decoder}-decoder")
        done = tools.run("kafka.tools.DumpLogSegments", *args, cwd=cwd, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        errors = [line for line in done.stderr.splitlines() if line and not NOISE.match(line)]
        return done.stdout, errors
    return run


def kinspect_kafka(paths: list[Path], cwd: Path, internal: bool = True) -> tuple[str, list[str]]:
    formatter = KafkaFormat(deep=True, data=True, internal=internal)
    lines: list[str] = []
    here = os.getcwd()
    os.chdir(cwd)
    try:
        for path in paths:
            for event in _events(path.relative_to(cwd)):
                lines += formatter.lines(event)
    finally:
        os.chdir(here)
    return "".join(line + "\n" for line in lines), formatter.errors()


def _events(path: Path, **options) -> list[dict]:
    def companion(suffix):
        other = files.companion(path, suffix)
        return other.read_bytes() if other.is_file() and other != path else None
    options = {"records": True, "data": True, **options}
    return list(dump_file(str(path), path.read_bytes(), files.describe(path),
                          DumpOptions(**options), companion))


def _groups(root: Path) -> dict[str | None, list[Path]]:
    """Dumpable files under root by the kafka-dump-log decoder their topic needs."""
    groups: dict[str | None, list[Path]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in DUMPED):
        topic = files.describe(path).records_topic
        decoder = DECODERS.get(topic) if path.name != "bootstrap.checkpoint" else None
        groups.setdefault(decoder, []).append(path)
    return groups


def _compare(kafka_dump_log, paths: list[Path], decoder: str | None, cwd: Path) -> list[str]:
    """Same stdout, same stderr summaries; returns kafka-dump-log's stderr lines."""
    theirs, their_errors = kafka_dump_log(paths, decoder, cwd)
    ours, our_errors = kinspect_kafka(paths, cwd, internal=decoder is not None)
    assert ours.splitlines() == theirs.splitlines()
    assert sorted(our_errors) == sorted(their_errors)
    return their_errors


def test_samples_line_for_line(kafka_dump_log):
    roots = sorted(SAMPLES.glob("*/logs"))
    if not roots:
        pytest.fail("samples/ is missing: it is committed (tools/make_samples.py regenerates it)")
    for root in roots:
        for decoder, paths in _groups(root).items():
            _compare(kafka_dump_log, paths, decoder, root)


# -- damaged copies --------------------------------------------------------------------------

def _copy(tmp_path: Path, source: Path, data: bytes | None = None) -> Path:
    target = tmp_path / source.parent.name / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source.read_bytes() if data is None else data)
    return target


SEGMENT = "00000000000000000000.log"
# multi-batch segments with index entries: magic 2 (3 batches of 5, index.interval.bytes=256)
# and magic 1 (12 uncompressed messages, index.interval.bytes=128)
SEGMENTS = [SAMPLES / "kafka-4.1.2" / "logs" / "codec-none-0" / SEGMENT,
            SAMPLES / "kafka-3.9.2-legacy" / "logs" / "legacy-v1-none-0" / SEGMENT]
IDS = ["magic-2", "magic-1"]
# in kafka-dump-log's output: a batch (or magic 0/1 message) line, a record line, an index entry
_POSITION = re.compile(r"^(?:baseOffset|offset): .*position: (\d+) .* size: (\d+) magic")
_RECORD_LINE = re.compile(r"^\| offset: ", re.M)
_ENTRY_LINE = re.compile(r"^offset: \d+ position: \d+$", re.M)


def _stored(path: Path) -> str:
    """kafka-dump-log's output kept beside a sample file."""
    return path.with_name(path.name + ".dump.txt").read_text()


@pytest.mark.parametrize("segment", SEGMENTS, ids=IDS)
def test_truncated_tail(kafka_dump_log, tmp_path, segment):
    data = segment.read_bytes()
    logs = [_copy(tmp_path / f"cut-{cut}", segment, data[:cut])
            for cut in (len(data) - 1, len(data) - 40, 100)]
    _compare(kafka_dump_log, logs, None, tmp_path)  # one run of the tool for the three
    for log in logs:
        text, _ = kinspect_kafka([log], tmp_path)
        assert "invalid bytes at the end of" in text.splitlines()[-1]


@pytest.mark.parametrize("segment", SEGMENTS, ids=IDS)
def test_bit_flips_in_records(kafka_dump_log, tmp_path, segment):
    """One letter's case flipped inside a record value of three batches (messages): their CRCs
    fail, their records still parse."""
    data = bytearray(segment.read_bytes())
    batches = [(int(m[1]), int(m[2])) for m in map(_POSITION.match, _stored(segment).splitlines())
               if m]
    for position, size in batches[:3]:
        at = data.index(b"record ", position, position + size) + 1
        data[at] ^= 0x20
    log = _copy(tmp_path, segment, bytes(data))
    _compare(kafka_dump_log, [log], None, tmp_path)
    ours = [e for e in _events(log) if e["type"] == "batch"]
    assert [not b["crc_valid"] for b in ours] == [True] * 3 + [False] * (len(batches) - 3)
    assert sum(len(b["records"]) for b in ours) == len(_RECORD_LINE.findall(_stored(segment)))


@pytest.mark.parametrize("segment", SEGMENTS, ids=IDS)
def test_index_mismatches_and_preallocated_tails(kafka_dump_log, tmp_path, segment):
    log = _copy(tmp_path, segment)
    index_source = segment.with_suffix(".index")
    index = bytearray(index_source.read_bytes())
    at = 8 * (len(index) // 8 // 2)  # the middle entry points 2 offsets further
    index[at:at + 4] = (int.from_bytes(index[at:at + 4], "big") + 2).to_bytes(4, "big")
    index_file = _copy(tmp_path, index_source, bytes(index) + bytes(800))
    time_source = segment.with_suffix(".timeindex")
    timeindex = bytearray(time_source.read_bytes())
    timeindex[12 * (len(timeindex) // 12 // 2) + 7] ^= 0x01  # one timestamp off by one
    time_file = _copy(tmp_path, time_source, bytes(timeindex) + bytes(120))
    errors = _compare(kafka_dump_log, [log, index_file, time_file], None, tmp_path)
    assert any(line.startswith("Mismatches in :") for line in errors)
    assert any(line.startswith("Found timestamp mismatch in :") for line in errors)
    entries = [e for e in _events(index_file) if e["type"] == "index_entry"]
    # the zero-filled tail is not entries
    assert len(entries) == len(_ENTRY_LINE.findall(_stored(index_source))) > 1
    assert [p["check"] for e in entries for p in e["problems"]] == ["index_offset"]


# -- field by field ----------------------------------------------------------------------------

BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* position: (\d+) "
                   r"\w+: (-?\d+) size: (\d+) magic: (\d) compresscodec: (\w+) crc: (\d+) "
                   r"isvalid: (true|false)$")
LEGACY = re.compile(r"^offset: (\d+) position: (\d+) \w+: (-?\d+) size: (\d+) magic: (\d) "
                    r"compresscodec: (\w+) crc: (\d+) isvalid: (true|false)$")
RECORD = re.compile(r"^\| offset: (\d+) \w+: (-?\d+) keySize: (-?\d+) valueSize: (-?\d+)")


def _timestamp(timestamp: int | None, magic: int) -> str:
    """Magic 0 has no timestamp: None in kinspect's events, "NoTimestampType: -1" in Kafka's."""
    return "-1" if magic == 0 and timestamp is None else str(timestamp)


def _fields(batch: dict) -> tuple:
    crc_valid = "true" if batch["crc_valid"] else "false"
    if batch["magic"] < 2:
        return (str(batch["last_offset"]), str(batch["position"]),
                _timestamp(batch["max_timestamp"], batch["magic"]), str(batch["size"]),
                str(batch["magic"]), batch["compression"], str(batch["crc"]), crc_valid)
    return (str(batch["base_offset"]), str(batch["last_offset"]), str(batch["count"]),
            str(batch["position"]), str(batch["max_timestamp"]), str(batch["size"]),
            str(batch["magic"]), batch["compression"], str(batch["crc"]), crc_valid)


def test_fields_parsed_back_from_kafka_dump_log():
    """Every .log of the broker samples, against the kafka-dump-log output kept beside it."""
    logs = sorted(SAMPLES.glob("kafka-*/logs/*/*.log"))
    assert len(logs) > 40
    magics = set()
    for log in logs:
        lines = _stored(log).splitlines()
        theirs = [(BATCH.match(line) or LEGACY.match(line)).groups() for line in lines
                  if BATCH.match(line) or LEGACY.match(line)]
        their_records = [RECORD.match(line).groups() for line in lines if RECORD.match(line)]
        here = os.getcwd()
        os.chdir(log.parent)
        try:
            events = [e for e in _events(Path(log.name)) if e["type"] == "batch"]
        finally:
            os.chdir(here)
        assert [_fields(e) for e in events] == theirs, log
        our_records = [(str(r["offset"]), _timestamp(r["timestamp"], e["magic"]),
                        str(r["key_size"]), str(r["value_size"]))
                       for e in events for r in e["records"]]
        assert our_records == their_records, log
        magics |= {e["magic"] for e in events}
    assert magics == {0, 1, 2}
