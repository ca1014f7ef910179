"""Run kinspect in a subprocess under the memory bound of issue 10 and a hang timeout, and
measure what the run did: exit code, peak RSS, wall and CPU time, output size, raw control
bytes, tracebacks, and the lines that speak of a bound.

Output is read as it comes and never held whole (a million records print gigabytes): the
runner keeps its head and tail, counts it, and scans every chunk.

The address-space limit (``ulimit -v``) stands for the 512 MiB peak-RSS target. A trivial run
(`decode --json` of a 36 KB capture, default workers, at 7ad40dd) measured VmPeak 42 MB
against VmHWM 38 MB: kinspect maps little it does not touch. The limit gives 64 MiB beyond the
target for what is mapped but not resident (one decompression bound, thread stacks); the peak
RSS itself is read from wait4() and checked against the target separately.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MIB = 1 << 20
RSS_TARGET = 512 * MIB
ADDRESS_SPACE_LIMIT = RSS_TARGET + 64 * MIB
HANG_TIMEOUT = float(os.environ.get("KINSPECT_HOSTILE_TIMEOUT", "60"))
# A directory holding a kinspect package to run instead of the one the interpreter imports
# (a snapshot, see tests/bench/measure.py): `python -m kinspect` runs in it.
SNAPSHOT = os.environ.get("KINSPECT_HOSTILE_SNAPSHOT")

KEEP = 64 * 1024  # bytes of head and of tail kept of each stream
# C0 controls and DEL, except tab and newline: what must never reach a terminal raw
CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")
_NOT_CONTROL = bytes(b for b in range(256) if not CONTROL.match(bytes((b,))))
# on a terminal rich styles text (SGR: ESC [ ... m), draws progress (hide/show the cursor,
# erase the line, cursor up, CR) and the terminal ends lines with CR LF: none of it is input
TERMINAL_STYLING = re.compile(rb"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[2K|\x1b\[[0-9]*A|\r")
BOUND_WORDS = re.compile(rb"\b(?:[Bb]ound|[Ll]imit)s?\b")
OPTION = re.compile(rb"--max-[a-z][a-z-]*")
CRASH = re.compile(rb"Traceback \(most recent call last\)|Fatal Python error|Segmentation fault")
_BOUND_STEMS = (b"ound", b"imit")
_CRASH_STEMS = (b"Traceback", b"Fatal Python", b"Segmentation")


@dataclass
class StreamScan:
    """What one output stream held, scanned chunk by chunk."""
    size: int = 0
    head: bytearray = field(default_factory=bytearray)
    tail: bytes = b""
    controls: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, context)
    bound_lines: list[bytes] = field(default_factory=list)  # speak of a bound, name no option
    options: set[str] = field(default_factory=set)
    crash: bool = False
    _carry: bytes = b""
    _scanned: int = 0

    def feed(self, chunk: bytes, terminal: bool = False) -> None:
        self.size += len(chunk)
        if len(self.head) < KEEP:
            self.head += chunk[:KEEP - len(self.head)]
        self.tail = (self.tail + chunk)[-KEEP:]
        data = self._carry + chunk
        cut = data.rfind(b"\n") + 1  # whole lines are scanned; a partial one waits for its end
        if cut == 0:
            if len(data) < 1 << 20:
                self._carry = data
                return
            cut = len(data)
        self._scan(data[:cut], terminal)
        self._carry = data[cut:]

    def close(self, terminal: bool = False) -> None:
        if self._carry:
            self._scan(self._carry, terminal)
            self._carry = b""

    def _scan(self, lines: bytes, terminal: bool) -> None:
        start = self._scanned
        self._scanned += len(lines)
        plain = TERMINAL_STYLING.sub(b"", lines) if terminal else lines
        # each regex runs only where a byte scan (many times faster) says it can match: the
        # runner must read gigabytes of output faster than kinspect writes them
        if len(self.controls) < 5 and plain.translate(None, _NOT_CONTROL):
            for match in CONTROL.finditer(plain):
                at = match.start()
                self.controls.append((start + at, plain[max(0, at - 40):at + 40]))
                if len(self.controls) >= 5:
                    break
        if b"--max-" in lines:
            self.options.update(m.decode() for m in OPTION.findall(lines))
        if len(self.bound_lines) < 5 and any(word in lines for word in _BOUND_STEMS):
            for match in BOUND_WORDS.finditer(lines):
                line = _line_around(lines, match.start())
                if not OPTION.search(line):
                    self.bound_lines.append(line[:300])
                    if len(self.bound_lines) >= 5:
                        break
        if not self.crash and any(word in lines for word in _CRASH_STEMS) and CRASH.search(lines):
            self.crash = True


def _line_around(data: bytes, at: int, reach: int = 4096) -> bytes:
    """The line holding data[at], at most ``reach`` bytes either side (JSON lines run to MBs)."""
    start = data.rfind(b"\n", max(0, at - reach), at) + 1 or max(0, at - reach)
    end = data.find(b"\n", at, at + reach)
    return data[start:end if end >= 0 else at + reach]


@dataclass
class Run:
    args: list
    exit_code: int | None  # None: killed at the hang timeout
    signal: int | None  # the signal that ended it, if one did
    timed_out: bool
    wall: float
    cpu: float  # user + system of kinspect and the workers it waited for
    peak_rss: int  # bytes, the largest process of the tree (wait4's ru_maxrss)
    tree_pss: int  # bytes, the largest summed PSS of the process tree seen by sampling
    stdout: StreamScan
    stderr: StreamScan

    def crash_head(self) -> str:
        """The last lines of stderr: a traceback's end, or the messages."""
        scan = self.stderr
        text = bytes(scan.head) if scan.size <= KEEP else scan.tail
        lines = [line for line in text.decode("utf-8", "replace").splitlines() if line.strip()]
        return "\n".join(lines[-6:])


def kinspect_command(args) -> list:
    return [sys.executable, "-m", "kinspect", *args]


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(args, timeout: float = HANG_TIMEOUT, terminal: bool = False, cwd: Path | None = None,
        memory_limit: bool = True, server=None) -> Run:
    """kinspect ``args`` (str or bytes each) in its own session under the limits.

    ``terminal``: stdout is a pseudo-terminal (rich's styled output) instead of a pipe.
    ``cwd``: where `python -m kinspect` runs, so a kinspect package there is the one run.
    ``server``: a forkserver.ForkServer that forks the run from a Python that has imported kinspect
    (not with a snapshot: the server's kinspect is the one the interpreter imports).
    """
    cwd = cwd or SNAPSHOT
    out_scan, err_scan = StreamScan(), StreamScan()
    if terminal:
        import pty
        master, slave = pty.openpty()
        os.set_blocking(master, True)
    started = time.monotonic()
    if server is not None and SNAPSHOT is None:
        child = _forked(server, args, slave if terminal else None, cwd, memory_limit)
    else:
        child = _spawned(args, slave if terminal else None, cwd, memory_limit)
    if terminal:
        os.close(slave)
        out_reader = threading.Thread(target=_drain_fd, args=(master, out_scan, True))
    else:
        out_reader = threading.Thread(target=_drain, args=(child.stdout, out_scan))
    err_reader = threading.Thread(target=_drain, args=(child.stderr, err_scan))
    out_reader.start()
    err_reader.start()
    tree_peak = [0]
    done = threading.Event()
    sampler = threading.Thread(target=_sample_tree, args=(child.pid, done, tree_peak))
    sampler.start()
    timed_out = threading.Event()
    killer = threading.Timer(timeout, _kill_group, args=(child.pid, timed_out))
    killer.start()
    status, cpu, peak_rss = child.wait()
    wall = time.monotonic() - started
    killer.cancel()
    done.set()
    _kill_group(child.pid, None)  # workers left behind by a dying parent
    out_reader.join()
    err_reader.join()
    sampler.join()
    if terminal:
        os.close(master)
    code = os.waitstatus_to_exitcode(status)
    return Run(args=list(args), exit_code=None if timed_out.is_set() else (code if code >= 0 else None),
               signal=-code if code < 0 else None, timed_out=timed_out.is_set(), wall=wall,
               cpu=cpu, peak_rss=peak_rss, tree_pss=tree_peak[0], stdout=out_scan, stderr=err_scan)


@dataclass
class _Child:
    pid: int
    stdout: object  # a binary stream, or None when stdout is a terminal
    stderr: object
    wait: Callable[[], tuple[int, float, int]]  # → (wait status, CPU seconds, peak RSS bytes)


def _spawned(args, terminal_fd: int | None, cwd, memory_limit: bool) -> _Child:
    """`python -m kinspect ARGS`, started afresh."""
    proc = subprocess.Popen(kinspect_command(args), stdin=subprocess.DEVNULL,
                            stdout=terminal_fd if terminal_fd is not None else subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=cwd, start_new_session=True,
                            preexec_fn=_limits if memory_limit else None, env=environment())

    def wait():
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return status, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024
    return _Child(proc.pid, proc.stdout, proc.stderr, wait)


def _forked(server, args, terminal_fd: int | None, cwd, memory_limit: bool) -> _Child:
    """The same run, forked by the server: its descriptors passed to it, then closed here."""
    out_read, out_write = (None, terminal_fd) if terminal_fd is not None else os.pipe()
    err_read, err_write = os.pipe()
    stdin = os.open(os.devnull, os.O_RDONLY)
    try:
        launched = server.launch(args, stdin, out_write, err_write, os.fspath(cwd) if cwd else None,
                                 (ADDRESS_SPACE_LIMIT,) if memory_limit else None)
    finally:
        os.close(stdin)
        os.close(err_write)
        if out_read is not None:
            os.close(out_write)

    def wait():
        status, user, system, peak = launched.wait()
        return status, user + system, peak
    return _Child(launched.pid, os.fdopen(out_read, "rb") if out_read is not None else None,
                  os.fdopen(err_read, "rb"), wait)


def environment() -> dict:
    return {**os.environ, "COLUMNS": "200", "LINES": "50"}


def _drain(stream, scan: StreamScan) -> None:
    while chunk := stream.read1(1 << 20):
        scan.feed(chunk)
    scan.close()
    stream.close()


def _drain_fd(fd: int, scan: StreamScan, terminal: bool) -> None:
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except OSError:  # EIO: the terminal's other side closed
            break
        if not chunk:
            break
        scan.feed(chunk, terminal)
    scan.close(terminal)


def _kill_group(pid: int, flag: threading.Event | None) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    if flag is not None:
        flag.set()


def _sample_tree(pid: int, done: threading.Event, peak: list) -> None:
    """Every 50 ms, the summed PSS of the processes in kinspect's session: its workers too,
    even orphaned ones, with the pages forked workers share counted once."""
    while not done.wait(0.05):
        total = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[3]) != pid:  # the session id
                        continue
                with open(f"/proc/{entry.name}/smaps_rollup", "rb") as f:
                    total += int(re.search(rb"\nPss:\s+(\d+)", f.read()).group(1)) * 1024
            except (OSError, AttributeError):
                continue
        peak[0] = max(peak[0], total)
