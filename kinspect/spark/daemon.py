"""The Python daemon of kinspect's Spark tasks (``spark.python.daemon.module``): pyspark's own,
with the tasks' imports done once, before it forks its workers.

Each Python worker is a fork of this daemon. pyspark's daemon imports pyspark.worker, but each
task still imported kinspect's decoder, pyarrow, and pandas (pyarrow's from_pylist loads its
pandas_compat): 0.5 s of CPU per worker, paid again by every worker an executor starts, the
first of them inside every job's start. Imported here, the forks inherit them, and a task's
first file (one packet) takes 0.035 s instead of 0.2 s.
"""

import pandas  # noqa: F401
import pyarrow.pandas_compat  # noqa: F401

import kinspect.spark.task  # noqa: F401
from pyspark.daemon import manager

if __name__ == "__main__":
    manager()
