"""A Python that has imported kinspect once and forks a child for each run of the hostile matrix.

Each run is still a process of its own, as `python -m kinspect` would be: its own session, its own
address-space limit, its own stdin, stdout and stderr (passed over the socket), its exit status and
resource usage read by wait4() (here, its parent) and sent back. What the fork saves is Python's
start and the import of kinspect (about 0.3 s of CPU of every run, 439 runs): the child runs
kinspect's __main__ as `-m` does, with sys.stdout and sys.stderr made afresh for the new
descriptors, and ends through Python's own exit.

What differs from a fresh process: the imported modules' pages are shared with the server until
written, so a child's PSS counts half of them (its RSS, which the matrix judges, counts them all),
and modules the command would not import (those of the four commands the matrix runs) are loaded.

Run as a script: ``python forkserver.py SOCKET``; the client is ``ForkServer``.
"""

from __future__ import annotations

import array
import io
import os
import pickle
import selectors
import socket
import struct
import subprocess
import sys
import time

PRELOAD = ("kinspect.cli", "kinspect.cli.decode", "kinspect.cli.validate", "kinspect.cli.dump",
           "kinspect.cli.offsets")
_RESULT = struct.Struct("<iddq")  # wait status, user and system CPU seconds, ru_maxrss (KiB)
_MESSAGE = 1 << 20


class ForkServer:
    """The client: starts the server and runs each command through it (``launch``)."""

    def __init__(self, directory: str, env: dict, cwd: str | None = None) -> None:
        self.address = os.path.join(directory, "forkserver.sock")
        self.env = env
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), self.address],
                                     stdin=subprocess.DEVNULL, env=env, cwd=cwd)
        deadline = time.monotonic() + 60
        while not os.path.exists(self.address):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the fork server did not start (exit {self.proc.poll()})")
            time.sleep(0.02)

    def launch(self, args: list, stdin: int, stdout: int, stderr: int, cwd: str | None,
               limits: tuple | None) -> Launched:
        """Start `python -m kinspect ARGS` in a forked child; ``limits``: (RLIMIT_AS bytes) or None."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        conn.connect(self.address)
        request = pickle.dumps({"args": [os.fsdecode(a) for a in args], "cwd": cwd, "env": self.env,
                                "limits": limits})
        conn.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [stdin, stdout, stderr]))])
        pid = int(conn.recv(64))
        return Launched(pid, conn)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()
        try:
            os.unlink(self.address)
        except FileNotFoundError:
            pass


class Launched:
    """One child of the server: its pid, and its end (wait status and usage) when it ends."""

    def __init__(self, pid: int, conn: socket.socket) -> None:
        self.pid, self._conn = pid, conn

    def wait(self) -> tuple[int, float, float, int]:
        """(wait status, user CPU, system CPU, peak RSS in bytes), once the child has ended."""
        data = self._conn.recv(_RESULT.size)
        self._conn.close()
        if len(data) != _RESULT.size:
            raise RuntimeError("the fork server went away before the run ended")
        status, user, system, maxrss = _RESULT.unpack(data)
        return status, user, system, maxrss * 1024


def _serve(address: str):
    """Accept runs until terminated; returns only in a forked child, its request's arguments set up."""
    for module in PRELOAD:
        __import__(module)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address + ".new")
    listener.listen(16)
    os.rename(address + ".new", address)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj is listener:
                conn, _ = listener.accept()
                request, fds = _receive(conn)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    conn.close()
                    _become(request, fds)
                    return
                for fd in fds:
                    os.close(fd)
                conn.send(str(pid).encode())
                pidfd = os.pidfd_open(pid)
                selector.register(pidfd, selectors.EVENT_READ, (pid, conn))
            else:
                pid, conn = key.data
                selector.unregister(key.fileobj)
                os.close(key.fileobj)
                _, status, usage = os.wait4(pid, 0)
                try:
                    conn.send(_RESULT.pack(status, usage.ru_utime, usage.ru_stime, usage.ru_maxrss))
                except OSError:  # the client went away
                    pass
                conn.close()


def _receive(conn: socket.socket):
    fds = array.array("i")
    data, ancillary, _, _ = conn.recvmsg(_MESSAGE, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    return pickle.loads(data), list(fds)


def _become(request: dict, fds: list[int]) -> None:
    """In the child: what `python -m kinspect ARGS` would be, in its own session and limits."""
    import resource
    os.setsid()
    if request["limits"] is not None:
        (address_space,) = request["limits"]
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    if request["cwd"]:
        os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    encoding, errors = sys.stdout.encoding, sys.stdout.errors
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "rb", closefd=False)),
                                                 encoding=encoding, errors=errors)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "wb", closefd=False)),
                                                   encoding=encoding, errors=errors,
                                                   line_buffering=os.isatty(1))
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "wb", closefd=False)),
                                                   encoding=encoding, errors="backslashreplace",
                                                   line_buffering=True)
    sys.path[0] = os.getcwd()  # as -m sets it
    sys.argv = ["-m", *request["args"]]


if __name__ == "__main__":
    _serve(sys.argv[1])
    import runpy
    runpy._run_module_as_main("kinspect", alter_argv=True)
