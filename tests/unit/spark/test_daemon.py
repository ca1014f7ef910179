"""kinspect/spark/daemon.py: the sys.path its daemon imports pyspark with."""

import os
import sys

import pyspark

from kinspect.spark.daemon import prefer_installed_pyspark

LIB = os.path.join(os.path.dirname(pyspark.__file__), "python", "lib")
OWN_ZIP = os.path.join(LIB, "pyspark.zip")


def _py4j_zip():
    return next(os.path.join(LIB, name) for name in os.listdir(LIB) if name.startswith("py4j"))


def test_the_installed_pysparks_own_zip_leaves_the_path_and_py4j_stays():
    """Spark's PYTHONPATH for the daemon, as the JVM sets it in local mode (read from a running
    daemon): the zips of the installed pyspark first, then the rest."""
    assert os.path.exists(OWN_ZIP)
    path = [OWN_ZIP, _py4j_zip(), *sys.path]
    assert prefer_installed_pyspark(path) == [_py4j_zip(), *sys.path]


def test_another_sparks_zip_stays(tmp_path):
    """A cluster's SPARK_HOME/python/lib/pyspark.zip is that cluster's pyspark, maybe another
    version than the one installed here: it is kept."""
    foreign = tmp_path / "spark" / "python" / "lib" / "pyspark.zip"
    foreign.parent.mkdir(parents=True)
    foreign.write_bytes(b"")
    path = [str(foreign), *sys.path]
    assert prefer_installed_pyspark(path) == path


def test_the_zip_stays_where_no_pyspark_is_installed_beside_it():
    path = [OWN_ZIP, _py4j_zip()]
    assert prefer_installed_pyspark(path) == path
