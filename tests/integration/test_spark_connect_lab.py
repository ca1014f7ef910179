"""kinspect spark --remote sc://... (issue 14): a Spark Connect server started from the
pip-installed pyspark (local[2], PYTHONPATH unset), the packed environment uploaded with
addArtifacts. The rows equal `kinspect decode --json`'s, decoded by the environment's Python
with kinspect's C accelerators loaded, and the summary is computed over Connect too.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.integration.test_spark_cluster_lab import CAPTURES, _check, run, space  # noqa: F401 (a fixture)
from tests.lab.spark import REPO, ConnectServer, packed_environment

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The server started while the environment is packed (when the cluster lab has not)."""
    server = ConnectServer(tmp_path_factory.mktemp("connect"))
    pool = ThreadPoolExecutor(1)
    started = pool.submit(server.start)
    try:
        try:
            packed = packed_environment()
        finally:
            pool.shutdown()
        started.result()
        yield server, packed
    finally:
        server.stop()


@pytest.fixture
def server(lab):
    return lab[0]


def test_remote_runs_on_a_connect_server_with_the_packed_environment(lab, space, tmp_path):
    server, packed = lab
    out = tmp_path / "tables"
    argv = [sys.executable, "-m", "kinspect", "spark", *map(str, CAPTURES), "--out", str(out),
            "--remote", server.url, "--package", str(packed), "--summary", "--task-mb", "1"]
    result = run(argv, space, cwd=REPO)
    _check(out, result)
    assert "Exchanges by API" in result.stdout and (out / "summary" / "apis").is_dir()


def test_the_data_source_over_connect_gives_decode_jsons_exchanges(server, tmp_path):
    """spark.read.format("kinspect") in a Spark Connect client (a process of its own: pyspark
    allows no Connect session beside a classic one): registered from the client, planned and
    read on the server, in this interpreter (the session's spark.sql.execution.pyspark.python:
    the server runs on this host)."""
    import json
    import subprocess
    captures = [str(c) for c in CAPTURES]
    client = (
        "import json, sys\n"
        "from pyspark.sql import SparkSession\n"
        "from kinspect.spark import register\n"
        "spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()\n"
        "spark.conf.set('spark.sql.execution.pyspark.python', sys.executable)\n"
        "register(spark)\n"
        "for r in spark.read.format('kinspect').load(sys.argv[2:]).collect():\n"
        "    print(json.dumps(r.asDict(recursive=True)))\n"
        "spark.stop()\n")
    with ThreadPoolExecutor(1) as pool:  # decode --json's answer while the client runs
        decoded = pool.submit(subprocess.run, [sys.executable, "-m", "kinspect", "decode", "--json", *captures],
                              capture_output=True, text=True, check=True)
        done = subprocess.run([sys.executable, "-c", client, server.url, *captures], capture_output=True, text=True,
                              timeout=600, cwd=tmp_path)
        out = decoded.result().stdout
    assert done.returncode == 0, done.stderr[-3000:]

    def key(r):
        return json.dumps([r["capture"], r["conn"], r["correlation_id"], r["api_name"], r["request_time"],
                           r["response_time"], r["request_size"], r["response_size"], r["error_codes"]])
    expected = sorted(key(line) for line in map(json.loads, out.splitlines()) if line["type"] == "exchange")
    assert sorted(key(json.loads(line)) for line in done.stdout.splitlines()) == expected and expected
