"""kinspect dump --format kafka against kafka-dump-log's own output for every sample file.

samples/**/<file>.dump.txt is what kafka-dump-log (the lab's Kafka jars) printed for <file>
with --deep-iteration --print-data-log and the decoder of its topic; the lab oracle test
(tests/integration/test_dump_oracle.py) runs the tool live on realdata and damaged files.
"""

import os

import pytest

from kinspect.storage.dump import DumpOptions, dump_file
from kinspect.storage.files import companion, describe
from kinspect.render.kafka_format import KafkaFormat, batch_line
from tests.conftest import SAMPLES
from tests.samples_oracle import dump_lines, oracle

DUMPS = sorted(SAMPLES.glob("*/logs/**/*.dump.txt"))


def kafka_lines(path, internal=True, **options):
    def other(suffix):
        file = companion(path, suffix)
        return file.read_bytes() if file.is_file() and file != path else None
    formatter = KafkaFormat(deep=True, data=True, internal=internal)
    lines = []
    for event in dump_file(path.name, path.read_bytes(), describe(path),
                           DumpOptions(records=True, data=True, **options), other):
        lines += formatter.lines(event)
    return lines, formatter.errors()


def expected_lines(dump) -> list[str]:
    text = dump.read_bytes().decode("utf-8", "replace")
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


@pytest.mark.parametrize("dump", DUMPS, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_same_lines_as_kafka_dump_log(dump):
    path = dump.with_name(dump.name[:-len(".dump.txt")])
    # samples dump bootstrap.checkpoint without a decoder: it is not in a __cluster_metadata dir
    internal = path.name != "bootstrap.checkpoint"
    lines, errors = kafka_lines(path, internal)
    assert lines == expected_lines(dump)
    assert errors == []


def test_batch_line_of_a_legacy_message_without_timestamp():
    line = batch_line({"magic": 0, "last_offset": 7, "position": 0, "timestamp_type": None,
                       "max_timestamp": None, "size": 40, "compression": "none", "crc": 12,
                       "crc_valid": True})
    assert line == ("offset: 7 position: 0 NoTimestampType: -1 size: 40 magic: 0 "
                    "compresscodec: none crc: 12 isvalid: true")


def test_truncated_segment_reports_invalid_bytes_like_kafka(tmp_path):
    source = SAMPLES / "kafka-4.1.2" / "logs" / "codec-gzip-0" / "00000000000000000000.log"
    if not source.exists():
        pytest.fail("samples/ is missing: it is committed (tools/make_samples.py regenerates it)")
    cut = tmp_path / source.name
    cut.write_bytes(source.read_bytes()[:-5])
    lines, _ = kafka_lines(cut)
    assert lines[-1].startswith("Found ") and lines[-1].endswith(
        f" invalid bytes at the end of {cut.name}")


def test_index_mismatches_go_to_the_error_lines(tmp_path):
    """An offset index entry one past the last offset of the batch it points at (codec-none-0's
    index, index.interval.bytes=256, has an entry per batch after the first)."""
    partition = SAMPLES / "kafka-4.1.2" / "logs" / "codec-none-0"
    for name in ("00000000000000000000.log", "00000000000000000000.index"):
        (tmp_path / name).write_bytes((partition / name).read_bytes())
    index = tmp_path / "00000000000000000000.index"
    [(offset, position), *_] = [(int(line.split()[1]), int(line.split()[3]))
                                for line in dump_lines(partition / index.name) if line.startswith("offset: ")]
    [last_offset] = [int(b["lastOffset"]) for b in oracle(partition / "00000000000000000000.log")
                     if int(b["position"]) == position]
    data = bytearray(index.read_bytes())
    data[0:4] = (int.from_bytes(data[0:4], "big") + 1).to_bytes(4, "big")
    index.write_bytes(bytes(data))
    cwd = os.getcwd()
    lines, errors = kafka_lines(index)
    assert lines[1] == f"offset: {offset + 1} position: {position}"
    assert errors == [f"Mismatches in :{os.path.join(cwd, index.name)}",
                      f"  Index offset: {offset + 1}, log offset: {last_offset}"]


def test_sample_dumps_are_committed():
    assert len(DUMPS) > 100, "samples/ holds kafka-dump-log's output beside each sample file"
