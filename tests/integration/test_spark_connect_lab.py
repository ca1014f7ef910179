"""kinspect spark --remote sc://... (issue 14): a Spark Connect server started from the
pip-installed pyspark (local[2], PYTHONPATH unset), the packed environment uploaded with
addArtifacts. The rows equal `kinspect decode --json`'s, decoded by the environment's Python
with kinspect's C accelerators loaded, and the summary is computed over Connect too.
"""

from __future__ import annotations

import sys

import pytest

from tests.integration.test_spark_cluster_lab import CAPTURES, _check, run
from tests.lab.spark import REPO, ConnectServer, packed_environment

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ConnectServer(tmp_path_factory.mktemp("connect")).start() as running:
        yield running


def test_remote_runs_on_a_connect_server_with_the_packed_environment(server, tmp_path):
    packed = packed_environment()
    out = tmp_path / "tables"
    argv = [sys.executable, "-m", "kinspect", "spark", *map(str, CAPTURES), "--out", str(out),
            "--remote", server.url, "--package", str(packed), "--summary", "--task-mb", "1"]
    result = run(argv, tmp_path, cwd=REPO)
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
    done = subprocess.run([sys.executable, "-c", client, server.url, *captures], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = subprocess.run([sys.executable, "-m", "kinspect", "decode", "--json", *captures], capture_output=True,
                         text=True, check=True).stdout

    def key(r):
        return json.dumps([r["capture"], r["conn"], r["correlation_id"], r["api_name"], r["request_time"],
                           r["response_time"], r["request_size"], r["response_size"], r["error_codes"]])
    expected = sorted(key(line) for line in map(json.loads, out.splitlines()) if line["type"] == "exchange")
    assert sorted(key(json.loads(line)) for line in done.stdout.splitlines()) == expected and expected
