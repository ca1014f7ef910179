"""The Spark fan-out of `kinspect spark`: one task per planned unit, rows written by Spark.

The units (plan.py) are read by the kinspect data source's reader (source.py), the one
``spark.read.format("kinspect")`` reads with, in mapInArrow: task i decodes unit i in the
executor's Python, streaming from its file, and hands Spark Arrow batches of rows.TASK. No RDD,
so it runs over Spark Connect too. The job that decodes writes ``exchanges/`` (Parquet
partitioned by api_name, or JSON Lines) as the rows come, one open writer per api_name
(no sort), so that Spark's writing overlaps the Python decoding. ``files/`` (one row per input,
its shards summed) is written after it:

- classic Spark: the tasks hand their files rows back through an accumulator (Spark applies a
  successful task's update once), so nothing is kept between the two;
- with ``records/``, or over Spark Connect (no accumulators), all the rows are kept (on disk,
  or staged as Parquet) and each table is written from them.

pyspark is imported here only: the CLI imports this module when the command runs.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from kinspect.render.safe import path_text
from kinspect.spark import jvmcache
from kinspect.spark.connect import is_connect
from kinspect.spark.plan import Unit
from kinspect.spark.progress import watch
from kinspect.spark.requirements import SparkMissing, check_requirements  # noqa: F401 (SparkMissing: the CLI's)
from kinspect.spark.rows import EXCHANGES, FILE_COLUMNS, FILE_TABLE, RECORD_COLUMNS, TABLES, file_table
from kinspect.spark.warm import Warm

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
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%notEmpty{:%ex{short.message}}%n
appender.console.layout.alwaysWriteExceptions = false
"""
TASK_RETRIES = 2  # local[N] never retries a failed task; local[N, 2] does, as a cluster does


class SettingRefused(ValueError):
    """A --conf the session cannot take (over Spark Connect: a static one, the server's own)."""


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

# The Python workers' daemon in local mode: pyspark's, with the tasks' imports done before it forks
# them (daemon.py), and for a JVM this process starts, done while the JVM starts (warm.py). Local
# mode only: a cluster's executors may hold a packed environment or an installed kinspect older
# than this module, and every task would fail there.
DAEMON_MODULE = "kinspect.spark.daemon"

# Every Python worker (local or on a cluster's executors) starts as `python -m ...`, which puts
# its working directory first on sys.path: a secrets.py or a kinspect/ source tree there would be
# imported, and run, instead of the installed modules. Python's safe path (-P) leaves it out.
SAFE_PATH = {"spark.executorEnv.PYTHONSAFEPATH": "1"}

# Spark 4 puts "hive-jackson/*" first on the driver's and the executors' class paths by default: a
# path relative to the working directory, so a jar in ./hive-jackson/ there would be loaded before
# Spark's own classes (its SparkSubmit, say) and run. No kinspect job needs Hive's Jackson jars.
NO_RELATIVE_CLASS_PATH = {"spark.driver.defaultExtraClassPath": "", "spark.executor.defaultExtraClassPath": ""}

# SQL settings of every session, classic or Connect (all of them runtime settings)
SQL_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",  # the files table and summaries are small
    "spark.sql.execution.arrow.maxRecordsPerBatch": "4096",
    # a writer open per api_name (Kafka has fewer than 128 APIs), so the exchanges are written as
    # they come instead of sorted by api_name once a task's rows are all in
    "spark.sql.maxConcurrentOutputFileWriters": "128",
}


def session(master: str | None = None, app: str = "kinspect spark", *, remote: str | None = None,
            package: str | None = None, conf: dict | None = None, jvm_archive: bool = False):
    """A SparkSession with the embedded defaults.

    - ``master`` None: local[*], or inside spark-submit, its --master.
    - Local: this interpreter on both sides, 127.0.0.1, the UI off, task retries.
    - A cluster (spark://, yarn, k8s://) in client mode: with ``package`` (a packed environment,
      package.py), the executors run ./environment/bin/python from it (spark.archives); without,
      they run this interpreter's path, which must then hold kinspect on every node.
    - ``remote`` (sc://...): Spark Connect; ``package`` goes up with addArtifacts.
    ``conf``: more Spark settings (``--conf``).
    A local JVM maps the class archive of jvmcache.py when there is one, and with ``jvm_archive``
    writes one when there is none: then end the session with stop()."""
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
    settings = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", **SQL_CONF}
    if local:
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                         "spark.python.daemon.module": DAEMON_MODULE})
        if not os.environ.get("SPARK_LOCAL_DIRS"):  # a --conf spark.local.dir still wins
            settings["spark.local.dir"] = private_directory()
    if package is not None:
        from kinspect.spark.package import archive_uri
        settings["spark.archives"] = archive_uri(package)
    conf = dict(conf or {})
    archive = None
    flags: list = []
    if not submitted():  # spark-submit's JVM runs already
        flags = [f"-Dlog4j2.configurationFile=file:{_log4j_file()}", *(FAST_START_JVM if local else ())]
        if local:
            flags.append(f"-Djava.io.tmpdir={private_directory()}")
        shared: list = []
        if local and "spark.driver.extraJavaOptions" not in conf and not _gateway_up():
            shared, archive = jvmcache.flags(conf, FAST_START_JVM, create=jvm_archive)
        settings["spark.driver.extraJavaOptions"] = " ".join(flags + shared)
    settings.update(conf)
    settings.update(SAFE_PATH)  # no --conf reopens it
    settings.update({key: value for key, value in NO_RELATIVE_CLASS_PATH.items()
                     if not (submitted() and key.startswith("spark.driver."))})  # spark-submit's JVM runs already
    try:
        spark = _get_or_create(app, master, settings)
    except KeyboardInterrupt:
        jvmcache.abandon(archive)  # an interrupted run makes no archive
        raise
    except Exception:
        if archive is None or not archive.mapped or _gateway_up():
            raise  # the JVM started: the archive is not the cause
        jvmcache.discard(archive)  # a JVM that cannot start with it: once more, without it
        archive = None
        spark = _get_or_create(app, master, {**settings, "spark.driver.extraJavaOptions": " ".join(flags)})
    if archive is not None:
        global _jvm_archive
        _jvm_archive = archive
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _get_or_create(app: str, master: str | None, settings: dict):
    """The session of ``settings``. When this process starts the JVM, the JVM's stderr goes
    through jvm_stderr.StderrFilter."""
    from pyspark.sql import SparkSession
    if not submitted() and not _gateway_up():
        _start_jvm(app, master, settings)
    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _start_jvm(app: str, master: str | None, settings: dict) -> None:
    """Starts the JVM (pyspark's launch_gateway, its stderr into the filter) and its
    SparkContext, which the session then takes up."""
    import atexit

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    from kinspect.spark.jvm_stderr import StderrFilter
    conf = SparkConf().setAll(list(settings.items())).setAppName(app)
    if master is not None:
        conf.setMaster(master)
    stderr = StderrFilter()
    global _warm
    if settings.get("spark.python.daemon.module") == DAEMON_MODULE:
        _warm = Warm.start(_daemon_env(settings))
    inherited = dict(os.environ)
    os.environ.update(_warm.env if _warm else {})  # launch_gateway gives the JVM os.environ
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": stderr.write_end})
    except BaseException:  # Ctrl-C, say: a JVM left before this driver connected waits for it forever
        _end_unconnected_jvm()
        raise
    finally:
        stderr.launched()
        os.environ.clear()
        os.environ.update(inherited)
    atexit.register(stderr.drain)  # an exit without stop(): the JVM's last lines still shown
    global _stderr
    _stderr = stderr
    SparkContext(conf=conf, gateway=gateway)


def _end_unconnected_jvm() -> None:
    """Ends the JVM (spark-submit, this process's child) that launch_gateway started and gave up
    on: py4j's server thread, no daemon thread, would keep it waiting for a driver forever."""
    import signal
    for pid, command in children(os.getpid()):
        if b"org.apache.spark.deploy.SparkSubmit" in command:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass  # gone meanwhile


def children(parent: int) -> list[tuple[int, bytes]]:
    """The processes whose parent is ``parent``, with their command lines (Linux's /proc; elsewhere
    none)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc") if os.path.isdir("/proc") else ()):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if int(f.read().rsplit(b")", 1)[1].split()[1]) != parent:
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found.append((int(pid), f.read()))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return found


_stderr = None  # the StderrFilter of the JVM this process started
_warm = None  # the warm.Warm of the daemon of that JVM's first job


def _daemon_env(settings: dict) -> dict:
    """What Spark sets in its Python daemon's environment that the interpreter or its imports
    read as they start (warm.startup_env): the spark.executorEnv.* variables (PYTHONSAFEPATH),
    pyspark's hash seed, unbuffered output, and the OpenMP threads of a task."""
    prefix = "spark.executorEnv."
    threads = settings.get(prefix + "OMP_NUM_THREADS") or settings.get("spark.task.cpus", "1")
    return {**{k[len(prefix):]: v for k, v in settings.items() if k.startswith(prefix)},
            "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0"), "PYTHONUNBUFFERED": "YES",
            "OMP_NUM_THREADS": str(threads)}


def _gateway_up() -> bool:
    """A JVM this process started runs already: a new session's JVM flags do nothing."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None


_jvm_archive = None  # the jvmcache.Archive the JVM this process started maps or lists classes for


def stop(spark, say=None, interrupted: bool = False) -> None:
    """Stops the session, then lets jvmcache finish with its JVM; ``interrupted`` (a Ctrl-C ended
    the run): no class archive is made from it, since no process of the run outlives a Ctrl-C.

    pyspark's stop() waits up to a second for its accumulator server to notice the shutdown: the
    server's one handler polls its socket once a second (0.77 s of a 5.7 s run). Unless the JVM
    is ended here (jvmcache's first run), that wait happens in a daemon thread instead: the
    values are all in once the job has ended, and the JVM, which holds the handler's socket,
    outlives this process. Ended here, the JVM would close that socket under the polling handler,
    whose EOFError socketserver prints as a traceback."""
    global _jvm_archive
    archive, _jvm_archive = _jvm_archive, None
    if interrupted:
        jvmcache.abandon(archive)
        archive = None
    context = None if is_connect(spark) else spark.sparkContext
    server = getattr(context, "_accumulatorServer", None)
    if server is not None and (archive is None or archive.mapped):
        import threading

        context._accumulatorServer = None
        threading.Thread(target=server.shutdown, name="accumulator server shutdown", daemon=True).start()
    spark.stop()
    global _warm
    if _warm is not None:
        _warm.close()
        _warm = None
    if _stderr is not None:
        _stderr.drain()
    jvmcache.finish(archive, say)


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


def master_of(spark) -> str:
    if is_connect(spark):
        return spark.conf.get("spark.master", None) or ""
    return spark.sparkContext.master


_private = None  # this process's own directory (see private_directory)


def private_directory() -> str:
    """A directory made for this process (mkdtemp: a new name, mode 0700), removed at exit: the
    driver JVM's log4j configuration, and a local Spark's scratch space (spark.local.dir and the
    JVM's java.io.tmpdir: shuffle and cached blocks, which hold decoded rows). Spark made those
    under /tmp, readable by every user (blockmgr-*: 0755, its files 0644)."""
    global _private
    if _private is None:
        import atexit
        import shutil
        import tempfile
        _private = tempfile.mkdtemp(prefix="kinspect-spark-")
        atexit.register(shutil.rmtree, _private, ignore_errors=True)
    return _private


def _log4j_file() -> str:
    """LOG4J in this process's private directory, never at a predictable path in a shared
    directory such as /tmp, where a link another user planted would have this run write through it."""
    path = os.path.join(private_directory(), "log4j2.properties")
    if not os.path.exists(path):
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "w") as f:
            f.write(LOG4J)
    return path


def shipped_keylog(keylog, local: bool):
    """The key log as the tasks get it (in their function's closure; tls/keylog.py's KeyLog).
    Local tasks run on this host: the driver's index of the key-log files (16 bytes a secret, no
    secret in it), each task reading from the files the lines of its own connections. A cluster's
    executors may not see the files: every secret, held in memory (KeyLog.portable), which
    pyspark broadcasts once to each executor with the rest of a function that large.

    Every task used to get every secret. 40 copies of a TLS 1.3 capture on local[2], two runs
    each: a 176 MB key log took the peak memory (all processes, PSS) from 724-745 MB (with a
    10 KB key log) to 1,422-1,476 MB, and the run from 19-27 s to 35-62 s; now 763-805 MB, 24-28 s."""
    return keylog if local else keylog.portable()


class _RowLists:
    """An AccumulatorParam (pyspark's protocol) that joins lists of rows."""

    def zero(self, value):
        return []

    def addInPlace(self, a, b):
        a.extend(b)
        return a


def spark_schema(schema):
    from pyspark.sql.pandas.types import from_arrow_schema
    return from_arrow_schema(schema)


def decoded(spark, units: list[Unit], options: dict | None = None, keep=None, files=None, table: str | None = None):
    """The TASK rows of every unit, one task per unit (unit 0, the largest, first), read by the
    kinspect data source's reader (source.py: the same reader as spark.read.format("kinspect"))
    in mapInArrow; ``keep``: decode's exchange filter, or None. ``files``: an accumulator that
    takes the files rows, the rest being the EXCHANGES rows alone. ``table``: another table of
    rows.TABLES instead (the clients table: units of whole files).

    Not through spark.read.format: Spark plans a Python data source in three Python processes it
    starts for the purpose (4-5 s of a run's start), and from the executors' interpreter path, which
    with --package exists on the executors only. The units are planned here instead, and the tasks'
    Python is checked first (source.check_executors, once a session)."""
    from kinspect.spark import source
    from kinspect.spark.reading import payload, plain
    table = table or ("task" if files is None else "exchanges")
    executors_checked(spark)
    reader = source.KinspectReader(table, [plain(u) for u in units], payload(options or {}, keep),
                                   source._version(), files)
    n = len(units)
    return spark.range(n, numPartitions=max(n, 1)).mapInArrow(reader.mapper(), spark_schema(TABLES[table]))


def executors_checked(spark) -> None:
    """source.check_executors, once a session (its KinspectMissing raised each time until it passes)."""
    from kinspect.spark import source
    if not getattr(spark, "_kinspect_executors_checked", False):
        source.check_executors(spark)
        spark._kinspect_executors_checked = True


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
    redone: dict[str, list[str]] = field(default_factory=dict)  # path -> why its shards were decoded again

    @property
    def unreadable(self) -> list[dict]:
        return [f for f in self.files if f["error"]]


def write(spark, units: list[Unit], out: str, fmt: str = "parquet", options: dict | None = None,
          keep=None, progress=None, records: bool = False) -> Written:
    """Decode ``units`` and write ``out``/exchanges and ``out``/files (Parquet or JSON Lines),
    with ``records`` also ``out``/records (rows.RECORDS).
    ``progress(Done)``: called as the decode job's tasks complete (progress.py)."""
    from contextlib import nullcontext

    options = {**(options or {}), "records": records}
    executors_checked(spark)  # its one-task job before the watched one
    watching = (lambda: watch(spark, units, progress)) if progress else nullcontext
    if records or is_connect(spark):
        return _write_kept(spark, units, out, fmt, options, keep, watching, records)
    files = spark.sparkContext.accumulator([], _RowLists())
    with watching():  # the one job that decodes
        _write_exchanges(decoded(spark, units, {**options, "flows": True}, keep, files), out, fmt)
    rows = files.value
    redone = _not_whole(rows)
    if redone:
        rows = [r for r in rows if r["capture"] not in redone] + _decode_again(
            spark, units, [i for i, u in enumerate(units) if path_text(u.files[0].path) in redone and u.shards > 1],
            out, fmt, options, keep)
    written = _write_files(spark, rows, out, fmt)
    written.redone = redone
    return written


def write_clients(spark, inputs: list, out: str, fmt: str = "parquet", options: dict | None = None,
                  target: int | None = None) -> None:
    """``out``/clients (rows.CLIENTS): kinspect clients' inventory of each input, decoded whole
    by the data source's reader (its table "clients"; files packed to ``target`` bytes a task,
    never split)."""
    from kinspect.spark.plan import TARGET_BYTES, plan

    units = plan(inputs, cores=1, target=target or TARGET_BYTES)
    options = {k: v for k, v in (options or {}).items() if k not in ("records", "schemas", "schemas_topic")}
    rows = decoded(spark, units, options, table="clients")
    rows.write.mode("error").option("ignoreNullFields", "false").format(
        "parquet" if fmt == "parquet" else "json").save(os.path.join(out, "clients"))


def _not_whole(rows: list[dict]) -> dict[str, list[str]]:
    """Files whose shards, decoded by connection, may not give one process's rows, and why
    (kinspect.decode.shards)."""
    import json

    from kinspect.decode.shards import not_whole
    reports: dict[str, list] = {}
    for row in rows:
        if row.get("file_flows"):
            reports.setdefault(row["capture"], []).append(json.loads(row["file_flows"]))
    return {path: reasons for path, shards in reports.items() if (reasons := not_whole(shards))}


def _decode_again(spark, units: list[Unit], indices: list[int], out: str, fmt: str, options: dict,
                  keep) -> list[dict]:
    """Units ``indices`` decoded again, each exchange dealt to one shard (plan.Shard, which
    pairs every connection in every shard), their first rows removed from ``out``/exchanges:
    task i wrote the files named part-<i>-... (Spark names a task's files by its partition).
    Their files rows."""
    jvm = spark.sparkContext._jvm
    base = jvm.org.apache.hadoop.fs.Path(os.path.join(out, "exchanges"))
    filesystem = base.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    for i in indices:
        for pattern in (f"*/part-{i:05d}-*", f"*/.part-{i:05d}-*", f"part-{i:05d}-*", f".part-{i:05d}-*"):
            for status in filesystem.globStatus(jvm.org.apache.hadoop.fs.Path(base, pattern)) or []:
                filesystem.delete(status.getPath(), False)
    files = spark.sparkContext.accumulator([], _RowLists())
    again = [units[i] for i in indices]
    _write_exchanges(decoded(spark, again, {**options, "flows": False}, keep, files), out, fmt, mode="append")
    return files.value


def _local_rows(spark, rows: list[dict], schema):
    """A DataFrame of the driver's ``rows`` (an Arrow ``schema``): Arrow straight to the JVM with
    pyspark 4 (a list of rows would take a Python worker job of its own)."""
    import pyarrow as pa
    import pyspark
    if int(pyspark.__version__.split(".")[0]) >= 4:
        return spark.createDataFrame(pa.Table.from_pylist(rows, schema=schema))
    return spark.createDataFrame(rows, spark_schema(schema))


def _write_kept(spark, units, out, fmt, options, keep, watching, records) -> Written:
    """The rows kept once decoded (on disk; over Connect, staged as Parquet), each table written
    from them: for ``records/``, and for Spark Connect, which has no accumulators."""
    from pyspark.sql import functions as F
    rows = decoded(spark, units, options, keep)
    staged = os.path.join(out, STAGED) if is_connect(spark) else None
    try:
        with watching():  # the first action decodes
            if staged is not None:
                rows.write.mode("error").parquet(staged)
                rows = spark.read.parquet(staged)
            else:  # the exchanges written as the tasks decode, all rows kept on disk for the rest
                rows = on_disk(spark, rows)
                _write_exchanges(_exchanges(rows), out, fmt)
        if staged is not None:
            _write_exchanges(_exchanges(rows), out, fmt)
        if records:
            (rows.filter(F.col("table") == "records")
             .select(*[F.col(task).alias(name) for task, name in RECORD_COLUMNS.items()])
             .write.mode("error").option("ignoreNullFields", "false")
             .format("parquet" if fmt == "parquet" else "json").save(os.path.join(out, "records")))
        files = rows.filter(F.col("table") == "files").select(*FILE_COLUMNS).collect()
        return _write_files(spark, [row.asDict() for row in files], out, fmt)
    finally:
        if staged is None:
            rows.unpersist()
        else:
            import shutil
            shutil.rmtree(staged, ignore_errors=True)  # when this client sees the server's files


def _write_files(spark, task_rows: list[dict], out: str, fmt: str) -> Written:
    """``out``/files from the tasks' files rows: one row per input (rows.file_table), a tiny
    job that only writes."""
    table = file_table(task_rows)
    (_local_rows(spark, table, FILE_TABLE).coalesce(1).write.mode("error").option("ignoreNullFields", "false")
     .format("parquet" if fmt == "parquet" else "json").save(os.path.join(out, "files")))
    return Written(table, sum(f["exchanges"] for f in table))


def _exchanges(rows):
    """The exchanges among TASK rows, as EXCHANGES."""
    from pyspark.sql import functions as F
    return rows.filter(F.col("table") == "exchanges").select(*EXCHANGES.names)


def _write_exchanges(exchanges, out: str, fmt: str, mode: str = "error") -> None:
    if fmt == "parquet":
        exchanges.write.mode(mode).partitionBy("api_name").parquet(os.path.join(out, "exchanges"))
    else:
        exchanges.write.mode(mode).option("ignoreNullFields", "false").json(os.path.join(out, "exchanges"))


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
