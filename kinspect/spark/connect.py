"""Which kind of Spark session a job runs on (classic: a SparkContext in this process's JVM; Spark
Connect: a client of a remote server, no SparkContext), and what follows from it."""

from __future__ import annotations

import os


def is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


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
