"""kinspect spark on a real standalone cluster (issue 14): a master and a worker started from the
pip-installed pyspark on 127.0.0.1, the packed environment (--package, venv-pack) shipped as
spark.archives, and everything started with PYTHONPATH unset, so that the executors can only
find kinspect in the packed environment. The rows equal `kinspect decode --json`'s, and the
executors report that kinspect's C accelerators loaded there.

What does not depend on each other starts at once: the cluster while the environment is packed,
decode --json's rows while the first run goes.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pyarrow.dataset as ds
import pytest

from tests.conftest import PCAPS, REALDATA
from tests.lab.spark import (REPO, SPARK_SUBMIT, StandaloneCluster, clean_env, packed_environment, scratch_dir,
                             unpacked)

pytestmark = pytest.mark.lab

CAPTURES = [PCAPS / "librdkafka-produce-consume.pcapng", PCAPS / "kafka39-legacy.pcap",
            PCAPS / "java-transactions.pcap", PCAPS / "aiokafka-mtu1500.pcapng", REALDATA / "ndpi/kafka.pcapng"]
# exchanges columns and the decode --json keys they equal
SAME = {"conn": "conn", "api_key": "api_key", "api_name": "api_name", "api_version": "api_version",
        "correlation_id": "correlation_id", "client_id": "client_id", "request_time": "request_time",
        "response_time": "response_time", "latency_ms": "latency_ms", "request_size": "request_size",
        "response_size": "response_size", "error_codes": "error_codes"}
SMALL = ["--conf", "spark.executor.memory=600m", "--task-mb", "1"]  # several tasks from small captures


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The cluster started while the environment is packed (each takes a CPU for most of its
    time), and decode --json's rows on their way."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("standalone"))
    pool = ThreadPoolExecutor(1)
    started = pool.submit(cluster.start)
    try:
        try:
            packed = packed_environment()
        finally:
            pool.shutdown()  # the cluster started, or failed to
        started.result()
        threading.Thread(target=_decode_json, daemon=True).start()
        yield cluster, packed
    finally:
        cluster.stop()


@pytest.fixture
def cluster(lab):
    return lab[0]


@pytest.fixture
def packed(lab):
    return lab[1]


@pytest.fixture
def space():
    """Spark's scratch space of one run, and where its client unpacks (scratch_dir)."""
    where = scratch_dir("spark-run")
    yield where
    shutil.rmtree(where, ignore_errors=True)


def run(argv: list[str], space, cwd) -> subprocess.CompletedProcess:
    """argv with PYTHONPATH unset; its Spark scratch space in space/scratch."""
    return subprocess.run(argv, cwd=cwd, env=clean_env(space / "scratch"), capture_output=True, text=True,
                          timeout=300)


_DECODING = threading.Lock()


def _decode_json() -> Counter:
    with _DECODING:  # once, whoever asks first (the lab fixture's thread, or a test)
        return _decode_json_once()


@functools.cache
def _decode_json_once() -> Counter:
    keys = Counter()
    with ThreadPoolExecutor(len(CAPTURES)) as pool:
        outs = list(pool.map(lambda capture: subprocess.run(
            [sys.executable, "-m", "kinspect", "decode", "--json", str(capture)], cwd=REPO, capture_output=True,
            check=False).stdout.decode(), CAPTURES))
    for capture, out in zip(CAPTURES, outs):
        for line in out.splitlines():
            record = json.loads(line)
            if record["type"] == "exchange":
                keys[json.dumps([str(capture)] + [record[key] for key in SAME.values()])] += 1
    return keys


def _rows(out) -> Counter:
    table = ds.dataset(out / "exchanges", format="parquet", partitioning="hive").to_table()
    return Counter(json.dumps([row["capture"]] + [row[column] for column in SAME])
                   for row in table.to_pylist())


def _files(out) -> list[dict]:
    return ds.dataset(out / "files", format="parquet").to_table().to_pylist()


def _check(out, result) -> None:
    assert result.returncode == 0, result.stderr[-3000:]
    assert _rows(out) == _decode_json()
    files = _files(out)
    assert sorted(f["path"] for f in files) == sorted(map(str, CAPTURES))
    assert all(f["error"] is None for f in files)
    # decoded by the packed environment's interpreter, where the C accelerators loaded
    assert all(f["python"].endswith("/environment/bin/python") for f in files), {f["python"] for f in files}
    assert all(f["native"] is True for f in files)
    said = result.stderr + result.stdout  # spark-submit gives its Python's stderr out on stdout
    assert "C accelerators loaded for every file" in said
    assert "environment/bin/python" in said


def test_spark_submit_runs_kinspect_on_the_cluster_from_the_packed_environment(cluster, packed, space, tmp_path):
    # the client machine: kinspect from the same packed environment (no pyspark in it: spark-submit
    # gives its driver pyspark.zip), run from a directory that holds no kinspect
    driver = unpacked(packed, space / "client")
    submit = next((space / "client" / "lib").glob("python3*/site-packages/kinspect/cli/spark_submit.py"))
    out = tmp_path / "tables"
    argv = [SPARK_SUBMIT, "--master", cluster.url, "--archives", f"{packed}#environment",
            "--conf", "spark.pyspark.python=./environment/bin/python",
            "--conf", f"spark.pyspark.driver.python={driver}", "--driver-memory", "600m",
            str(submit), *map(str, CAPTURES), "--out", str(out), *SMALL]
    result = run(argv, space, cwd=tmp_path)
    _check(out, result)


def test_kinspect_spark_master_and_package_in_client_mode(cluster, packed, space, tmp_path):
    out = tmp_path / "tables"
    argv = [sys.executable, "-m", "kinspect", "spark", *map(str, CAPTURES), "--out", str(out),
            "--master", cluster.url, "--package", str(packed), *SMALL]
    result = run(argv, space, cwd=REPO)
    _check(out, result)
