"""Inputs named by URI (``s3a://bucket/prefix/``, ``hdfs://nn/dir/``): listed on the driver by
Spark, streamed by each task with pyarrow.fs.

- Listing: Spark's binaryFile source with only ``path`` and ``length`` selected, so no content
  is read (its content column could not hold a file over 2 GiB anyway). Spark must reach the
  file system: for s3a, hadoop-aws on its class path (``--conf
  spark.jars.packages=org.apache.hadoop:hadoop-aws:3.4.1`` for pyspark 4.0's Hadoop 3.4.1) and
  the ``spark.hadoop.fs.s3a.*`` settings.
- Reading: a task opens its file as a stream with pyarrow.fs (S3FileSystem for s3a:// and s3://,
  HadoopFileSystem for hdfs:// where libhdfs is present) and decodes it as it arrives: no
  capture is ever loaded whole. The S3 endpoint and keys come from the same fs.s3a settings,
  else from pyarrow's own (AWS_* variables, instance credentials).
"""

from __future__ import annotations

from kinspect.spark.plan import Input

# spark.hadoop.fs.s3a.* settings → pyarrow.fs.S3FileSystem's arguments
S3A_SETTINGS = {"endpoint": "endpoint", "access.key": "access_key", "secret.key": "secret_key",
                "session.token": "session_token", "endpoint.region": "region",
                "connection.ssl.enabled": "ssl"}


def is_uri(arg: str) -> bool:
    """A file system URI other than a local path (file:// names a local path)."""
    scheme, sep, _ = arg.partition("://")
    return bool(sep) and scheme.isalnum() and scheme.lower() != "file"


def list_uris(spark, uris: list[str]) -> list[Input]:
    """Every file under each URI (globs allowed), with its length, largest first per URI;
    FileNotFoundError names a URI that matched nothing."""
    found: dict[str, Input] = {}
    for uri in uris:
        rows = (spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(uri)
                .select("path", "length").collect())
        if not rows:
            raise FileNotFoundError(f"{uri}: no file there")
        for row in sorted(rows, key=lambda r: (-r["length"], r["path"])):
            found.setdefault(row["path"], Input(row["path"], row["length"]))
    return list(found.values())


def filesystem_options(spark) -> dict:
    """The S3 settings the tasks need, read from the session's spark.hadoop.fs.s3a.* ones."""
    s3 = {}
    for setting, name in S3A_SETTINGS.items():
        value = spark.conf.get(f"spark.hadoop.fs.s3a.{setting}", None)
        if value:
            s3[name] = value
    return {"s3": s3}


def _s3(options: dict):
    from pyarrow import fs
    s3 = dict(options.get("s3") or {})
    endpoint = s3.pop("endpoint", None)
    ssl = s3.pop("ssl", None)
    kwargs = {k: v for k, v in s3.items() if v}
    if endpoint:
        scheme, sep, rest = endpoint.partition("://")
        kwargs["endpoint_override"] = rest if sep else endpoint
        kwargs["scheme"] = scheme if sep else ("http" if str(ssl).lower() == "false" else "https")
    kwargs.setdefault("region", "us-east-1")
    return fs.S3FileSystem(**kwargs)


class _Named:
    """A pyarrow stream with the URI as its name (capture errors name the file)."""

    def __init__(self, stream, name: str):
        self._stream, self.name = stream, name

    def read(self, n: int = -1) -> bytes:
        return self._stream.read() if n is None or n < 0 else self._stream.read(n)

    def close(self) -> None:
        self._stream.close()

    def __str__(self) -> str:
        return self.name


def open_uri(uri: str, options: dict | None = None):
    """The file at ``uri`` as a readable stream. OSError when it cannot be opened."""
    from pyarrow import fs
    scheme, _, rest = uri.partition("://")
    if scheme.lower() in ("s3a", "s3", "s3n"):
        stream = _s3(options or {}).open_input_stream(rest)
    else:
        filesystem, path = fs.FileSystem.from_uri(uri)
        stream = filesystem.open_input_stream(path)
    return _Named(stream, uri)
