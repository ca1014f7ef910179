"""The Python daemon of kinspect's Spark tasks (``spark.python.daemon.module``): pyspark's own,
with the tasks' imports done once, before it forks its workers.

Each Python worker is a fork of this daemon. pyspark's daemon imports pyspark.worker, but each
task still imported pyarrow, pandas and kinspect's decoder: 0.37 s of CPU per worker, paid
again by every worker an executor starts. Imported here, the forks inherit them.
"""

import pyarrow  # noqa: F401
import pandas  # noqa: F401  (pyspark's Arrow UDFs import it)

import kinspect.spark.task  # noqa: F401
from pyspark.daemon import manager

if __name__ == "__main__":
    manager()
