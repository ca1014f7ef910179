"""kinspect dump agrees with kafka-dump-log (kafka.tools.DumpLogSegments from the lab's Kafka
jars), run live: on the broker-written log dirs of tests/data/unlicensed, on damaged copies of
them, and on the samples/ written by the lab's own broker.

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
from tests.conftest import KAFKAFUN, SAMPLES, SOC_STREAMING, UNLICENSED
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


@pytest.mark.parametrize("name", ["kafkafun", "soc-streaming-detection"])
def test_realdata_log_dirs_line_for_line(kafka_dump_log, name):
    root = UNLICENSED / name
    groups = _groups(root)
    assert sum(len(paths) for paths in groups.values()) > 3
    for decoder, paths in groups.items():
        _compare(kafka_dump_log, paths, decoder, root)


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


SOC = SOC_STREAMING / "auth_events-0"
FIRST = KAFKAFUN / "first-1" / "00000000000000000000.log"


def test_truncated_tail(kafka_dump_log, tmp_path):
    data = FIRST.read_bytes()
    for cut in (len(data) - 1, len(data) - 40, 100):
        log = _copy(tmp_path, FIRST, data[:cut])
        _compare(kafka_dump_log, [log], None, tmp_path)
        text, _ = kinspect_kafka([log], tmp_path)
        assert "invalid bytes at the end of" in text.splitlines()[-1]


def test_bit_flips_in_records(kafka_dump_log, tmp_path):
    data = bytearray((SOC / "00000000000000000000.log").read_bytes())
    for at in (700, 5_000, 100_000):  # inside record values: CRC fails, records still parse
        data[at] ^= 0x20
    log = _copy(tmp_path, SOC / "00000000000000000000.log", bytes(data))
    _compare(kafka_dump_log, [log], None, tmp_path)
    batches = [e for e in _events(log) if e["type"] == "batch"]
    assert sum(not b["crc_valid"] for b in batches) == 3


def test_index_mismatches_and_preallocated_tails(kafka_dump_log, tmp_path):
    log = _copy(tmp_path, SOC / "00000000000000000000.log")
    index = bytearray((SOC / "00000000000000000000.index").read_bytes())
    index[8 * 5:8 * 5 + 4] = (int.from_bytes(index[40:44], "big") + 2).to_bytes(4, "big")
    index_file = _copy(tmp_path, SOC / "00000000000000000000.index", bytes(index) + bytes(800))
    timeindex = bytearray((SOC / "00000000000000000000.timeindex").read_bytes())
    timeindex[12 * 7 + 7] ^= 0x01  # one timestamp off by one
    time_file = _copy(tmp_path, SOC / "00000000000000000000.timeindex",
                      bytes(timeindex) + bytes(120))
    errors = _compare(kafka_dump_log, [log, index_file, time_file], None, tmp_path)
    assert any(line.startswith("Mismatches in :") for line in errors)
    assert any(line.startswith("Found timestamp mismatch in :") for line in errors)
    entries = [e for e in _events(index_file) if e["type"] == "index_entry"]
    assert len(entries) == 227  # the zero-filled tail is not entries
    assert [p["check"] for e in entries for p in e["problems"]] == ["index_offset"]


# -- field by field ----------------------------------------------------------------------------

BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* position: (\d+) "
                   r"\w+: (-?\d+) size: (\d+) magic: (\d) compresscodec: (\w+) crc: (\d+) "
                   r"isvalid: (true|false)$")
RECORD = re.compile(r"^\| offset: (\d+) \w+: (-?\d+) keySize: (-?\d+) valueSize: (-?\d+)")


def test_fields_parsed_back_from_kafka_dump_log(kafka_dump_log):
    root = SOC.parent
    text, _ = kafka_dump_log([SOC / "00000000000000000000.log"], None, root)
    theirs = [BATCH.match(line).groups() for line in text.splitlines() if BATCH.match(line)]
    their_records = [RECORD.match(line).groups() for line in text.splitlines()
                     if RECORD.match(line)]
    events = [e for e in _events(SOC / "00000000000000000000.log") if e["type"] == "batch"]
    ours = [(str(e["base_offset"]), str(e["last_offset"]), str(e["count"]), str(e["position"]),
             str(e["max_timestamp"]), str(e["size"]), str(e["magic"]), e["compression"],
             str(e["crc"]), "true" if e["crc_valid"] else "false") for e in events]
    assert ours == theirs and len(ours) == 2273
    our_records = [(str(r["offset"]), str(r["timestamp"]), str(r["key_size"]),
                    str(r["value_size"])) for e in events for r in e["records"]]
    assert our_records == their_records
