"""Ctrl-C during `kinspect spark` (kinspect/spark/interrupt.py, job._end_unconnected_jvm), sent as
a terminal sends it: SIGINT to the command's whole process group, at two points found by
watching its processes, not by timing. Exit 130, nothing on stderr, and no process of the run
left behind. The run starts with SIGINT at its default, as a terminal's foreground command does,
or ignored, as `cmd &` in a script starts it (and a suite run that way hands it down)."""

import os
import signal
import struct
import subprocess
import sys
import time

import pytest

from kinspect.spark import job

WITHIN = 60  # seconds


def _children(pid: int) -> list[tuple[int, str]]:
    return [(child, command.replace(b"\0", b" ").decode(errors="replace")) for child, command in job.children(pid)]


def _tree(pid: int) -> list[int]:
    kids = [child for child, _ in _children(pid)]
    return kids + [grandchild for kid in kids for grandchild in _tree(kid)]


def _wait_for(condition, what: str):
    deadline = time.monotonic() + WITHIN
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.01)
    raise AssertionError(f"never saw {what}")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _interrupt(run: subprocess.Popen, processes: list[int]) -> str:
    os.killpg(run.pid, signal.SIGINT)
    _, stderr = run.communicate(timeout=WITHIN)
    assert run.returncode == 130, stderr
    deadline = time.monotonic() + WITHIN
    while any(_alive(p) for p in processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in processes if _alive(p)], "processes of the run left behind"
    return stderr


STARTS = {"in a terminal": signal.SIG_DFL, "in a script's background": signal.SIG_IGN}


@pytest.fixture
def runs():
    """The runs a test starts; any still going at its end (a failed test) is ended with its JVM."""
    started: list[subprocess.Popen] = []
    yield started
    for run in started:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()


def _spark(runs, inputs, out, sigint=signal.SIG_DFL, env=None) -> subprocess.Popen:
    """``sigint``: the disposition the run inherits (STARTS)."""
    run = subprocess.Popen([sys.executable, "-m", "kinspect", "spark", *map(str, inputs), "--out", str(out),
                            "--master", "local[1]"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, start_new_session=True, env=env,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
    runs.append(run)
    return run


def _endless_capture(path) -> None:
    """A pcap of 4 billion empty packets in a sparse file (no disk used): its task decodes for hours."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        f.truncate(64 << 30)


def _archive_jobs(cache) -> list[int]:
    """Processes of jvmcache's background dump into ``cache``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        if b"kinspect.spark.jvmcache" in command and str(cache).encode() in command:
            found.append(int(pid))
    return found


def test_ctrl_c_while_a_task_runs_stops_spark_quietly(tmp_path, runs):
    """A capture whose task would run for hours: Ctrl-C then ends the run with 130 and an empty
    stderr (no py4j tracebacks, no Spark ERRORs), and the JVM and the workers end too. The run is
    a first one (an empty kinspect cache): interrupted, it starts no background job to save the
    JVM's classes, says nothing of one, and leaves no class list."""
    stalled, cache = tmp_path / "endless.pcap", tmp_path / "cache"
    _endless_capture(stalled)
    run = _spark(runs, [stalled], tmp_path / "out", env={**os.environ, "KINSPECT_CACHE_DIR": str(cache)})
    warm = _wait_for(lambda: [p for p, command in _children(run.pid) if "--warm" in command], "the warm daemon")[0]
    _wait_for(lambda: _children(warm), "a worker running the task")
    assert os.listdir(cache / "spark-jvm")  # the JVM lists its classes
    try:
        assert _interrupt(run, _tree(run.pid)) == "\n"  # click's, after the terminal's ^C
        assert not _archive_jobs(cache)
        assert os.listdir(cache / "spark-jvm") == []
    finally:
        for pid in _archive_jobs(cache):
            os.killpg(pid, signal.SIGKILL)  # its own session: the dump's java with it


@pytest.mark.parametrize("start", STARTS)
def test_ctrl_c_while_the_jvm_starts_leaves_no_jvm_waiting_for_a_driver(tmp_path, runs, start):
    """Interrupted before it connects, pyspark's launch leaves the JVM it started waiting for a
    driver forever (py4j's server thread is no daemon): kinspect ends it. The input is the endless
    capture, so that a run the signal reaches late is still running (with an empty file, a JVM
    that started from its class archive had finished the whole job before the look that saw it
    ended, and the run exited 3): a SIGINT ignored while the JVM starts still fails the test.
    Started with SIGINT ignored, the run used to ignore it until pyspark's SparkContext installed
    its handler, and then ran the whole job: the CI failure where the run was still going 60 s
    after the signal."""
    stalled = tmp_path / "endless.pcap"
    _endless_capture(stalled)
    run = _spark(runs, [stalled], tmp_path / "out", STARTS[start])
    # the launch script (spark-submit, then spark-class: the same process becomes the JVM)
    jvm = _wait_for(lambda: [p for p, command in _children(run.pid) if "SparkSubmit" in command], "the JVM")
    assert _interrupt(run, jvm) == "\n"


def test_ctrl_c_once_a_first_jvm_runs_leaves_no_class_list(tmp_path, runs):
    """A first run (an empty kinspect cache) interrupted once its JVM runs and lists its classes,
    before the session is up: the JVM ends, and its class list goes with it."""
    stalled, cache = tmp_path / "endless.pcap", tmp_path / "cache"
    _endless_capture(stalled)
    run = _spark(runs, [stalled], tmp_path / "out", env={**os.environ, "KINSPECT_CACHE_DIR": str(cache)})
    _wait_for(lambda: (cache / "spark-jvm").is_dir() and os.listdir(cache / "spark-jvm"), "the JVM's class list")
    jvm = [p for p, command in _children(run.pid) if "SparkSubmit" in command]
    assert _interrupt(run, jvm) == "\n"
    assert os.listdir(cache / "spark-jvm") == []


def test_a_run_that_does_not_end_after_ctrl_c_is_ended_by_the_watchdog():
    """Whatever the main thread does after a Ctrl-C (here: a handler that swallows it, and a
    sleep), the run ends with 130 within interrupt.GRACE seconds, and says only the newline."""
    code = ("import signal, time\n"
            "from kinspect.spark import interrupt\n"
            "interrupt.GRACE = 1.0\n"
            "with interrupt.Interrupts():\n"
            "    signal.signal(signal.SIGINT, lambda *_: None)\n"
            "    print('ready', flush=True)\n"
            "    time.sleep(60)\n")
    run = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    assert run.stdout.readline() == "ready\n"
    started = time.monotonic()
    os.killpg(run.pid, signal.SIGINT)
    _, stderr = run.communicate(timeout=30)
    assert run.returncode == 130 and stderr == "\n"
    assert time.monotonic() - started < 20  # not the 60 s sleep


def test_a_run_started_with_sigint_ignored_takes_it():
    """As pyspark's SparkContext and Python workers do whatever the process inherited: a Ctrl-C
    that reaches a run started by `cmd &` in a script ends it at any moment, not only once the
    session is up."""
    code = ("import time\n"
            "from kinspect.spark import interrupt\n"
            "try:\n"
            "    with interrupt.Interrupts():\n"
            "        print('ready', flush=True)\n"
            "        time.sleep(60)\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted', flush=True)\n")
    run = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert run.stdout.readline() == "ready\n"
    os.killpg(run.pid, signal.SIGINT)
    try:
        stdout, stderr = run.communicate(timeout=30)
    finally:
        run.kill()
    assert (stdout, stderr, run.returncode) == ("interrupted\n", "", 0)
