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


class FileSink:
    """Lines to a file: forked workers share its descriptor (and so its offset)."""

    def __init__(self, path):
        self.file = open(path, "ab")

    def write_line(self, line: bytes) -> None:
        self.file.write(line)

    def flush(self) -> None:
        self.file.flush()


def sunk(path, jobs, out_file) -> tuple[bytes, list]:
    sink = FileSink(out_file)
    results = list(finished(DecodeRun(path), ExchangeFilter(), JSON, jobs, sink=sink))
    sink.file.close()
    return out_file.read_bytes(), results


@pytest.mark.parametrize("name", ["librdkafka-produce-consume.pcapng", "java-transactions.pcap",
                                  "kafka39-legacy-mtu1500.pcapng"])
def test_workers_write_their_lines_in_order(name, tmp_path, monkeypatch):
    monkeypatch.setattr("kinspect.parallel.CHUNK_RECORDS", 2)  # many chunks, many turns
    one, one_results = sunk(PCAPS / name, 1, tmp_path / "one.jsonl")
    many, many_results = sunk(PCAPS / name, 3, tmp_path / "many.jsonl")
    assert one and many == one
    assert one == b"".join(o for o, _ in outputs(PCAPS / name, 1) if o is not None)
    assert all(output is None for output, _ in one_results + many_results)
    assert [e for _, e in many_results] == [e for _, e in one_results]


def test_a_failing_write_reaches_the_main_process(tmp_path, monkeypatch):
    monkeypatch.setattr("kinspect.parallel.CHUNK_RECORDS", 2)

    class Broken(FileSink):
        def write_line(self, line: bytes) -> None:
            raise BrokenPipeError("reader went away")

    with pytest.raises(BrokenPipeError):
        list(finished(DecodeRun(PCAPS / "librdkafka-produce-consume.pcapng"), ExchangeFilter(), JSON, 2,
                      sink=Broken(tmp_path / "x")))
