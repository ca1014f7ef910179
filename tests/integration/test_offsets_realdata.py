"""kinspect's replay of the samples' __consumer_offsets (Kafka 4.1.2, its expiry run, Kafka
3.9.2's magic-1 coordinator) against kafka-dump-log --offsets-decoder run live on the same
segments and on copies cut short, record by record."""

from __future__ import annotations

import pytest

from kinspect.groups.sources import read_segments
from tests.lab.kafka import KafkaTools, LabError
from tests.unit.groups.oracles import check_history_against_dump, dump_log_records
from tests.unit.groups.sample_oracles import EXPIRY, KAFKA4, LEGACY, commits, offsets_dirs


def stored(log):
    """The kafka-dump-log output kept beside the segment in samples/."""
    return log.with_name(log.name + ".dump.txt").read_text()


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    """(segment, the sample segment it was cut from or None, kafka-dump-log's section for it),
    from one run of the tool."""
    try:
        tools = KafkaTools()
    except LabError as e:
        pytest.fail(f"the lab's Kafka jars are not available: {e}")
    logs = [log for sample in (KAFKA4, EXPIRY, LEGACY) for directory in offsets_dirs(sample)
            for log in sorted(directory.glob("*.log")) if log.stat().st_size]
    assert len(logs) == 13
    cut = []
    for n, log in enumerate(logs):  # cut through the header of the middle batch
        positions = sorted({r["position"] for r in dump_log_records(stored(log))})
        copy = tmp_path_factory.mktemp(f"cut{n}") / log.parent.name / log.name
        copy.parent.mkdir()
        copy.write_bytes(log.read_bytes()[:positions[len(positions) // 2] + 30])
        cut.append(copy)
    output = tools.dump_log(*logs, *cut, decoder="offsets")
    sections = output.split("Dumping ")[1:]
    assert len(sections) == len(logs) + len(cut)
    return list(zip(logs + cut, [None] * len(logs) + logs, sections))


def test_every_commit_record_agrees_with_kafka_dump_log_run_live(dumped):
    compared = 0
    for log, cut_from, section in dumped:
        if cut_from is not None:
            continue
        assert section.startswith(str(log))
        view = read_segments([log], history=True)
        compared += check_history_against_dump(dump_log_records(section), view.history)
        assert view.problems == []
        # the samples' stored oracle is this tool's output too
        assert dump_log_records(section) == dump_log_records(stored(log))
    every = [r for sample in (KAFKA4, EXPIRY, LEGACY) for d in offsets_dirs(sample)
             for log in d.glob("*.log") for r in commits(dump_log_records(stored(log)))]
    assert compared == len(every) and compared > 100


def test_segments_cut_short_agree_on_every_record_kafka_dump_log_still_reads(dumped):
    """kafka-dump-log reads up to the cut and says "Found N invalid bytes at the end"; kinspect
    replays the same commits and reports the damage where it starts."""
    for log, cut_from, section in dumped:
        if cut_from is None:
            continue
        assert section.startswith(str(log))
        [found] = [line for line in section.splitlines() if line.startswith("Found ")]
        invalid = int(found.split()[1])
        assert "invalid bytes at the end of" in found
        view = read_segments([log], history=True)
        records = dump_log_records(section)
        compared = check_history_against_dump(records, view.history)
        assert len(view.history) == compared == len(commits(records)), log
        assert len(records) < len(dump_log_records(stored(cut_from))), log  # some were cut off
        size = log.stat().st_size
        assert [p.offset for p in view.problems if p.severity == "error"] == [size - invalid], log
