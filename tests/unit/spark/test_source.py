"""source.py on a real local[2] Spark: spark.read.format("kinspect") gives decode --json's exchanges,
and its records and files tables are kinspect spark's."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pyarrow.dataset as ds
import pytest

from kinspect.spark import register
from kinspect.spark.rows import EXCHANGES, FILE_TABLE, RECORDS
from tests.conftest import PCAPS, REALDATA, REPO

CAPTURES = sorted(p for p in PCAPS.iterdir() if p.suffix in (".pcap", ".pcapng")) + \
    [REALDATA / "arkime/kafka.pcap", REALDATA / "go-sniffer/kafka.pcap", REALDATA / "ndpi/kafka.pcapng"]
BIG = REPO / "tests/data/doctor-scenario/doctor-scenario.pcap"  # 1.9 MB: two shards at task_mb 1 on 2 cores
FIELDS = ("conn", "api_key", "api_name", "api_version", "correlation_id", "client_id", "request_time",
          "response_time", "latency_ms", "request_size", "response_size", "error_codes")


@pytest.fixture(scope="module")
def spark(spark_session):
    register(spark_session)
    return spark_session


def _decode_json(*captures) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "kinspect", "decode", "--json", *map(str, captures)],
                         capture_output=True, check=True).stdout.decode()
    lines = [json.loads(line) for line in out.splitlines()]
    return [line for line in lines if line["type"] == "exchange"]


def _key(capture, record: dict) -> str:
    problems = [(p["severity"], p["what"], p["path"], p["offset"]) for p in record["problems"]]
    return json.dumps([str(capture), *(record[f] for f in FIELDS), problems])


def _decoded(captures) -> list[str]:
    """decode --json's exchanges, keyed as the source's rows are: one process for them all (its
    lines name their capture when it reads more than one)."""
    return sorted(_key(line.get("capture", str(captures[0])), line) for line in _decode_json(*captures))


def test_exchanges_equal_decode_json(spark):
    rows = spark.read.format("kinspect").load([str(c) for c in CAPTURES]).collect()
    assert sorted(_key(r["capture"], r.asDict(recursive=True)) for r in rows) == _decoded(CAPTURES)
    assert spark.read.format("kinspect").load(str(CAPTURES[0])).schema.names == EXCHANGES.names


def test_a_split_file_gives_each_exchange_once(spark):
    df = spark.read.format("kinspect").option("task_mb", "1").option("cores", "2").load(str(BIG))
    assert df.rdd.getNumPartitions() == 2  # two shards, each dealt its share of the exchanges
    rows = df.collect()
    assert sorted(_key(r["capture"], r.asDict(recursive=True)) for r in rows) == _decoded([BIG])


def test_filters_apply_in_the_tasks(spark):
    rows = (spark.read.format("kinspect").option("api_name", "Produce,ListOffsets,Fetch").option("topic", "java-lab")
            .load([str(c) for c in CAPTURES]).collect())
    out = subprocess.run([sys.executable, "-m", "kinspect", "decode", "--json", "--api", "Produce", "--api",
                          "ListOffsets", "--api", "Fetch", "--topic", "java-lab", *map(str, CAPTURES)],
                         capture_output=True, check=True).stdout.decode()
    lines = [json.loads(line) for line in out.splitlines()]
    expected = sorted(_key(line["capture"], line) for line in lines if line["type"] == "exchange")
    assert sorted(_key(r["capture"], r.asDict(recursive=True)) for r in rows) == expected
    assert {r["api_name"] for r in rows} == {"Produce", "ListOffsets", "Fetch"}


def test_records_and_files_equal_kinspect_spark(spark, tmp_path):
    """The tables `kinspect spark --records` writes (job.write, as the command calls it, in this
    session: no JVM of its own) equal the source's."""
    from kinspect.cli.spark import schema_options
    from kinspect.spark import job
    from kinspect.spark.connect import parallelism
    from kinspect.spark.plan import list_inputs, plan
    out = tmp_path / "tables"
    options = {"ports": {9092}, "heuristic": True, "show_secrets": False,
               **schema_options(True, False, (), "_schemas")}  # the command's, without options given
    job.write(spark, plan(list_inputs([str(c) for c in CAPTURES]), cores=parallelism(spark)), str(out), options=options,
              records=True)
    written = ds.dataset(out / "records").to_table().to_pylist()
    read = [{**r.asDict(), "key": None if r["key"] is None else bytes(r["key"])} for r in spark.read.format(
        "kinspect").option("table", "records").load([str(c) for c in CAPTURES]).collect()]
    assert spark.read.format("kinspect").option("table", "records").load(str(BIG)).schema.names == RECORDS.names
    assert sorted(map(repr, read)) == sorted(map(repr, written)) and read
    files_written = ds.dataset(out / "files").to_table().to_pylist()
    files_read = [r.asDict() for r in spark.read.format("kinspect").option("table", "files").load(
        [str(c) for c in CAPTURES]).collect()]
    assert [f for f in FILE_TABLE.names] == list(files_read[0])

    def timeless(rows):
        return sorted(repr({k: v for k, v in r.items() if k != "seconds"}) for r in rows)
    assert timeless(files_read) == timeless(files_written)


def test_a_path_that_lists_nothing_says_so(spark, tmp_path):
    from pyspark.errors import AnalysisException
    with pytest.raises(AnalysisException, match=r"kinspect data source: .*empty.*: a directory holding no file"):
        (tmp_path / "empty").mkdir()
        spark.read.format("kinspect").load(str(tmp_path / "empty")).collect()
    with pytest.raises(AnalysisException, match="kinspect data source: option table='nope'"):
        spark.read.format("kinspect").option("table", "nope").load(str(CAPTURES[0])).collect()


def test_each_tables_schema_is_its_arrow_schema():
    from pyspark.sql.datasource import CaseInsensitiveDict
    from pyspark.sql.pandas.types import from_arrow_schema

    from kinspect.spark.rows import TABLES
    from kinspect.spark.source import source_class
    from kinspect.spark.source_options import PUBLIC_TABLES
    source = source_class(1)
    for name in PUBLIC_TABLES:
        for given in (name, f" {name.upper()} "):
            assert source(CaseInsensitiveDict({"table": given})).schema() == from_arrow_schema(TABLES[name]), given


class _Gated:
    """A capture's packets, held after the first ``gate`` until ``opened`` is set: a writer whose
    second half comes while the test says."""

    def __init__(self, capture, gate: int, opened: threading.Event):
        self.capture, self.gate, self.opened = capture, gate, opened

    def packets(self):
        for n, packet in enumerate(self.capture.packets()):
            if n == self.gate:
                self.opened.wait(300)
            if n > self.gate and not n % 400:
                time.sleep(0.1)
            yield packet

    def close(self):
        self.capture.close()


def test_a_stream_over_rotating_files_stopped_and_restarted_gives_each_exchange_once(spark, tmp_path):
    """A writer rotates BIG into 11 files; a streaming query reads the directory as they come, and
    is stopped once it has written rows (its batch may be cut short), while the writer waits half
    way. The query starts again from its checkpoint while the writer writes the rest. Its output
    is the batch read of the final directory (rotation), row for row: no file read twice or
    skipped, the exchanges that straddle two files paired once."""
    from kinspect.capture.source import open_capture
    from kinspect.capture.write import RotatingRecording
    ring, out, checkpoint = tmp_path / "ring", tmp_path / "out", tmp_path / "checkpoint"
    ring.mkdir()
    second_half = threading.Event()
    recording = RotatingRecording(_Gated(open_capture(str(BIG)), 5_000, second_half), str(ring / "ring.pcapng"),
                                  max_bytes=200_000)
    writer = threading.Thread(target=lambda: [None for _ in recording.packets()])

    def start(**settle):  # settle_seconds only once the writer is done: it pauses half way
        stream = spark.readStream.format("kinspect").options(ports="34175", **settle).load(str(ring))
        return (stream.writeStream.format("parquet").option("checkpointLocation", str(checkpoint))
                .trigger(processingTime="1 second").start(str(out)))

    writer.start()
    query = start()
    deadline = time.monotonic() + 180
    while not [p for p in query.recentProgress if p["numInputRows"]] and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()
    assert not second_half.is_set() and len(list(ring.iterdir())) < 11
    query = start(settle_seconds="3")
    second_half.set()
    writer.join(180)
    recording.close()
    time.sleep(4)  # past settle_seconds: the last file is complete
    query.processAllAvailable()
    query.stop()
    assert len(list(ring.iterdir())) == 11
    streamed = spark.read.parquet(str(out)).collect()
    batch = spark.read.format("kinspect").option("rotation", "true").option("ports", "34175").load(str(ring)).collect()

    def rows(found):
        return sorted(json.dumps([r[name] for name in EXCHANGES.names], default=str) for r in found)
    assert rows(streamed) == rows(batch) and len(batch) > 2700


def _reading(paths: set[str]) -> int | None:
    """A process under this one that has one of ``paths`` open: a Python worker decoding it in a task (the
    workers that plan a read list it, they do not open it), or None. Local workers fork from the
    daemon under the JVM, or from the warm daemon under this process (kinspect/spark/warm.py). One
    pass over /proc per look: a task of this file lasts tens of milliseconds."""
    parents: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                parents.setdefault(int(f.read().rsplit(b")", 1)[1].split()[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    pending = list(parents.get(os.getpid(), ()))
    while pending:
        pid = pending.pop()
        pending += parents.get(pid, ())
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in paths for fd in os.listdir(f"/proc/{pid}/fd")):
                return pid
        except OSError:
            continue
    return None


def test_a_worker_killed_mid_task_is_retried_and_the_rows_are_exact(spark, tmp_path):
    """SIGKILL to the Python worker decoding a task: Spark retries the task (local[2, 2]) and the
    read gives every exchange once. Sixteen copies of a split file make thirty-two tasks, so that a
    worker is seen at work on any machine (one file's two tasks could end between two looks)."""
    copies = []
    for number in range(16):
        copies.append(tmp_path / f"copy{number}.pcap")
        shutil.copyfile(BIG, copies[-1])
    opened = {str(c) for c in copies}
    killed, read = [], threading.Event()

    def kill_one():
        while not read.is_set():
            pid = _reading(opened)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.002)

    df = spark.read.format("kinspect").option("task_mb", "1").option("cores", "2").load(str(tmp_path))
    killer = threading.Thread(target=kill_one)
    killer.start()
    try:
        rows = df.collect()
    finally:
        read.set()
        killer.join()
    assert killed, "no worker was seen decoding"
    assert sorted(_key(r["capture"], r.asDict(recursive=True)) for r in rows) == _decoded(copies)


def test_findings_equal_kinspect_doctor_per_file(spark):
    captures = [BIG, PCAPS / "java-transactions.pcap", PCAPS / "kafka39-legacy.pcap"]
    rows = spark.read.format("kinspect").option("table", "findings").load([str(c) for c in captures]).collect()
    expected = []
    for capture in captures:
        out = subprocess.run([sys.executable, "-m", "kinspect", "doctor", "--json", str(capture)],
                             capture_output=True, text=True).stdout
        for line in map(json.loads, out.splitlines()):
            if line.get("type") == "finding":
                subject = {k: v for k, v in line.items() if k not in ("type", "check", "severity", "summary", "evidence")}
                expected.append(json.dumps([str(capture), line["check"], line["severity"], line["summary"], subject,
                                            [[e["conn"], e["correlation_id"], e["time"]] for e in line["evidence"]]],
                                           sort_keys=True))
    found = [json.dumps([r["capture"], r["check"], r["severity"], r["summary"], json.loads(r["details"]),
                         [[e["conn"], e["correlation_id"], e["time"]] for e in r["evidence"]]], sort_keys=True)
             for r in rows]
    assert sorted(found) == sorted(expected) and len(expected) >= 9
