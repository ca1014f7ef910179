"""Worker processes give exactly the output of one process, in the same order."""

from __future__ import annotations

import pytest

from kinspect.filters import ExchangeFilter
from kinspect.parallel import JSON, SUMMARY, finished
from kinspect.pipeline import DecodeRun
from tests.conftest import PCAPS, REALDATA

CAPTURES = sorted(PCAPS.glob("*.pcap*")) + [REALDATA / "ndpi/kafka.pcapng"]


def outputs(path, jobs, mode=JSON, keep=None, monkeypatch=None):
    run = DecodeRun(path)
    return list(finished(run, keep or ExchangeFilter(), mode, jobs))


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_parallel_json_is_byte_identical(path, monkeypatch):
    monkeypatch.setattr("kinspect.parallel.CHUNK_RECORDS", 3)  # many chunks, many hand-overs
    assert outputs(path, 2) == outputs(path, 1)


def test_parallel_summary_and_filters(monkeypatch):
    monkeypatch.setattr("kinspect.parallel.CHUNK_RECORDS", 2)
    path = PCAPS / "librdkafka-produce-consume.pcapng"
    keep = ExchangeFilter(topics=["lab-librdkafka"], errors_only=False)
    assert outputs(path, 2, SUMMARY, keep) == outputs(path, 1, SUMMARY, keep)
    assert [o for o, _ in outputs(path, 2, JSON, keep) if o is not None]


def test_topic_names_learned_before_a_chunk_reach_it(monkeypatch):
    # Fetch v16 names topics by id only; the Metadata response before it names them.
    monkeypatch.setattr("kinspect.parallel.CHUNK_RECORDS", 1)
    path = PCAPS / "librdkafka-produce-consume.pcapng"
    lines = [o for o, _ in outputs(path, 2) if o is not None and b'"api_name":"Fetch"' in o]
    assert lines and all(b'"topic":"lab-librdkafka"' in line for line in lines)
