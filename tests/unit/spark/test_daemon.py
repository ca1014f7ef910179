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


def test_a_daemon_started_without_the_safe_path_imports_nothing_more_from_its_directory(tmp_path):
    """A daemon started as Spark starts it, but without PYTHONSAFEPATH (a --conf that dropped it, an
    older driver): its working directory, which ``python -m`` put first on sys.path, is left out
    before its imports, so a pandas.py there never runs."""
    import select
    import struct
    import subprocess
    marker = tmp_path / "imported"
    (tmp_path / "pandas.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSAFEPATH", "KINSPECT_WARM_DAEMON")}
    daemon = subprocess.Popen([sys.executable, "-m", "kinspect.spark.daemon", "pyspark.worker"], cwd=tmp_path,
                              env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert select.select([daemon.stdout], [], [], 60)[0], "the daemon never wrote its port"
        assert 0 < struct.unpack("!i", daemon.stdout.read(4))[0] < 65536
    finally:
        daemon.stdin.close()  # the JVM's way to end it
        daemon.wait(60)
    assert not marker.exists()
