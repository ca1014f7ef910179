"""The local JVM's stderr, less the line Java prints at every start of Spark 4.

Spark 4's launcher adds Java's incubating Vector API module (--add-modules=jdk.incubator.vector),
and Java says so on stderr at every start: "WARNING: Using incubator modules:
jdk.incubator.vector". Java has no switch for it, and it tells a kinspect user nothing. So the
JVM's stderr (and its Python workers', which inherit it) goes into a pipe, and a thread copies it
to ours, less that line.

The pipe exists, and the thread reads it, before the JVM starts: whatever the JVM writes while
pyspark waits for its gateway can never fill the pipe. ``drain()`` waits until the pipe has been
quiet for a moment, so that the lines the JVM wrote before the driver stops reach the terminal.
"""

from __future__ import annotations

import os
import select
import sys
import threading

DROPPED = (b"WARNING: Using incubator modules:",)
QUIET = 0.025  # seconds without a byte after which the pipe counts as drained
LONGEST_LINE = 64 << 10  # bytes of one line held for its end: past it, written as they are


class StderrFilter:
    """Give ``write_end`` to the JVM as its stderr, then call ``launched()``."""

    def __init__(self, out=None):
        self._out = out  # a binary file; None: this process's stderr
        self._read, self.write_end = os.pipe()
        self._quiet = threading.Condition()
        self._quiet_polls = 0  # polls that found the pipe empty; a drain waits for two more
        self._thread = threading.Thread(target=self._copy, name="kinspect JVM stderr", daemon=True)
        self._thread.start()

    def launched(self) -> None:
        """The JVM holds its own copy of the write end: ours is closed, so that the pipe ends
        when the JVM and its workers have."""
        os.close(self.write_end)

    def drain(self, limit: float = 1.0) -> None:
        """Wait, at most ``limit`` s, until every byte written so far has been copied: two polls
        that found the pipe empty, the second begun after this call (the first may have begun
        before it)."""
        with self._quiet:
            target = self._quiet_polls + 2
            self._quiet.wait_for(lambda: self._quiet_polls >= target or not self._thread.is_alive(), limit)

    def _copy(self) -> None:
        partial = b""
        try:
            while True:
                if not select.select([self._read], [], [], QUIET)[0]:
                    if partial:  # a line without its end yet: shown as it is
                        self._write(partial)
                        partial = b""
                    with self._quiet:
                        self._quiet_polls += 1
                        self._quiet.notify_all()
                    continue
                data = os.read(self._read, 1 << 16)
                if not data:
                    break
                *lines, partial = (partial + data).split(b"\n")
                self._write(b"".join(line + b"\n" for line in lines if not line.startswith(DROPPED)))
                if len(partial) > LONGEST_LINE:  # no end in sight: memory stays bounded
                    self._write(partial)
                    partial = b""
            self._write(partial)
        finally:
            os.close(self._read)
            with self._quiet:
                self._quiet_polls += 2  # no more bytes can come: any drain is over
                self._quiet.notify_all()

    def _write(self, data: bytes) -> None:
        if not data:
            return
        out = self._out
        try:
            if out is None:
                out = sys.stderr.buffer
            out.write(data)
            out.flush()
        except (AttributeError, ValueError, OSError):  # no binary stderr, or it was closed
            try:
                sys.stderr.write(data.decode(errors="replace"))
                sys.stderr.flush()
            except (ValueError, OSError):
                pass
