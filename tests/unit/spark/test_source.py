"""source.py on a real local[2] Spark: spark.read.format("kinspect") gives decode --json's exchanges,
and its records and files tables are kinspect spark's."""

import json
import subprocess
import sys

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
    return sorted(_key(c, line) for c in captures for line in _decode_json(c))


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
    out = tmp_path / "tables"
    subprocess.run([sys.executable, "-m", "kinspect", "spark", *map(str, CAPTURES), "--out", str(out),
                    "--records", "--master", "local[2]"], check=True, capture_output=True)
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
