"""jvm_stderr.StderrFilter with real child processes writing into it, as the JVM does."""

import io
import subprocess
import sys
import threading
import time

from kinspect.spark.jvm_stderr import StderrFilter


class _Collected(io.BytesIO):
    """A BytesIO that can be read while the filter's thread writes to it."""

    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()

    def write(self, data):
        with self.lock:
            return super().write(data)

    def text(self) -> bytes:
        with self.lock:
            return self.getvalue()


def _child(code: str, stderr: StderrFilter) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", code], stderr=stderr.write_end)
    stderr.launched()
    return child


def test_the_incubator_warning_is_dropped_and_every_other_line_kept_in_order():
    out = _Collected()
    stderr = StderrFilter(out)
    child = _child(
        "import sys\n"
        "w = sys.stderr.write\n"
        "w('WARNING: Using incubator modules: jdk.incubator.vector\\n')\n"
        "w('11:45:09 ERROR Executor: Exception in task 0.0\\n')\n"
        "w('WARNING: something else the user must see\\n')\n"
        "w('a last line without its end')\n", stderr)
    assert child.wait(30) == 0
    stderr.drain(5)
    assert out.text() == (b"11:45:09 ERROR Executor: Exception in task 0.0\n"
                          b"WARNING: something else the user must see\n"
                          b"a last line without its end")


def test_a_flood_before_anyone_waits_never_blocks_the_writer():
    """The JVM may write more than a pipe holds before pyspark has its gateway: the filter's
    thread reads from the start, so the writer finishes (a blocked writer would time out)."""
    out = _Collected()
    stderr = StderrFilter(out)
    child = _child("import sys\nfor i in range(50_000): sys.stderr.write('line %06d of the flood\\n' % i)\n", stderr)
    assert child.wait(30) == 0
    stderr.drain(5)
    lines = out.text().splitlines()
    assert len(lines) == 50_000 and lines[-1] == b"line 049999 of the flood"


def test_one_drain_copies_what_was_written_before_it_while_the_writer_lives():
    """As at a driver's exit: the JVM is still up (holding the pipe), its last line just written.
    The child says on stdout when its stderr line is out; one drain() then has copied it."""
    for _ in range(20):  # a race would show in some of them
        out = _Collected()
        stderr = StderrFilter(out)
        child = subprocess.Popen([sys.executable, "-c",
                                  "import sys, time\nsys.stderr.write('ERROR last words\\n'); sys.stderr.flush()\n"
                                  "print('written', flush=True)\ntime.sleep(30)\n"],
                                 stderr=stderr.write_end, stdout=subprocess.PIPE)
        stderr.launched()
        try:
            assert child.stdout.readline() == b"written\n"
            started = time.monotonic()
            stderr.drain(2)
            assert out.text() == b"ERROR last words\n"
            assert time.monotonic() - started < 0.5  # quiet after a poll or two, not the whole limit
        finally:
            child.kill()
            child.wait()


def test_a_stream_without_line_ends_is_passed_on_while_it_lasts():
    """A writer that never ends a line and never pauses: the filter does not hold it all for the
    line's end (memory would grow with it), it passes it on as it comes."""
    out = _Collected()
    stderr = StderrFilter(out)
    child = _child("import os, time\nfor _ in range(400): os.write(2, b'x' * 65536); time.sleep(0.005)\n", stderr)
    try:
        time.sleep(1.0)
        assert child.poll() is None  # still writing, never quiet for a poll
        assert len(out.text()) > 1 << 20
    finally:
        child.kill()
        child.wait()
