"""The Spark fan-out of `kinspect spark`: one task per planned unit, rows written by Spark.

``spark.range(n, numPartitions=n).mapInArrow(...)``: task i decodes unit i (plan.py) in the
executor's Python, streaming from its file, and hands Spark Arrow batches of rows.TASK. No RDD,
so it runs over Spark Connect too. The rows are kept on disk once (both tables come from them),
then written: ``exchanges/`` (Parquet partitioned by api_name, or JSON Lines) and ``files/``
(one row per input, its shards summed).

pyspark is imported here only: the CLI imports this module when the command runs.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from kinspect.spark.plan import Unit
from kinspect.spark.rows import EXCHANGES, FILE_COLUMNS, RECORD_COLUMNS, TASK

DEFAULT_MASTER = "local[*]"
# The driver's log4j: errors only, one line each. Spark's default prints its banner and WARNs;
# the gateway's logger at the root's level keeps away PySpark's "Setting default log level" lines.
LOG4J = """\
rootLogger.level = error
logger.repl.name = org.apache.spark.api.python.PythonGatewayServer
logger.repl.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""
TASK_RETRIES = 2  # local[N] never retries a failed task; local[N, 2] does, as a cluster does


class SparkMissing(Exception):
    """pyspark, pyarrow, pandas (mapInArrow wants it) or Java is not there: the message says what to install."""


class SettingRefused(ValueError):
    """A --conf the session cannot take (over Spark Connect: a static one, the server's own)."""


# Spark Connect's client (pyspark.sql.connect) needs these; the spark extra installs them
CONNECT_MODULES = {"grpc": "grpcio", "grpc_status": "grpcio-status", "google.rpc": "googleapis-common-protos"}


def _installed(module: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def check_requirements(connect: bool = False) -> None:
    """SparkMissing unless pyspark, pyarrow and a Java runtime (with ``connect``: Spark Connect's
    client libraries instead of Java) can be found."""
    import shutil
    missing = [name for name in ("pyspark", "pyarrow", "pandas") if not _installed(name)]
    if connect:
        missing += [package for module, package in CONNECT_MODULES.items() if not _installed(module)]
    if missing:
        raise SparkMissing(f"{' and '.join(missing)} not installed: pip install 'kinspect[spark]'"
                           + ("" if connect else " (and Java 17 or newer)"))
    if connect:
        return
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK)) and not shutil.which("java"):
        raise SparkMissing("no Java runtime found: install Java 17 or newer (apt-get install openjdk-17-jre-headless) "
                           "or set JAVA_HOME")


def local_master(master: str) -> str:
    """``local`` and ``local[N]`` get task retries: ``local[N, 2]``."""
    if master == "local":
        return f"local[1, {TASK_RETRIES}]"
    if master.startswith("local[") and master.endswith("]") and "," not in master:
        return f"{master[:-1]}, {TASK_RETRIES}]"
    return master


def submitted() -> bool:
    """True inside spark-submit: its launcher started the JVM, and its options (--master,
    --archives, --conf) are already the SparkContext's configuration."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


# The local JVM (driver and executor in one) compiles with C1 only and collects with one thread:
# the JVM's share of a kinspect job is small (Arrow batches in, Parquet out; the decoding is
# Python's), and C2's compiler threads and the parallel collector's took the CPUs the Python
# workers need. Start and one small file: 19.5-21.4 s -> 11.7-12.8 s of wall time on 2 vCPUs
# (tests/bench/bench_spark.py). A --conf spark.driver.extraJavaOptions replaces them.
FAST_START_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

# SQL settings of every session, classic or Connect (all of them runtime settings)
SQL_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",  # the files table and summaries are small
    "spark.sql.execution.arrow.maxRecordsPerBatch": "4096",
}


def session(master: str | None = None, app: str = "kinspect spark", *, remote: str | None = None,
            package: str | None = None, conf: dict | None = None):
    """A SparkSession with the embedded defaults.

    - ``master`` None: local[*], or inside spark-submit, its --master.
    - Local: this interpreter on both sides, 127.0.0.1, the UI off, task retries.
    - A cluster (spark://, yarn, k8s://) in client mode: with ``package`` (a packed environment,
      package.py), the executors run ./environment/bin/python from it (spark.archives); without,
      they run this interpreter's path, which must then hold kinspect on every node.
    - ``remote`` (sc://...): Spark Connect; ``package`` goes up with addArtifacts.
    ``conf``: more Spark settings (``--conf``)."""
    check_requirements(connect=remote is not None)
    if remote is not None:
        return _connect(remote, app, package, conf or {})
    if master is None and not submitted():
        master = DEFAULT_MASTER
    local = master is not None and master.startswith("local")
    if package is not None:
        from kinspect.spark.package import EXECUTOR_PYTHON
        os.environ["PYSPARK_PYTHON"] = EXECUTOR_PYTHON  # the driver's SparkContext gives it to every task
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        master = local_master(master)
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    builder = (builder.config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in SQL_CONF.items():
        builder = builder.config(key, value)
    if local:
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    if not submitted():  # spark-submit's JVM runs already
        flags = [f"-Dlog4j2.configurationFile=file:{_log4j_file()}", *(FAST_START_JVM if local else ())]
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(flags))
    if package is not None:
        from kinspect.spark.package import archive_uri
        builder = builder.config("spark.archives", archive_uri(package))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _connect(remote: str, app: str, package: str | None, conf: dict):
    """A Spark Connect session: the server's own master runs the tasks. With ``package``, the
    packed environment is uploaded (addArtifacts, unpacked as ./environment beside each task)
    and the session's Python UDFs run its interpreter."""
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.remote(remote).appName(app).getOrCreate()
    for key in conf:
        if not spark.conf.isModifiable(key):
            raise SettingRefused(f"--conf {key}: not a session setting, so Spark Connect cannot change it; "
                                 f"set it where the Connect server starts")
    for key, value in {**SQL_CONF, **conf}.items():
        spark.conf.set(key, value)
    if package is not None:
        from kinspect.spark.package import ENV_NAME, archive_uri
        spark.addArtifacts(archive_uri(package), archive=True)
        spark.conf.set("spark.sql.execution.pyspark.python", f"{ENV_NAME}/bin/python")
    return spark


def is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def master_of(spark) -> str:
    if is_connect(spark):
        return spark.conf.get("spark.master", None) or ""
    return spark.sparkContext.master


def parallelism(spark) -> int:
    """How many tasks run at once: the SparkContext's default parallelism; over Spark Connect
    (no SparkContext) spark.default.parallelism, or N of a local[N] server, or this machine's cores."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured and configured.isdigit():
        return int(configured)
    master = spark.conf.get("spark.master", None) or ""
    inside = master[master.find("[") + 1:master.find("]")] if master.startswith("local[") else ""
    cores = inside.split(",")[0].strip()
    if cores.isdigit():
        return int(cores)
    return os.cpu_count() or 1


def _log4j_file() -> str:
    import tempfile
    path = os.path.join(tempfile.gettempdir(), f"kinspect-log4j2-{os.getuid()}.properties")
    with open(path, "w") as f:
        f.write(LOG4J)
    return path


def _decoder(units: list[Unit], options: dict, keep):
    """The function each task runs: the unit of each id it is given, as Arrow batches."""
    def decode(batches):
        from kinspect.spark.task import unit_batches
        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield from unit_batches(units[i], options, keep)
    return decode


def spark_schema(schema):
    from pyspark.sql.pandas.types import from_arrow_schema
    return from_arrow_schema(schema)


def decoded(spark, units: list[Unit], options: dict | None = None, keep=None):
    """The TASK rows of every unit, one task per unit (unit 0, the largest, first); ``keep``:
    decode's exchange filter, or None."""
    n = len(units)
    return spark.range(n, numPartitions=max(n, 1)).mapInArrow(_decoder(units, options or {}, keep),
                                                              spark_schema(TASK))


# Over Spark Connect, the decoded rows are written once to OUT/_decoded (Parquet) and read back
# for each table: persist() there clones the session, copying its artifacts (the packed
# environment) every time. Removed at the end when the client sees the server's files.
STAGED = "_decoded"


def on_disk(spark, df):
    """``df`` kept on disk once computed (classic Spark); over Connect, ``df`` as it is (see STAGED)."""
    if is_connect(spark):
        return df
    from pyspark import StorageLevel
    return df.persist(StorageLevel.DISK_ONLY)


@dataclass
class Written:
    files: list[dict]  # the files table's rows, as written
    exchanges: int

    @property
    def unreadable(self) -> list[dict]:
        return [f for f in self.files if f["error"]]


def write(spark, units: list[Unit], out: str, fmt: str = "parquet", options: dict | None = None,
          keep=None, progress=None, records: bool = False) -> Written:
    """Decode ``units`` and write ``out``/exchanges and ``out``/files (Parquet or JSON Lines),
    with ``records`` also ``out``/records (rows.RECORDS).
    ``progress(Done)``: called as the decode job's tasks complete (progress.py)."""
    from contextlib import nullcontext

    from pyspark.sql import functions as F
    from kinspect.spark.progress import watch
    options = {**(options or {}), "records": records}
    rows = decoded(spark, units, options, keep)
    staged = os.path.join(out, STAGED) if is_connect(spark) else None
    with watch(spark, units, progress) if progress else nullcontext():  # the decoding job
        if staged is not None:
            rows.write.mode("error").parquet(staged)
            rows = spark.read.parquet(staged)
        else:
            rows = on_disk(spark, rows)
            rows.filter(F.col("table") == "files").count()  # decodes, the rows kept on disk
    try:
        exchanges = rows.filter(F.col("table") == "exchanges").select(*EXCHANGES.names)
        if fmt == "parquet":
            exchanges.write.mode("error").partitionBy("api_name").parquet(os.path.join(out, "exchanges"))
        else:
            exchanges.write.mode("error").option("ignoreNullFields", "false").json(os.path.join(out, "exchanges"))
        if records:
            (rows.filter(F.col("table") == "records")
             .select(*[F.col(task).alias(name) for task, name in RECORD_COLUMNS.items()])
             .write.mode("error").option("ignoreNullFields", "false")
             .format("parquet" if fmt == "parquet" else "json").save(os.path.join(out, "records")))
        files = _files(rows.filter(F.col("table") == "files"))
        (files.coalesce(1).write.mode("error").option("ignoreNullFields", "false")
         .format("parquet" if fmt == "parquet" else "json").save(os.path.join(out, "files")))
        collected = [r.asDict() for r in files.collect()]
        total = sum(f["exchanges"] for f in collected)
    finally:
        if staged is None:
            rows.unpersist()
        else:
            import shutil
            shutil.rmtree(staged, ignore_errors=True)  # when this client sees the server's files
    return Written(collected, total)


def read_records(spark, out: str, fmt: str = "parquet"):
    from kinspect.spark.rows import RECORDS
    path = os.path.join(out, "records")
    if fmt == "parquet":
        return spark.read.parquet(path)
    return spark.read.schema(spark_schema(RECORDS)).json(path)


def read_exchanges(spark, out: str, fmt: str = "parquet"):
    """The exchanges table as written (Parquet's api_name partitions read back as a column)."""
    path = os.path.join(out, "exchanges")
    if fmt == "parquet":
        return spark.read.parquet(path)
    return spark.read.schema(spark_schema(EXCHANGES)).json(path)


def _files(rows):
    """One row per input: its shards' rows summed (every shard read the whole file)."""
    from pyspark.sql import functions as F
    named = rows.select(*[F.col(task).alias(name) for task, name in FILE_COLUMNS.items()])
    return (named.groupBy("path")
            .agg(F.first("bytes").alias("bytes"), F.max("packets").alias("packets"),
                 F.sum("exchanges").alias("exchanges"), F.sum("problems").alias("problems"),
                 F.max("error").alias("error"), F.sum("seconds").alias("seconds"),
                 F.max("shards").alias("shards"), F.min("native").alias("native"),
                 F.first("python").alias("python"))
            .orderBy(F.col("bytes").desc(), "path"))
