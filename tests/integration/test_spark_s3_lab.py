"""kinspect spark over s3a:// (issue 14): captures in a bucket of moto's S3 server (run here on
127.0.0.1), listed by Spark's binaryFile source through hadoop-aws (fetched by
spark.jars.packages from Maven Central on first use), streamed by the tasks through
pyarrow.fs.S3FileSystem. The rows equal `kinspect decode --json`'s of the same files read from
disk; a garbage object gets its files row's error.
"""

from __future__ import annotations

import os
import sys

import boto3
import pyarrow.dataset as ds
import pytest
from moto.server import ThreadedMotoServer

from tests.integration import test_spark_cluster_lab as cluster_lab
from tests.integration.test_spark_cluster_lab import _decode_json, _rows
from tests.lab.spark import REPO
from tests.lab.tansu import free_port

pytestmark = pytest.mark.lab

HADOOP_AWS = "org.apache.hadoop:hadoop-aws:3.4.1"  # pyspark 4.0's Hadoop is 3.4.1
KEYS = {"aws_access_key_id": "kinspect-test", "aws_secret_access_key": "kinspect-test-secret"}


@pytest.fixture(scope="module")
def s3():
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_s3a_captures_are_listed_by_spark_and_streamed_by_the_tasks(s3, tmp_path):
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1", **KEYS)
    client.create_bucket(Bucket="captures")
    for capture in cluster_lab.CAPTURES:
        client.upload_file(str(capture), "captures", f"hourly/{capture.name}")
    client.put_object(Bucket="captures", Key="hourly/garbage.pcap", Body=b"not a capture\n" * 100)
    out = tmp_path / "tables"
    argv = [sys.executable, "-m", "kinspect", "spark", "s3a://captures/hourly/", "--out", str(out),
            "--master", "local[2]", "--task-mb", "1",
            "--conf", f"spark.jars.packages={HADOOP_AWS}",
            "--conf", f"spark.hadoop.fs.s3a.endpoint={s3}",
            "--conf", "spark.hadoop.fs.s3a.path.style.access=true",
            "--conf", "spark.hadoop.fs.s3a.connection.ssl.enabled=false",
            "--conf", f"spark.hadoop.fs.s3a.access.key={KEYS['aws_access_key_id']}",
            "--conf", f"spark.hadoop.fs.s3a.secret.key={KEYS['aws_secret_access_key']}"]
    result = cluster_lab.run(argv, tmp_path, cwd=REPO)
    assert result.returncode == 3, result.stderr[-3000:]  # the garbage object is unreadable
    assert "s3a://captures/hourly/garbage.pcap: not a pcap or pcapng capture" in result.stderr
    # the same rows as decode --json of the files on disk, the capture column naming the object
    by_name = {f"s3a://captures/hourly/{c.name}": str(c) for c in cluster_lab.CAPTURES}
    rows = _rows(out)
    renamed = type(rows)()
    for key, n in rows.items():
        capture, rest = key[2:].split('"', 1)
        renamed['["' + by_name[capture] + '"' + rest] += n
    assert renamed == _decode_json()
    files = {f["path"]: f for f in ds.dataset(out / "files", format="parquet").to_table().to_pylist()}
    assert set(files) == set(by_name) | {"s3a://captures/hourly/garbage.pcap"}
    for uri, path in by_name.items():
        assert files[uri]["bytes"] == os.path.getsize(path) and files[uri]["error"] is None
    assert files["s3a://captures/hourly/garbage.pcap"]["error"]
