"""Ctrl-C during `kinspect spark` (kinspect/spark/interrupt.py, job._end_unconnected_jvm), sent as
a terminal sends it: SIGINT to the command's whole process group, at two points found by
watching its processes, not by timing. Exit 130, nothing on stderr, and no process of the run
left behind."""

import os
import signal
import struct
import subprocess
import sys
import time

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


def _spark(inputs, out) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kinspect", "spark", *map(str, inputs), "--out", str(out),
                             "--master", "local[1]"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _endless_capture(path) -> None:
    """A pcap of 4 billion empty packets in a sparse file (no disk used): its task decodes for hours."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        f.truncate(64 << 30)


def test_ctrl_c_while_a_task_runs_stops_spark_quietly(tmp_path):
    """A capture whose task would run for hours: Ctrl-C then ends the run with 130 and an empty
    stderr (no py4j tracebacks, no Spark ERRORs), and the JVM and the workers end too."""
    stalled = tmp_path / "endless.pcap"
    _endless_capture(stalled)
    run = _spark([stalled], tmp_path / "out")
    warm = _wait_for(lambda: [p for p, command in _children(run.pid) if "--warm" in command], "the warm daemon")[0]
    _wait_for(lambda: _children(warm), "a worker running the task")
    assert _interrupt(run, _tree(run.pid)) == "\n"  # click's, after the terminal's ^C


def test_ctrl_c_while_the_jvm_starts_leaves_no_jvm_waiting_for_a_driver(tmp_path):
    """Interrupted before it connects, pyspark's launch leaves the JVM it started waiting for a
    driver forever (py4j's server thread is no daemon): kinspect ends it. The input is the endless
    capture, so that a run the signal reaches late is still running (with an empty file, a JVM
    that started from its class archive had finished the whole job before the look that saw it
    ended, and the run exited 3): a SIGINT ignored while the JVM starts still fails the test."""
    stalled = tmp_path / "endless.pcap"
    _endless_capture(stalled)
    run = _spark([stalled], tmp_path / "out")
    jvm = _wait_for(lambda: [p for p, command in _children(run.pid) if "SparkSubmit" in command], "the JVM")
    assert _interrupt(run, jvm) == "\n"


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
