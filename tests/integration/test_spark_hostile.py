"""`kinspect spark` run as a user runs it (a new process, its own local Spark) where the
surroundings are hostile: the working directory, the input directories' entries, the paths it
writes, the environment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pyarrow.dataset as ds
import pytest

import kinspect
from tests.conftest import PCAPS

CAPTURE = PCAPS / "librdkafka-mtu1500.pcap"
WITHIN = 300  # seconds: a hang timer only


def kinspect_spark(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    """The CLI in a new Python, started with -P itself: whatever imports from the working
    directory happen in the processes it starts."""
    return subprocess.run([sys.executable, "-P", "-m", "kinspect", "spark", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, timeout=WITHIN)


def files_table(out: Path) -> list[dict]:
    return ds.dataset(out / "files", format="parquet").to_table().to_pylist()


def _planted(marker: Path) -> str:
    """Python that notes, in ``marker``, that it ran and in which process."""
    return (f"with open({str(marker)!r}, 'a') as _f:\n"
            f"    _f.write(__name__ + ': ' + open('/proc/self/cmdline').read().replace(chr(0), ' ') + '\\n')\n")


def _planted_jar(cwd: Path, marker: Path, build: Path) -> None:
    """cwd/hive-jackson/planted.jar, whose org.apache.spark.deploy.SparkSubmit (the driver JVM's
    main class) notes in ``marker`` that it ran. Spark 4's launcher puts the relative
    "hive-jackson/*" first on the driver's class path by default."""
    javac = shutil.which("javac")
    if javac is None:
        pytest.fail("javac is missing: the README's test command installs the JDK (openjdk-17-jdk-headless)")
    source = build / "org" / "apache" / "spark" / "deploy" / "SparkSubmit.java"
    source.parent.mkdir(parents=True)
    source.write_text("package org.apache.spark.deploy;\n"
                      "public class SparkSubmit {\n"
                      "  public static void main(String[] args) throws Exception {\n"
                      f"    java.nio.file.Files.writeString(java.nio.file.Path.of({json.dumps(str(marker))}),\n"
                      "        \"java: a planted SparkSubmit\\n\", java.nio.file.StandardOpenOption.CREATE,\n"
                      "        java.nio.file.StandardOpenOption.APPEND);\n"
                      "    System.exit(7);\n"
                      "  }\n"
                      "}\n")
    subprocess.run([javac, "-d", str(build / "classes"), str(source)], check=True, timeout=WITHIN)
    (cwd / "hive-jackson").mkdir()
    with zipfile.ZipFile(cwd / "hive-jackson" / "planted.jar", "w") as jar:
        jar.write(build / "classes" / "org/apache/spark/deploy/SparkSubmit.class", "org/apache/spark/deploy/SparkSubmit.class")


def test_nothing_runs_from_the_working_directory(tmp_path):
    """Run from a directory that holds a secrets.py (numpy imports secrets in every worker), a
    kinspect/ source tree without its C accelerators (a fresh clone's root), and a jar in
    hive-jackson/: none of them runs, in the driver's JVM, the warm process, the daemon, its
    workers or the class archiver, and the tasks decode with the installed kinspect's
    accelerators (native in the files table)."""
    cwd = tmp_path / "cwd"
    source = Path(kinspect.__file__).parent
    shutil.copytree(source, cwd / "kinspect", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    marker = tmp_path / "imported"
    init = cwd / "kinspect" / "__init__.py"
    init.write_text(_planted(marker) + init.read_text())
    (cwd / "secrets.py").write_text(_planted(marker) + "raise ImportError('a planted secrets.py')\n")
    _planted_jar(cwd, marker, tmp_path / "java")
    cache = tmp_path / "cache"  # a first run: the JVM's classes are then archived by a process of its own
    done = kinspect_spark(CAPTURE, "--out", tmp_path / "out", "--master", "local[1]", cwd=cwd,
                          env={**os.environ, "KINSPECT_CACHE_DIR": str(cache)})
    assert not marker.exists(), marker.read_text()
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    assert b"being saved in the background" in done.stderr
    deadline = time.monotonic() + WITHIN
    while not any(p.suffix in (".dumping", ".jsa") for p in (cache / "spark-jvm").iterdir()):
        assert time.monotonic() < deadline, "the archiving process never started its dump"
        time.sleep(0.2)  # its lock is taken once its imports are done
    assert not marker.exists(), marker.read_text()
    (row,) = files_table(tmp_path / "out")
    assert row["native"] is True and row["exchanges"] == 43


def test_nothing_is_written_through_a_link_planted_at_a_predictable_temporary_path(tmp_path):
    """Another user's link at the path the driver's log4j configuration had
    (TMPDIR/kinspect-log4j2-UID.properties): its target is left alone, and the run's own
    temporary directories are gone once it has ended."""
    shared = tmp_path / "tmp"  # a shared /tmp, for this run alone
    shared.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    planted = shared / f"kinspect-log4j2-{os.getuid()}.properties"
    planted.symlink_to(victim)
    done = kinspect_spark(CAPTURE, "--out", tmp_path / "out", "--master", "local[1]",
                          env={**os.environ, "TMPDIR": str(shared)})
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    assert victim.read_text() == "untouched"
    assert [p.name for p in shared.iterdir()] == [planted.name]
