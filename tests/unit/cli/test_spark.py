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
    """In this process (CliRunner): its JVM stays up for tests/unit/spark's session."""
    garbage = tmp_path / "in" / "garbage.pcap"
    garbage.parent.mkdir()
    garbage.write_bytes(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n" * 40)
    captures = [PCAPS / "librdkafka-mtu1500.pcap", REALDATA / "go-sniffer/kafka.pcap"]
    done = CliRunner().invoke(cli, ["spark", *map(str, captures), str(garbage.parent), "--out", str(tmp_path / "out"),
                                    "--master", "local[2]", "--summary"])
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
