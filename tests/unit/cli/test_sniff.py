"""kinspect sniff's rotation options (--write PATH --rotate-mb N --rotate-seconds S --keep K): what is
a usage error, and a real run on lo that rotates on time with no traffic (capture/write.py has the
rotation itself; tests/integration/test_sniff_rotate.py runs it under real clients)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kinspect(*args, cwd, timeout=60):
    return subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    (["--rotate-mb", "1"], "--rotate-mb and --rotate-seconds need --write PATH"),
    (["--rotate-seconds", "5", "--keep", "2"], "--rotate-mb and --rotate-seconds need --write PATH"),
    (["--write", "w.pcapng", "--keep", "2"], "--keep needs --rotate-mb or --rotate-seconds"),
    (["--keep", "2"], "--keep needs --rotate-mb or --rotate-seconds"),
    (["--write", "w.pcapng", "--rotate-mb", "0"], "Invalid value for '--rotate-mb': 0.0 is not in the range x>0"),
    (["--write", "w.pcapng", "--rotate-seconds", "-1"], "Invalid value for '--rotate-seconds'"),
    (["--write", "w.pcapng", "--rotate-mb", "nan"], "Invalid value for '--rotate-mb': nan is not a finite number"),
    (["--write", "w.pcapng", "--rotate-seconds", "inf"], "Invalid value for '--rotate-seconds': inf is not a finite"),
    (["--write", "w.pcapng", "--rotate-mb", "1", "--keep", "0"], "Invalid value for '--keep': 0 is not in the range"),
    (["--write", "none/w.pcapng", "--rotate-mb", "1"], "--write none/w.pcapng: no directory"),
    (["--write", "w.pcapng", "--rotate-mb", "1", "--keylog", "w_00002.pcapng"],
     "--keylog w_00002.pcapng is a name of the --write rotation"),
])
def test_rotation_options_used_wrongly_are_a_usage_error_before_anything_is_written(tmp_path, args, message):
    proc = kinspect("sniff", "lo", "--duration", "1", *args, cwd=tmp_path)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert proc.returncode == 2 and len(errors) == 1 and message in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and os.listdir(tmp_path) == []


def test_an_idle_capture_rotates_on_time_and_keeps_the_newest_files(tmp_path):
    """No traffic on the port filtered: files still rotate every 0.3 s; the newest 2 stay, each an
    empty but whole pcapng; an earlier file of the same name is neither replaced nor deleted."""
    (tmp_path / "idle_00001.pcapng").write_bytes(b"an earlier run's")
    proc = kinspect("sniff", "lo", "--backend", "ring", "--filter", f"tcp port {free_port()}", "--duration", "2",
                    "--write", "idle.pcapng", "--rotate-seconds", "0.3", "--keep", "2", cwd=tmp_path)
    assert proc.returncode == 1 and "no Kafka traffic seen" in proc.stderr, proc.stderr
    m = re.search(r"kinspect: --write: (\d+) files written by rotation; kept 2, idle_(\d{5}).pcapng to "
                  r"idle_(\d{5}).pcapng in \.", proc.stderr)
    assert m, proc.stderr
    written, first, last = map(int, m.groups())
    assert written >= 4 and (first, last) == (written, written + 1)  # numbered on past the earlier file
    assert sorted(os.listdir(tmp_path)) == ["idle_00001.pcapng", f"idle_{first:05d}.pcapng", f"idle_{last:05d}.pcapng"]
    assert (tmp_path / "idle_00001.pcapng").read_bytes() == b"an earlier run's"
    for number in (first, last):
        out = subprocess.run(["tshark", "-r", str(tmp_path / f"idle_{number:05d}.pcapng")], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0 and out.stdout == "", out.stderr


def test_a_rotated_file_that_cannot_be_written_stops_the_capture_with_one_line(tmp_path):
    """The directory removed while sniff rotates into it: exit 3 and a line naming the file, not an
    internal error."""
    ring = tmp_path / "ring"
    ring.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "kinspect", "sniff", "lo", "--backend", "ring", "--filter",
                             f"tcp port {free_port()}", "--duration", "20", "--write", str(ring / "c.pcapng"),
                             "--rotate-seconds", "0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "kinspect: capturing on lo" in proc.stderr.readline()
    shutil.rmtree(ring)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert re.search(r"^kinspect: --write: cannot write \S*/ring/c_\d{5}\.pcapng: No such file or directory; the "
                     r"capture stopped there$", err, re.M), err
    assert "Traceback" not in err and "internal error" not in err


def test_a_capture_that_cannot_start_leaves_no_rotated_file(tmp_path):
    proc = kinspect("sniff", "nosuchif0", "--write", "x.pcapng", "--rotate-mb", "1", cwd=tmp_path)
    assert proc.returncode == 2 and "no interface named 'nosuchif0'" in proc.stderr, proc.stderr
    assert os.listdir(tmp_path) == []
