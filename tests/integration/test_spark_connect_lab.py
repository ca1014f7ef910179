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
