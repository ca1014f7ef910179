"""kinspect spark from the command line: exit codes, the files table, the one-line messages."""

import os
import subprocess
import sys

import pyarrow.dataset as ds
from click.testing import CliRunner

from kinspect.cli import cli

from kinspect.problems import EXIT_UNFINISHED, EXIT_UNREADABLE, EXIT_USAGE
from tests.conftest import PCAPS, REALDATA


def _kinspect(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kinspect", "spark", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=300)


def test_a_garbage_file_among_captures_gets_one_error_row_and_exit_3(tmp_path, capfd):
    """In this process (CliRunner): its JVM stays up for tests/unit/spark's session. The garbage file is
    named: one found in a directory would be skipped as no capture (test_plan)."""
    garbage = tmp_path / "in" / "garbage.pcap"
    garbage.parent.mkdir()
    garbage.write_bytes(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n" * 40)
    captures = [PCAPS / "librdkafka-mtu1500.pcap", REALDATA / "go-sniffer/kafka.pcap"]
    done = CliRunner().invoke(cli, ["spark", *map(str, captures), str(garbage), "--out", str(tmp_path / "out"),
                                    "--master", "local[2]", "--summary", "--records"])
    assert done.exit_code == EXIT_UNREADABLE, done.output
    jvm = capfd.readouterr().err  # the JVM writes to the process's stderr, not click's
    assert "log4j" not in jvm and "Setting default log level" not in jvm and " WARN " not in jvm
    assert f"{garbage}: not a pcap or pcapng capture" in done.stderr
    assert "3 files" in done.stderr and "1 unreadable" in done.stderr
    files = ds.dataset(tmp_path / "out" / "files", format="parquet").to_table().to_pylist()
    assert len(files) == 3
    (bad,) = [f for f in files if f["error"]]
    assert bad["path"] == str(garbage) and bad["exchanges"] == 0 and bad["bytes"] == garbage.stat().st_size
    exchanges = ds.dataset(tmp_path / "out" / "exchanges", format="parquet", partitioning="hive").to_table()
    assert exchanges.num_rows == sum(f["exchanges"] for f in files) > 0
    assert set(exchanges.column("capture").to_pylist()) == {str(c) for c in captures}
    assert "Exchanges by API" in done.stdout and "Metadata" in done.stdout and "Exchanges" not in done.stderr
    apis = ds.dataset(tmp_path / "out" / "summary" / "apis", format="parquet").to_table().to_pylist()
    assert sum(r["count"] for r in apis) == exchanges.num_rows
    assert "Latency by client and API" in done.stdout and "Traffic by topic" in done.stdout
    assert (tmp_path / "out" / "summary" / "clients").is_dir() and (tmp_path / "out" / "summary" / "topics").is_dir()
    records = ds.dataset(tmp_path / "out" / "records", format="parquet").to_table()
    assert records.num_rows > 0 and set(records.column("capture").to_pylist()) <= {str(c) for c in captures}
    assert "executors' Python" not in done.stderr  # said for a cluster only


def test_without_java_one_line_says_what_to_install(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java on it
    done = _kinspect(PCAPS / "librdkafka-mtu1500.pcap", "--out", tmp_path / "out", env=env)
    assert done.returncode == EXIT_UNFINISHED
    assert done.stderr.count("\n") == 1 and "install Java 17" in done.stderr
    assert not (tmp_path / "out").exists()


def test_tables_already_there_are_a_usage_error(tmp_path):
    (tmp_path / "out" / "exchanges").mkdir(parents=True)
    done = _kinspect(PCAPS / "librdkafka-mtu1500.pcap", "--out", tmp_path / "out")
    assert done.returncode == EXIT_USAGE and "already holds exchanges/" in done.stderr
    missing = _kinspect(tmp_path / "nothing*.pcap", "--out", tmp_path / "out2")
    assert missing.returncode == EXIT_UNREADABLE and "nothing*.pcap" in missing.stderr


def test_cluster_options_that_cannot_work_are_usage_errors(tmp_path):
    capture = PCAPS / "librdkafka-mtu1500.pcap"
    local = _kinspect(capture, "--out", tmp_path / "a", "--package", tmp_path / "env.tar.gz")
    assert local.returncode == EXIT_USAGE and "--package is for a cluster" in local.stderr
    both = _kinspect(capture, "--out", tmp_path / "b", "--master", "local[1]", "--remote", "sc://127.0.0.1:1")
    assert both.returncode == EXIT_USAGE and "choose one" in both.stderr
    conf = _kinspect(capture, "--out", tmp_path / "c", "--conf", "spark.executor.memory")
    assert conf.returncode == EXIT_USAGE and "KEY=VALUE" in conf.stderr
    assert not (tmp_path / "env.tar.gz").exists() and not any((tmp_path / d).exists() for d in "abc")


def test_submit_entry_point_prints_its_path_and_runs_the_command():
    path = subprocess.run([sys.executable, "-m", "kinspect.cli.spark_submit", "--path"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert path.endswith("kinspect/cli/spark_submit.py") and os.path.isfile(path)
    helped = subprocess.run([sys.executable, path, "--help"], capture_output=True, text=True, cwd="/")
    assert helped.returncode == 0 and "--package" in helped.stdout and "spark-submit" in helped.stdout


def test_tasks_in_a_python_with_another_kinspect_give_one_line_that_says_how_to_ship_it(tmp_path):
    """Spark's tasks run a Python whose kinspect is another version (a copy of this tree that says
    0.0.9, first on that Python's path): one line naming both versions and --package, exit 4."""
    import shutil

    import kinspect
    other = tmp_path / "other"
    shutil.copytree(os.path.dirname(kinspect.__file__), other / "kinspect",
                    ignore=shutil.ignore_patterns("__pycache__"))
    init = other / "kinspect" / "__init__.py"
    init.write_text(init.read_text().replace(f'__version__ = "{kinspect.__version__}"', '__version__ = "0.0.9"'))
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={other}${{PYTHONPATH:+:$PYTHONPATH}} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    done = _kinspect(PCAPS / "librdkafka-mtu1500.pcap", "--out", tmp_path / "out", "--master", "local[1]",
                     env={**os.environ, "PYSPARK_PYTHON": str(python)})
    assert done.returncode == EXIT_UNFINISHED, done.stderr
    assert "Traceback" not in done.stderr
    line = next(line for line in done.stderr.splitlines() if "kinspect executor:" in line)
    assert f"has kinspect 0.0.9 ({other / 'kinspect'})" in line and f"driver has kinspect {kinspect.__version__}" in line
    assert "--package" in line
