"""The Python daemon of kinspect's Spark tasks (``spark.python.daemon.module``): pyspark's own,
with the tasks' imports done once, before it forks its workers.

Each Python worker is a fork of this daemon. pyspark's daemon imports pyspark.worker, but each
task still imported kinspect's decoder, pyarrow, and pandas (pyarrow's from_pylist loads its
pandas_compat): 0.5 s of CPU per worker, paid again by every worker an executor starts, the
first of them inside every job's start. Imported here, the forks inherit them, and a task's
first file (one packet) takes 0.035 s instead of 0.2 s.

Started by Spark with ``KINSPECT_WARM_DAEMON`` set, it first offers its place to the warm process
the driver started (warm.py), which did these imports while the JVM started. Started with
``--warm FD SOCKET``, it is that warm process.
"""

import os
import sys


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """``path`` without the pyspark.zip that Spark puts first on the daemon's PYTHONPATH when that
    zip is the installed pyspark's own (``pyspark/python/lib/pyspark.zip``, the same version): the
    zip holds no compiled modules, so each daemon compiled pyspark from source (importing
    pyspark.worker: 0.63 s from the zip, 0.21 s from the installed package)."""
    from importlib.machinery import PathFinder
    zips = [p for p in path if os.path.basename(p) == "pyspark.zip"]
    installed = PathFinder.find_spec("pyspark", [p for p in path if p not in zips])
    if not zips or installed is None or not installed.origin:
        return path
    own = os.path.join(os.path.dirname(installed.origin), "python", "lib", "pyspark.zip")
    return [p for p in path if not (p in zips and os.path.realpath(p) == os.path.realpath(own))]


def without_working_directory(path: list[str], safe: bool) -> list[str]:
    """``path`` without the working directory that ``python -m`` puts first on it when the
    interpreter was started without its safe path (-P, PYTHONSAFEPATH, which job.SAFE_PATH sets
    for every worker): nothing more is imported from there (a secrets.py, a pandas/)."""
    if safe or not path or path[0] not in ("", os.getcwd()):
        return path
    return path[1:]


def prepare() -> None:
    """The imports every worker needs."""
    import pandas  # noqa: F401
    import pyarrow.pandas_compat  # noqa: F401
    import pyspark.worker  # noqa: F401

    import kinspect.spark.task  # noqa: F401


def run() -> None:
    from pyspark.daemon import manager  # reads sys.argv: the worker module Spark named
    manager()


def main(argv: list[str]) -> None:
    from kinspect.spark import warm
    sys.path[:] = prefer_installed_pyspark(without_working_directory(sys.path, sys.flags.safe_path))
    if argv[1:2] == ["--warm"]:
        warm.serve(int(argv[2]), argv[3], prepare, run)
        return
    address = os.environ.get(warm.ENV)
    if address and warm.hand_over(address):
        return
    prepare()
    run()


if __name__ == "__main__":
    main(sys.argv)
