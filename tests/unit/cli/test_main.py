"""kinspect's entry point: whatever happens, one line on stderr and a documented exit code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from kinspect.cli import cli
from kinspect.problems import EXIT_INTERRUPTED, EXIT_UNFINISHED
from tests.conftest import PCAPS, SAMPLES

DEMO = PCAPS / "librdkafka-produce-consume.pcapng"

# A bug stands in for every unexpected exception: the decoder raises what it never should.
BROKEN = """
import sys
import kinspect.cli.decode as decode
class Broken:
    def __init__(self, *args, **kwargs):
        raise KeyError("\\x1b[2Jcleared")
decode.DecodeRun = Broken
from kinspect.cli import main
sys.argv = ["kinspect", "decode", sys.argv[1]]
main()
"""


def kinspect(*args, env=None, **kwargs):
    return subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], capture_output=True,
                          env=env, **kwargs)


def test_an_internal_error_is_one_line_and_exit_4():
    proc = subprocess.run([sys.executable, "-c", BROKEN, str(DEMO)], capture_output=True, text=True)
    assert proc.returncode == EXIT_UNFINISHED
    assert proc.stderr == ("kinspect: internal error: KeyError: '\\x1b[2Jcleared' (please report; "
                           "KINSPECT_DEBUG=1 shows the traceback)\n")


def test_kinspect_debug_shows_the_traceback():
    env = {**os.environ, "KINSPECT_DEBUG": "1"}
    proc = subprocess.run([sys.executable, "-c", BROKEN, str(DEMO)], capture_output=True, text=True,
                          env=env)
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "KeyError" in proc.stderr


@pytest.mark.parametrize("args", [
    ["decode", "--json", DEMO], ["decode", DEMO], ["dump", "--records", SAMPLES / "kafka-4.1.2"],
    ["dump", "--json", SAMPLES / "kafka-4.1.2"], ["validate", SAMPLES / "kafka-4.1.2"],
])
def test_a_reader_that_goes_away_ends_the_run_quietly(args):
    proc = subprocess.Popen([sys.executable, "-m", "kinspect", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(60) == 0
    assert "Traceback" not in stderr and "Exception ignored" not in stderr


def test_usage_errors_exit_2():
    assert kinspect("decode", "--api", "Bogus", DEMO).returncode == 2
    assert kinspect().returncode == 2
    assert kinspect("--version").returncode == 0


def test_ctrl_c_exits_130_with_no_traceback_from_the_workers():
    from tests.unit.cli.test_decode import copies_of
    # a terminal's Ctrl-C reaches a foreground process, which cannot have inherited SIGINT ignored
    # as a suite run in a script's background ('cmd &') would hand it down
    proc = subprocess.Popen([sys.executable, "-m", "kinspect", "decode", "--json", "-j2", "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    proc.stdin.write(copies_of(PCAPS / "kafka41-librdkafka-mtu1500.pcap", 40))  # stdin never ends
    proc.stdin.flush()
    started = time.monotonic()
    while len(open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()) < 2:
        assert time.monotonic() - started < 60, "no workers started"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C does: to the main process and its workers
    assert proc.wait(30) == EXIT_INTERRUPTED
    stderr = proc.stderr.read().decode()
    assert stderr.strip() == ""  # no worker's "Process ForkProcess-1:" and traceback either
    proc.stdin.close()


@pytest.mark.parametrize("command", [[], ["decode"], ["dump"], ["validate"], ["offsets"]])
def test_every_help_documents_every_exit_code(command):
    text = " ".join(CliRunner().invoke(cli, [*command, "--help"]).output.split())
    for code in ("0 ", "1 ", "2 usage error", "3 ", "4 kinspect could not finish", "130 interrupted"):
        assert code in text


# main() as the console script runs it, with an atexit hook that says whether Python's tear-down ran
TEARDOWN = """
import atexit, sys
atexit.register(lambda: print("tear-down ran", file=sys.stderr))
from kinspect.cli import main
sys.argv = ["kinspect", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("args, code", [
    (["decode", "--json", DEMO], 0), (["decode", DEMO], 0), (["decode", "--json", "-j2", DEMO], 0),
    (["decode", "--json", SAMPLES / "kafka-4.1.2" / "no-such.pcap"], 3),
    (["dump", "--json", SAMPLES / "kafka-4.1.2"], 0), (["validate", SAMPLES / "kafka-4.1.2"], 0),
])
def test_decode_dump_and_validate_leave_without_the_tear_down_their_output_whole(args, code):
    proc = subprocess.run([sys.executable, "-c", TEARDOWN, *map(str, args)], capture_output=True)
    assert proc.returncode == code
    assert b"tear-down ran" not in proc.stderr
    in_process = ["-j1" if a == "-j2" else str(a) for a in args]  # -j2's workers write to the real fd
    assert proc.stdout == CliRunner().invoke(cli, in_process).stdout_bytes  # nothing lost


def test_other_commands_end_as_python_does():
    proc = subprocess.run([sys.executable, "-c", TEARDOWN, "offsets", "--help"], capture_output=True)
    assert proc.returncode == 0 and proc.stderr == b"tear-down ran\n"


def test_a_profiled_run_ends_as_python_does_so_the_profile_is_written(tmp_path):
    out = tmp_path / "decode.prof"
    proc = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "kinspect", "decode",
                           "--json", DEMO], capture_output=True)
    assert proc.returncode == 0 and out.stat().st_size > 0


@pytest.mark.parametrize("missing, argv, install", [
    ("scapy", ["sniff", "lo", "--duration", "1"], "pip install --force-reinstall kinspect"),
    ("rich", ["decode", "--summary", str(PCAPS / "librdkafka-mtu1500.pcap")], "pip install --force-reinstall kinspect"),
])
def test_a_missing_package_is_one_line_saying_what_to_install(tmp_path, missing, argv, install):
    """Not "internal error: ModuleNotFoundError ... (please report)" with exit 4."""
    program = ("import sys; sys.modules[sys.argv[1]] = None; from kinspect.cli import main; "
               "sys.argv = ['kinspect', *sys.argv[2:]]; main()")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    proc = subprocess.run([sys.executable, "-c", program, missing, *argv], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("kinspect: ") and repr(missing) in lines[-1] and install in lines[-1]
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
