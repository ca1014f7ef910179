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
    temporary directories are gone once it has ended. And the run says one line: Java prints
    "WARNING: Using incubator modules" at every start of Spark 4's JVM, and the JVM's stderr goes
    through jvm_stderr.StderrFilter, so a clean run's stderr is kinspect's one line."""
    shared = tmp_path / "tmp"  # a shared /tmp, for this run alone
    shared.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    planted = shared / f"kinspect-log4j2-{os.getuid()}.properties"
    planted.symlink_to(victim)
    done = kinspect_spark(CAPTURE, "--out", tmp_path / "out", "--master", "local[1]",
                          env={**os.environ, "TMPDIR": str(shared)})
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    assert done.stderr.decode().splitlines() == [
        f"1 files (36,244 bytes), 43 exchanges, 2 problems, 0 unreadable → {tmp_path / 'out'}"]
    assert victim.read_text() == "untouched"
    assert [p.name for p in shared.iterdir()] == [planted.name]


def clean_text(done: subprocess.CompletedProcess) -> str:
    """stderr, which must be UTF-8 text without control characters but its line ends (no escape
    sequence from a file name, no port number from a daemon's handshake)."""
    for stream in (done.stdout, done.stderr):
        text = stream.decode("utf-8")
        assert not [c for c in text if (c < " " and c not in "\n\t") or "\x7f" <= c < "\xa0"], text[-3000:]
    return done.stderr.decode()


def test_special_files_links_and_bad_names_in_an_input_directory(tmp_path):
    """A FIFO, a socket, a link loop, a dangling link, a link to a directory above, a capture
    whose name is not UTF-8 and one whose name holds terminal escapes: the job ends (the FIFO hung
    it), the special files are named as skipped, the loop and the dangling link are files rows with
    their errors (exit 3), and every capture is decoded, its name escaped on stderr."""
    from kinspect.render.safe import escape
    from tests.hostile.inputs_spark import CAPTURES, DANGLING, ESCAPES, FIFO, NOT_UTF8, special_entries_dir
    top = special_entries_dir(tmp_path)
    done = kinspect_spark(top, "--out", tmp_path / "out", "--master", "local[1]")
    stderr = clean_text(done)
    assert done.returncode == 3, stderr[-3000:]
    assert "Traceback" not in stderr and "internal error" not in stderr
    assert escape(FIFO) == "never-written-\\x1b[31mred\\x1b]0;title\\x07"
    for name, kind in ((escape(FIFO), "a FIFO"), ("a.sock", "a socket"), ("up", "a link to a directory")):
        assert f"kinspect: skipped {top}/{name}: {kind}" in stderr
    dangling = f"{top}/dangling-\\xff"
    assert f"kinspect: {top / 'loop'}: cannot read: Too many levels of symbolic links" in stderr
    assert f"kinspect: {dangling}: cannot read: No such file or directory" in stderr
    # librdkafka-mtu1500: 43 exchanges and 2 problems (3 copies); java-console-consumer: 45 and 0
    assert stderr.splitlines()[-1] == (f"6 files ({3 * CAPTURES[0].stat().st_size + CAPTURES[1].stat().st_size:,} "
                                       f"bytes), 174 exchanges, 6 problems, 2 unreadable, 3 "
                                       f"files skipped → {tmp_path / 'out'}")
    rows = {row["path"]: row for row in files_table(tmp_path / "out")}
    not_utf8 = str(top) + "/" + NOT_UTF8.decode("utf-8", "backslashreplace")
    escaped = str(top / (ESCAPES + ".pcap"))  # data in the tables: as it is
    assert not_utf8.endswith("capture-\\xff\\xfe.pcap")
    assert {path: row["exchanges"] for path, row in rows.items()} == {
        str(top / CAPTURES[0].name): 43, str(top / CAPTURES[1].name): 45, not_utf8: 43, escaped: 43,
        str(top / "loop"): 0, dangling: 0}
    assert sorted(path for path, row in rows.items() if row["error"]) == [dangling, str(top / "loop")]
    exchanges = ds.dataset(tmp_path / "out" / "exchanges", format="parquet", partitioning="hive").to_table()
    assert set(exchanges.column("capture").to_pylist()) == {str(top / CAPTURES[0].name), str(top / CAPTURES[1].name),
                                                           not_utf8, escaped}


def test_a_special_file_named_as_an_input_is_refused_at_once(tmp_path):
    fifo = tmp_path / "capture.pcap"
    os.mkfifo(fifo)
    done = kinspect_spark(fifo, "--out", tmp_path / "out")
    assert done.returncode == 3
    assert clean_text(done) == f"kinspect: {fifo}: a FIFO, not a regular file: name capture files or directories\n"


def test_out_inside_the_directory_a_glob_or_a_directory_reads_is_refused(tmp_path):
    captures = tmp_path / "captures"
    captures.mkdir()
    shutil.copy(CAPTURE, captures / CAPTURE.name)
    for given in (captures / "*.pcap", captures):
        done = kinspect_spark(given, "--out", captures / "tables")
        assert done.returncode == 2, done.stderr
        assert f"--out {captures / 'tables'} is inside {captures}, which the input {given} reads" in clean_text(done)
    assert not (captures / "tables").exists()


def _without(module: str, *args) -> list[str]:
    """The CLI in a Python where importing ``module`` fails as it does where it is not installed."""
    hide = ("import sys\n"
            "class Hidden:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            f"        if name.split('.')[0] == {module!r}:\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Hidden())\n"
            "from kinspect.cli import main\n"
            "sys.argv[:] = ['kinspect', 'spark', *sys.argv[1:]]\n"
            "main()\n")
    return [sys.executable, "-P", "-c", hide, *map(str, args)]


def test_without_pyarrow_one_line_says_what_to_install(tmp_path):
    done = subprocess.run(_without("pyarrow", CAPTURE, "--out", tmp_path / "out"), capture_output=True,
                          timeout=WITHIN)
    assert done.returncode == 4
    assert clean_text(done) == ("kinspect: pyarrow not installed: pip install 'kinspect[spark]' "
                                "(and Java 17 or newer)\n")


def test_without_venv_pack_building_a_package_is_one_line(tmp_path):
    done = subprocess.run(_without("venv_pack", CAPTURE, "--out", tmp_path / "out", "--master", "spark://127.0.0.1:1",
                                   "--package", tmp_path / "env.tar.gz"), capture_output=True, timeout=WITHIN)
    assert done.returncode == 4
    assert clean_text(done).splitlines()[-1] == "kinspect: venv-pack not installed: pip install 'kinspect[spark]'"
    assert not (tmp_path / "env.tar.gz").exists()


def test_a_java_home_that_cannot_run_spark_is_one_line(tmp_path):
    """JAVA_HOME naming nothing, an old Java, and a java that fails at once: each one line
    (internal error, exit 4, before), and no JVM of its own left."""
    env = {**os.environ, "JAVA_HOME": "/nonexistent"}
    done = kinspect_spark(CAPTURE, "--out", tmp_path / "a", env=env)
    assert done.returncode == 4
    assert clean_text(done) == ("kinspect: JAVA_HOME=/nonexistent holds no bin/java: set JAVA_HOME to a Java 17+ "
                                "installation (or unset it to use the java on PATH)\n")
    old = tmp_path / "jdk8"
    (old / "bin").mkdir(parents=True)
    (old / "bin" / "java").write_text("#!/bin/sh\necho 'Error: an old java' >&2\nexit 1\n")
    (old / "bin" / "java").chmod(0o755)
    (old / "release").write_text('JAVA_VERSION="1.8.0_402"\n')
    done = kinspect_spark(CAPTURE, "--out", tmp_path / "b", env={**env, "JAVA_HOME": str(old)})
    assert done.returncode == 4
    assert clean_text(done).startswith(f"kinspect: JAVA_HOME={old} is Java 8; this Spark needs Java 17 or newer")
    (old / "release").write_text('JAVA_VERSION="17.0.15"\n')  # says 17, fails at once
    done = kinspect_spark(CAPTURE, "--out", tmp_path / "c", env={**env, "JAVA_HOME": str(old)})
    assert done.returncode == 4
    lines = clean_text(done).splitlines()
    assert "Error: an old java" in lines and lines[-1].startswith("kinspect: Spark's JVM ended before it started")
    assert "internal error" not in done.stderr.decode() and "Traceback" not in done.stderr.decode()


def test_the_summary_shows_what_the_capture_names_escaped(tmp_path):
    """A client id and topic names holding terminal escape sequences, and strings that are not
    UTF-8 (tests/hostile/inputs.py): the summary on stdout escapes them."""
    from tests.hostile import inputs
    captures = [inputs.escapes_capture(tmp_path), inputs.non_utf8_strings_capture(tmp_path)]
    done = kinspect_spark(*captures, "--out", tmp_path / "out", "--master", "local[1]", "--records", "--summary")
    clean_text(done)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    assert "c\\x1b]0;owned\\x07\\x1b[2J" in done.stdout.decode()


def test_a_fifo_as_the_packed_environment_is_refused(tmp_path):
    """--package naming an existing file ships it as it is: a FIFO would be read by Spark for ever."""
    fifo = tmp_path / "env.tar.gz"
    os.mkfifo(fifo)
    done = kinspect_spark(CAPTURE, "--out", tmp_path / "out", "--master", "spark://127.0.0.1:1", "--package", fifo)
    assert done.returncode == 2
    assert f"--package {fifo} is not a regular file" in clean_text(done)


def test_an_out_name_that_is_not_utf8_is_refused_at_once(tmp_path):
    """Spark's JVM takes paths through py4j, in UTF-8: the job ran, then failed writing with
    py4j's tracebacks and 'internal error'."""
    out = os.fsdecode(os.fsencode(tmp_path) + b"/tables-\xff")
    done = kinspect_spark(CAPTURE, "--out", out, "--master", "local[1]")
    assert done.returncode == 2
    assert f"--out {tmp_path}/tables-\\xff: a name that is not UTF-8" in clean_text(done)
    assert not os.path.lexists(out)
