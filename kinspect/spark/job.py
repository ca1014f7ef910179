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
from kinspect.spark.rows import EXCHANGES, FILE_COLUMNS, TASK

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


def check_requirements() -> None:
    """SparkMissing unless pyspark, pyarrow and a Java runtime can be found."""
    import importlib.util
    import shutil
    missing = [name for name in ("pyspark", "pyarrow", "pandas") if importlib.util.find_spec(name) is None]
    if missing:
        raise SparkMissing(f"{' and '.join(missing)} not installed: pip install 'kinspect[spark]' "
                           "(and Java 17 or newer)")
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


def session(master: str = DEFAULT_MASTER, app: str = "kinspect spark"):
    """A SparkSession with the embedded defaults: this interpreter on both sides, the UI off,
    and in local mode 127.0.0.1 and task retries."""
    check_requirements()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        master = local_master(master)
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "8")  # the files table and summaries are small
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "4096"))
    if local:
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_log4j_file()}")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


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


@dataclass
class Written:
    files: list[dict]  # the files table's rows, as written
    exchanges: int

    @property
    def unreadable(self) -> list[dict]:
        return [f for f in self.files if f["error"]]


def write(spark, units: list[Unit], out: str, fmt: str = "parquet", options: dict | None = None,
          keep=None) -> Written:
    """Decode ``units`` and write ``out``/exchanges and ``out``/files (Parquet or JSON Lines)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    rows = decoded(spark, units, options, keep).persist(StorageLevel.DISK_ONLY)
    try:
        exchanges = rows.filter(F.col("table") == "exchanges").select(*EXCHANGES.names)
        if fmt == "parquet":
            exchanges.write.mode("errorifexists").partitionBy("api_name").parquet(os.path.join(out, "exchanges"))
        else:
            exchanges.write.mode("errorifexists").option("ignoreNullFields", "false").json(os.path.join(out, "exchanges"))
        files = _files(rows.filter(F.col("table") == "files"))
        (files.coalesce(1).write.mode("errorifexists").option("ignoreNullFields", "false")
         .format("parquet" if fmt == "parquet" else "json").save(os.path.join(out, "files")))
        collected = [r.asDict() for r in files.collect()]
        total = sum(f["exchanges"] for f in collected)
    finally:
        rows.unpersist()
    return Written(collected, total)


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
                 F.max("shards").alias("shards"))
            .orderBy(F.col("bytes").desc(), "path"))
