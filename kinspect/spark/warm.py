"""A warm start for the Python daemon of local Spark tasks (daemon.py).

The daemon Spark starts for a job's first task imports pandas, pyarrow, pyspark's worker and
kinspect's decoder before it can fork a worker: 0.6 s of one CPU (1.05 s with pyspark from its
zip, see daemon.py) on the path of every run, while the JVM has planned the job and waits. A warm
start does those imports earlier, while the JVM starts and plans (it keeps about one of two CPUs
busy then):

- the driver, before it launches the JVM, binds a Unix socket in a private directory and starts
  ``python -m kinspect.spark.daemon --warm FD SOCKET`` with it: that process imports, and waits;
- the JVM inherits ``KINSPECT_WARM_DAEMON`` (the socket) and passes it to the daemon it starts
  (daemon.py), which connects, hands over its standard streams (the JVM's pipes) with its
  command line, environment, working directory and sys.path, and then only waits for the warm
  process, passing on the SIGTERM with which Spark stops it;
- the warm process takes the streams and the settings, and runs pyspark's daemon in their place.

One hand-over per warm process. The warm process refuses (and the daemon imports as it always
did) when it was started unlike the daemon: another interpreter or flags, other values of the
variables read at interpreter start or import (PYTHONHASHSEED...), or a preloaded package found
elsewhere on the daemon's sys.path. It ends without taking anything when the driver closes its
stdin (the driver's ``close()``, or its exit)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys

ENV = "KINSPECT_WARM_DAEMON"  # the warm process's socket, in the daemon's environment
PRELOADED = ("pandas", "pyarrow", "pyspark", "kinspect", "numpy")
READY_WITHIN = 20.0  # seconds the daemon waits for a warm process still importing
STARTUP_PREFIXES = ("OMP_", "OPENBLAS_", "MKL_", "NUMEXPR_", "ARROW_")
_LENGTH = struct.Struct(">I")
LONGEST_MESSAGE = 1 << 20  # bytes: a daemon's settings take a few KB; a longer length is a lie


def startup_env(env) -> dict:
    """The variables the interpreter or the preloaded packages read as they start: CPython's
    PYTHON* (not PYTHONPATH, which sys.path carries, nor Spark's PYTHON_* settings) and the
    thread-pool and Arrow settings of numpy and pyarrow."""
    return {k: v for k, v in env.items()
            if (k.startswith("PYTHON") and not k.startswith("PYTHON_") and k != "PYTHONPATH")
            or k.startswith(STARTUP_PREFIXES)}


class Warm:
    """The driver's side: the warm process, and ``env`` for the JVM to inherit."""

    def __init__(self, process, directory: str, address: str):
        self.process, self.directory, self.address = process, directory, address

    @property
    def env(self) -> dict:
        return {ENV: self.address}

    @classmethod
    def start(cls, daemon_env: dict) -> "Warm | None":
        """A warm process started with the variables of ``daemon_env`` (what Spark will set in its
        daemon's environment: PYTHONHASHSEED...) over this process's; None where it cannot be
        (no pidfd: not Linux)."""
        import atexit
        import subprocess
        import tempfile
        if not hasattr(os, "pidfd_open"):
            return None
        directory = tempfile.mkdtemp(prefix="kinspect-warm-")  # mode 0700: our uid alone connects
        address = os.path.join(directory, "daemon.sock")
        python = os.environ.get("PYSPARK_PYTHON", sys.executable)  # the daemon's (job.session)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:  # there before any daemon
            listener.bind(address)
            listener.listen(1)
            # its safe path (PYTHONSAFEPATH: -P) keeps the working directory off sys.path, as the
            # daemon's does (job.SAFE_PATH); a daemon started without it is refused (its flags differ)
            process = subprocess.Popen([python, "-m", "kinspect.spark.daemon", "--warm", str(listener.fileno()), address],
                                       stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       env={**os.environ, **daemon_env, "PYTHONSAFEPATH": "1"},
                                       pass_fds=[listener.fileno()], cwd=directory)
        warm = cls(process, directory, address)
        atexit.register(warm.close, wait=0)  # an exit without stop(): no directory left behind
        return warm

    def close(self, wait: float = 2.0) -> None:
        """Ends the warm process if it took no daemon's place (its stdin closes), reaps it once
        it has ended (a daemon it became ends when Spark stops it), and removes its directory."""
        import atexit
        import shutil
        import subprocess
        atexit.unregister(self.close)
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(wait)
        except subprocess.TimeoutExpired:
            pass  # a daemon still: it ends when the JVM closes its stdin
        shutil.rmtree(self.directory, ignore_errors=True)


def _send(conn: socket.socket, payload: bytes, fds: list[int] | None = None) -> None:
    message = _LENGTH.pack(len(payload)) + payload
    if fds:
        sent = socket.send_fds(conn, [message], fds)
        if sent < len(message):
            # Only what is left: a send of nothing more, once the warm process had read it all,
            # answered "ok" and closed, failed (EPIPE), and both it and the daemon ran pyspark's
            # daemon: the second one's port reached the user's terminal through the JVM's stderr.
            conn.sendall(message[sent:])
    else:
        conn.sendall(message)


def _receive(conn: socket.socket, fds: int = 0) -> tuple[bytes, list[int]]:
    """One message, and the descriptors that came with it. EOFError if the other side went,
    ValueError if it announced more than LONGEST_MESSAGE (the descriptors closed either way)."""
    data, got = bytearray(), []
    try:
        while len(data) < _LENGTH.size or len(data) < _LENGTH.size + _LENGTH.unpack_from(data)[0]:
            if len(data) >= _LENGTH.size and _LENGTH.unpack_from(data)[0] > LONGEST_MESSAGE:
                raise ValueError(f"a message of {_LENGTH.unpack_from(data)[0]} bytes announced")
            if fds and not got:
                chunk, got, _, _ = socket.recv_fds(conn, 1 << 16, fds)
            else:
                chunk = conn.recv(1 << 16)
            if not chunk:
                raise EOFError
            data += chunk
    except BaseException:
        for fd in got:
            os.close(fd)
        raise
    return bytes(data[_LENGTH.size:]), got


def _origins() -> dict:
    """Where the preloaded packages are found on this process's sys.path (nothing is imported)."""
    import importlib.util
    found = {}
    for name in PRELOADED:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        found[name] = spec.origin if spec is not None else None
    return found


def hand_over(address: str) -> bool:
    """The daemon's side: True once the warm process at ``address`` has taken this process's
    standard streams and settings and has ended; False, with nothing handed over, when there is
    no warm process, it is not ready within READY_WITHIN, or it refuses."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(READY_WITHIN)
            conn.connect(address)
            ready, _ = _receive(conn)
            pidfd = os.pidfd_open(int(ready.decode().removeprefix("ready ")))
            try:
                conn.settimeout(None)  # once the streams are sent, the answer decides who runs
                mine = {"executable": sys.executable, "flags": list(sys.flags), "argv": sys.argv,
                        "env": dict(os.environ), "cwd": os.getcwd(), "path": sys.path, "origins": _origins()}
                _send(conn, json.dumps(mine).encode(), [0, 1, 2])
                answer, _ = _receive(conn)
            except BaseException:
                os.close(pidfd)
                raise
    except (OSError, EOFError, ValueError):
        return False
    if answer != b"ok":
        os.close(pidfd)
        return False
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the JVM's pipes stay with the warm daemon alone
        os.dup2(null, fd)
    os.close(null)
    _wait(pidfd)
    return True


def _wait(pidfd: int) -> None:
    """Until the process of ``pidfd`` ends; Spark's SIGTERM (its stop of the daemon) passed on."""
    def terminate(*_):
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGTERM)
        except ProcessLookupError:
            pass  # it has ended: the loop ends too

    signal.signal(signal.SIGTERM, terminate)
    while not select.select([pidfd], [], [], 1.0)[0]:
        pass
    os.close(pidfd)


def serve(listening: int, address: str, prepare, run) -> None:
    """The warm process: runs ``prepare()`` (the imports), and waits for the daemon on the socket
    ``listening`` (bound to ``address`` by the driver) or for its stdin (the driver) to close.
    Given the daemon's place, it takes its streams and settings and runs ``run()``, pyspark's
    daemon."""
    started = startup_env(os.environ)
    listener = socket.socket(fileno=listening)
    try:
        prepare()
        if listener not in select.select([listener, 0], [], [])[0]:
            return  # the driver closed our stdin first: no daemon is coming
        conn, _ = listener.accept()
    finally:
        listener.close()
        _remove(address)
    uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
    if uid != os.getuid():
        return
    try:
        _send(conn, f"ready {os.getpid()}".encode())
        payload, fds = _receive(conn, 3)
    except (OSError, EOFError, ValueError):
        return  # the daemon gave up waiting, or said something no daemon says
    theirs = _settings_of(payload)
    refused = _refusal(theirs, started) or (None if len(fds) == 3 else "not three streams")
    try:
        _send(conn, b"no: " + refused.encode() if refused else b"ok")
    except OSError:
        refused = "the daemon went"
    if refused:
        for fd in fds:
            os.close(fd)
        return
    for target, fd in enumerate(fds):  # after "ok": the daemon waits for this process from now on
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(theirs["env"])
    os.chdir(theirs["cwd"])
    sys.path[:] = theirs["path"]
    sys.argv[:] = theirs["argv"]
    conn.close()
    run()


def _remove(address: str) -> None:
    """The socket and its private directory: one daemon at most is ever given the place."""
    for remove, path in ((os.unlink, address), (os.rmdir, os.path.dirname(address))):
        try:
            remove(path)
        except OSError:
            pass


def _settings_of(payload: bytes) -> dict | None:
    """A daemon's settings (hand_over's ``mine``) from its message, or None if it holds no such thing."""
    try:
        theirs = json.loads(payload)
    except ValueError:  # not JSON, or not UTF-8
        return None
    if not isinstance(theirs, dict):
        return None
    kinds = {"executable": str, "flags": list, "argv": list, "env": dict, "cwd": str, "path": list, "origins": dict}
    if not all(isinstance(theirs.get(name), kind) for name, kind in kinds.items()):
        return None
    texts = [*theirs["argv"], *theirs["path"], *theirs["env"].values()]  # JSON's keys are texts already
    return theirs if all(isinstance(text, str) for text in texts) else None


def _refusal(theirs: dict | None, started: dict) -> str | None:
    """Why this process cannot be the daemon described by ``theirs``, or None."""
    if theirs is None:
        return "not a daemon's settings"
    if not os.path.isdir(theirs["cwd"]):
        return "no such working directory"
    if theirs["executable"] != sys.executable or theirs["flags"] != list(sys.flags):
        return "another interpreter or its flags"
    if startup_env(theirs["env"]) != started:
        return "other start-up variables"
    for name, origin in theirs["origins"].items():
        module = sys.modules.get(name)
        if module is not None and getattr(module.__spec__, "origin", None) != origin:
            return f"{name} found elsewhere"
    return None
