"""Ctrl-C during `kinspect spark`: Spark stopped, and a KeyboardInterrupt (exit 130) without
tracebacks, whatever the main thread was doing.

pyspark's SIGINT handler (SparkContext installs it) cancels the jobs through py4j from the main
thread, which mostly waits inside a py4j call on the same pinned connection ("reentrant call"),
then raises KeyboardInterrupt there: py4j logs tracebacks through the root logger and turns it
into a Py4JError, and Spark logs every task it kills. Here instead:

- every SIGINT is noted from the start through a wakeup fd (written whichever Python handler runs,
  pyspark's included), and an exception that ends the work after one is the interruption's;
- once the session is up, the first SIGINT silences Spark's log and stops its SparkContext from
  another thread (its own py4j connection): the call the main thread waits in fails at once, and
  so would any later one. A second Ctrl-C raises KeyboardInterrupt at once;
- py4j's log records are dropped once a SIGINT has come;
- whatever Spark does then, the run ends within GRACE seconds of the first SIGINT: a thread that
  watches the wakeup fd ends Spark's JVM and exits 130 if the main thread has not by then.

A process started with SIGINT ignored (``cmd &`` in a script, which runs it in the terminal's
foreground process group) takes it all the same, from ``__enter__`` on. Python leaves an inherited
SIG_IGN in place, but pyspark does not: its SparkContext installs a handler, and its Python workers
the default one, whatever the process inherited. So such a run ignored a Ctrl-C while its JVM
started, then ran its whole job (a CI check of the suite, run that way, waited 60 s for it), and
a Ctrl-C once the session was up ended it.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
import threading

GRACE = 15.0  # seconds from the first SIGINT to the watchdog's exit


class Interrupts:
    """``with Interrupts() as interrupts:`` around the work; ``interrupts.stop_spark_on_sigint(spark)``
    once the session is up."""

    def __enter__(self) -> "Interrupts":
        self.seen = self._watched = False
        self._read, self._write = os.pipe()
        for fd in (self._read, self._write):
            os.set_blocking(fd, False)
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._previous_handler = signal.getsignal(signal.SIGINT)
        if self._previous_handler == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # as pyspark does later on
        logging.getLogger().addFilter(self._quiet_py4j)  # py4j logs through the root logger
        self._done_read, self._done_write = os.pipe()
        self._watchdog = threading.Thread(target=self._watch, name="kinspect Ctrl-C watchdog", daemon=True)
        self._watchdog.start()
        return self

    def _watch(self) -> None:
        """Waits for the first SIGINT (a byte on the wakeup fd) or the end of the work; after a
        SIGINT, gives the main thread GRACE seconds to end the run, then ends it."""
        while True:
            ready = select.select([self._read, self._done_read], [], [])[0]
            if self._done_read in ready:
                return
            try:
                if bytes([signal.SIGINT]) in os.read(self._read, 4096):
                    self._watched = True  # not self.seen: the handler's own "a second Ctrl-C?"
                    break
            except BlockingIOError:
                pass
        if select.select([self._done_read], [], [], GRACE)[0]:
            return
        from kinspect.spark.job import _end_unconnected_jvm
        _end_unconnected_jvm()  # the JVM this process started, connected or not
        try:
            sys.stderr.write("\n")
            sys.stderr.flush()
        finally:
            os._exit(130)

    def _quiet_py4j(self, record: logging.LogRecord) -> bool:
        return not (f"{os.sep}py4j{os.sep}" in record.pathname and self._noted())

    def stop_spark_on_sigint(self, spark) -> None:
        if not hasattr(spark, "sparkContext"):
            return  # Spark Connect: its client handles Ctrl-C itself

        def on_sigint(signum, frame):
            if self.seen:
                raise KeyboardInterrupt  # a second Ctrl-C: not waiting for Spark
            self.seen = True
            threading.Thread(target=_stop, args=(spark.sparkContext,), name="kinspect Ctrl-C", daemon=True).start()
        signal.signal(signal.SIGINT, on_sigint)

    def interrupted(self) -> bool:
        """Whether a SIGINT has come since ``__enter__``."""
        return self._noted()

    def _noted(self) -> bool:
        try:
            self.seen |= bytes([signal.SIGINT]) in os.read(self._read, 4096)
        except BlockingIOError:
            pass
        return self.seen or self._watched

    def __exit__(self, kind, error, trace) -> bool:
        os.write(self._done_write, b"x")
        self._watchdog.join()
        os.close(self._done_read)
        os.close(self._done_write)
        signal.set_wakeup_fd(self._previous_fd)
        signal.signal(signal.SIGINT, self._previous_handler)
        interrupted = self._noted()
        logging.getLogger().removeFilter(self._quiet_py4j)  # before its pipe closes: it reads there
        os.close(self._read)
        os.close(self._write)
        if error is not None and not isinstance(error, KeyboardInterrupt) and interrupted:
            raise KeyboardInterrupt from None
        return False


def _stop(context) -> None:
    """Spark's log silenced, then its SparkContext stopped (the JVM's: pyspark's own stop, run
    later by the command, finishes the Python side)."""
    try:
        context.setLogLevel("OFF")
        context._jsc.stop()
    except Exception:
        pass  # stopped already, or the JVM is gone: the main thread fails either way
