"""Captures as a Spark data source: ``spark.read.format("kinspect").load(paths)``.

Spark 4.0's Python Data Source API (pyspark.sql.datasource). ``register(spark)`` registers it
in a session; ``.option("table", "exchanges"|"records"|"files"|"findings"|"clients")`` picks the
table (rows.py's schemas, the ones `kinspect spark` writes). The options are source_options.py's.

Where each part runs: Spark plans a Python data source in Python processes it starts beside
the driver's JVM (the schema, then ``reader()`` and ``partitions()``: the inputs are listed and
planned there by plan.py), and reads each partition in an executor's Python worker, with the
reader and the partition pickled. This module imports only pyspark at its top and is pickled by
value (register()), so an executor's Python without kinspect, or with another version, gets as
far as ``read()``, which says so in one line (``KinspectMissing``) instead of failing to unpickle.
The kinspect objects the tasks need (key log, filter, bounds) travel pickled as bytes, opened
after that check.

What a user's read pays to plan (Spark 4.0.5): the JVM runs each of pyspark.sql.worker's
lookup_data_sources (once a JVM, when the first Python source is registered), create_data_source
(the schema, at load()) and plan_data_source_read (reader() and partitions(), at the action) in a
Python of its own: ``python -m pyspark.daemon MODULE`` (PythonPlannerRunner ->
SparkEnv.createPythonWorker, whose daemon module is the constant "pyspark.daemon":
spark.python.daemon.module, and so kinspect's warm daemon, applies to tasks only; a simple worker
instead with spark.python.use.daemon=false, for tasks too). Each imports pyspark from the
pyspark.zip Spark puts first on its PYTHONPATH, compiling it: 1.0-1.3 CPU-s a process, 0.4 from
the installed package. Kinspect's own part is small: schema() takes 0.07 CPU-s (its imports:
carrying the schemas as JSON from register() only moved them to the driver), reader() 0.05. The
processes stay (spark.python.worker.reuse), so a session's later reads skip most of it.

`kinspect spark` (job.py) plans on the driver and has the same reader read its units in
mapInArrow (``KinspectReader.mapper``): none of those processes start. It first checks one task's
Python (``check_executors``), which gives the one line as a value rather than a task's failure.

Sharded files: the user's source deals each exchange of a split file to one shard, every shard
pairing every connection (plan.Shard): exact with no check across tasks, which a data source
cannot make. `kinspect spark` (job.py) reads the shards by connection instead and checks them
afterwards (kinspect.decode.shards), decoding again where they might differ.

Spark 4.0.5's reader has no filter pushdown (``pushFilters`` came later): the api_name,
client_id and topic options filter in the tasks.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

NAME = "kinspect"
MARK = "kinspect executor:"  # starts the one line of KinspectMissing (cli/spark.py finds it in Spark's error)


class KinspectMissing(RuntimeError):
    """The Python that runs a task has no kinspect, or another version than the driver's."""


def require_kinspect(expected: str) -> None:
    """Raises KinspectMissing unless this Python imports kinspect at version ``expected``."""
    ship = ("ship it with `kinspect spark --package env.tar.gz` (or spark.archives=env.tar.gz#environment "
            "with spark.pyspark.python=./environment/bin/python), or install kinspect==" + expected +
            " in every executor's Python")
    try:
        import kinspect
    except ImportError:
        raise KinspectMissing(f"{MARK} kinspect is not installed in the Python Spark runs its tasks in "
                              f"({sys.executable}), the driver has kinspect {expected}: {ship}") from None
    found = getattr(kinspect, "__version__", "unknown")
    if found != expected:
        raise KinspectMissing(f"{MARK} the Python Spark runs its tasks in ({sys.executable}) has kinspect {found} "
                              f"({os.path.dirname(getattr(kinspect, '__file__', '') or '?')}), the driver has "
                              f"kinspect {expected}: {ship}")


class UnitPartition(InputPartition):
    """One planned unit (plan.Unit) as plain values: ((path, size, error), ...), shard, shards."""

    def __init__(self, files: tuple, shard: int = 0, shards: int = 1):
        super().__init__((files, shard, shards))


class RotationPartition(InputPartition):
    """One file of a rotation (rotation.py), decoded after the file before it: (previous path or
    None, path, whether the previous was read as the last file, whether this one is the last)."""

    def __init__(self, prev, path: str, prev_final: bool, final: bool):
        super().__init__(("rotation", prev, path, prev_final, final))


class KinspectReader(DataSourceReader):
    """The batch reader: the planned units, and what every task needs to decode one.

    ``payload``: pickle of (DecodeRun options, the exchange filter or None); ``files``: an
    accumulator for the files rows (job.py), the table's batches then holding the exchanges alone."""

    def __init__(self, table: str, units: list, payload: bytes, version: str, files=None):
        self.table, self.units, self.payload, self.version, self.files = table, units, payload, version, files

    def partitions(self):
        return [RotationPartition(*unit[1:]) if unit[0] == "rotation" else UnitPartition(*unit) for unit in self.units]

    def read(self, partition):
        if partition is None:  # no unit: Spark reads one partition of nothing
            return iter(())
        require_kinspect(self.version)
        from kinspect.spark.reading import partition_batches
        return partition_batches(partition.value, self.table, self.payload, self.files)

    def mapper(self):
        """mapInArrow's function over ``spark.range(len(units))``: the partitions of the ids it is
        given, each read by ``read``."""
        def read(batches):
            partitions = self.partitions()
            for batch in batches:
                for i in batch.column(0).to_pylist():
                    yield from self.read(partitions[i])
        return read


PROBE_SCHEMA = "error string"


def _probe(expected: str):
    """mapInArrow's function of check_executors: one row, KinspectMissing's line or null."""
    def check(batches):
        import pyarrow as pa
        for _ in batches:
            pass
        try:
            require_kinspect(expected)
            error = None
        except KinspectMissing as e:
            error = str(e)
        yield pa.RecordBatch.from_pydict({"error": [error]}, schema=pa.schema([("error", pa.string())]))
    return check


def check_executors(spark) -> None:
    """Raises KinspectMissing here, on the driver, when the Python a task runs in has no kinspect
    or another version than this one: a one-task job that returns the line as a value, so that
    Spark logs no task failure with a worker's traceback."""
    _by_value()
    (row,) = spark.range(1, numPartitions=1).mapInArrow(_probe(_version()), PROBE_SCHEMA).collect()
    if row["error"]:
        raise KinspectMissing(row["error"])


class KinspectSource(DataSource):
    """``spark.read.format("kinspect")``. register()'s subclass carries the session's parallelism
    as the default ``cores``."""

    default_cores = 1
    driver_version = None  # kinspect's version where the source was registered

    @classmethod
    def name(cls) -> str:
        return NAME

    def _expected(self) -> str:
        return self.driver_version or _version()

    def schema(self):
        require_kinspect(self._expected())
        from pyspark.sql.pandas.types import from_arrow_schema

        from kinspect.spark import source_options
        return from_arrow_schema(source_options.schema_of(source_options.table(self.options)))

    def reader(self, schema):
        from kinspect.spark.reading import planned
        return KinspectReader(*planned(dict(self.options), self.default_cores), self._expected())

    def streamReader(self, schema):
        from kinspect.spark.reading import streamed
        return CaptureStream(*streamed(dict(self.options)), self._expected())


class CaptureStream(DataSourceStreamReader):
    """``spark.readStream.format("kinspect").load(DIRECTORY)``: the files a rotating writer
    completes there, each micro-batch the files completed since the last (rotation.py: a file is
    complete once a newer one exists, or, with the option settle_seconds, once unchanged that
    long). The offset is the last file's name (and whether it was read as the last of all), so a
    query restarted from its checkpoint plans the same files again for a batch it had not
    committed, and the next batch starts after them."""

    def __init__(self, path: str, table: str, payload: bytes, settle, version: str):
        self.path, self.table, self.payload, self.settle, self.version = path, table, payload, settle, version

    def initialOffset(self) -> dict:
        return {"last": "", "final": False}

    def latestOffset(self) -> dict:
        from kinspect.spark.reading import stream_end
        return stream_end(self.path, self.settle)

    def partitions(self, start: dict, end: dict):
        from kinspect.spark.reading import stream_partitions
        return [RotationPartition(*p) for p in stream_partitions(self.path, start, end)]

    def read(self, partition):
        require_kinspect(self.version)
        from kinspect.spark.reading import partition_batches
        return partition_batches(partition.value, self.table, self.payload)


def _version() -> str:
    import kinspect
    return kinspect.__version__


def _by_value() -> None:
    """This module pickled by value: an executor unpickles the reader without kinspect."""
    from pyspark import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def register(spark, cores: int | None = None) -> None:
    """Registers ``spark.read.format("kinspect")`` (and readStream's) in ``spark``. ``cores``: the
    parallelism plans are made for (the option ``cores`` overrides it); default: the session's."""
    if cores is None:
        from kinspect.spark.connect import parallelism
        cores = parallelism(spark)
    spark.dataSource.register(source_class(cores))


def source_class(cores: int) -> type:
    """The source register() registers: this module pickled by value, the parallelism and the
    driver's version carried as class attributes."""
    _by_value()
    return type("KinspectSource", (KinspectSource,), {"default_cores": cores, "driver_version": _version()})

