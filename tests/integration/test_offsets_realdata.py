"""kinspect's replay of a real broker's __consumer_offsets (tests/data/unlicensed/kafkafun, Kafka
2.6) against kafka-dump-log --offsets-decoder run live on the same segments, record by record."""

from __future__ import annotations

import pytest

from kinspect.groups.sources import read_segments
from tests.conftest import KAFKAFUN
from tests.lab.kafka import KafkaTools, LabError
from tests.unit.groups.oracles import check_history_against_dump, dump_log_records


@pytest.fixture(scope="module")
def dumped():
    try:
        tools = KafkaTools()
    except LabError as e:
        pytest.fail(f"the lab's Kafka jars are not available: {e}")
    logs = sorted(p for p in KAFKAFUN.glob("__consumer_offsets-*/*.log") if p.stat().st_size)
    assert logs
    output = tools.dump_log(*logs, decoder="offsets")
    return logs, output


def test_every_real_commit_record_agrees_with_kafka_dump_log(dumped):
    logs, output = dumped
    sections = output.split("Dumping ")[1:]
    assert len(sections) == len(logs)
    compared = 0
    for log, section in zip(logs, sections):
        assert section.startswith(str(log))
        view = read_segments([log], history=True)
        compared += check_history_against_dump(dump_log_records(section), view.history)
        assert view.problems == []
    assert compared == 1521  # every offset commit in the data (tests/data/thirdparty/SOURCES.md)
