"""The warm daemon (kinspect/spark/warm.py), with real processes: a warm process started as the
driver starts it, and a daemon started as Spark's JVM starts it (``python -m
kinspect.spark.daemon pyspark.worker``, its stdin and stdout pipes held here as the JVM holds
them). pyspark's daemon protocol is then spoken as the JVM speaks it: the port from its stdout,
a connection that forks a worker and answers with the worker's pid, stdin closed to end it."""

import os
import select
import signal
import socket
import struct
import subprocess
import sys

import pytest

from kinspect.spark import warm

DAEMON_ENV = {"PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "YES", "OMP_NUM_THREADS": "1", "PYTHONSAFEPATH": "1"}
WITHIN = 60  # seconds: the imports of a cold machine


@pytest.fixture
def warm_process():
    started = []

    def start(env=DAEMON_ENV):
        process = warm.Warm.start(env)
        started.append(process)
        return process
    yield start
    for process in started:
        process.close(wait=WITHIN)


def _daemon(address: str, env: dict = DAEMON_ENV) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kinspect.spark.daemon", "pyspark.worker"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **env, warm.ENV: address})


def _worker_parent(daemon: subprocess.Popen) -> int:
    """The parent of a worker the daemon forks: the process that serves the daemon's port."""
    assert select.select([daemon.stdout], [], [], WITHIN)[0], "the daemon never wrote its port"
    port = struct.unpack("!i", daemon.stdout.read(4))[0]
    with socket.create_connection(("127.0.0.1", port), timeout=WITHIN) as conn:
        pid = struct.unpack("!i", conn.recv(4))[0]
        with open(f"/proc/{pid}/stat") as f:
            parent = int(f.read().rsplit(")", 1)[1].split()[1])
    return parent


def _end(daemon: subprocess.Popen) -> None:
    daemon.stdin.close()  # the JVM's way to end the daemon; pyspark's exits 1 then (its finally)
    daemon.wait(WITHIN)


def test_the_warm_process_becomes_the_daemon_and_ends_with_it(warm_process):
    process = warm_process()
    daemon = _daemon(process.address)
    assert _worker_parent(daemon) == process.process.pid
    _end(daemon)
    process.process.wait(WITHIN)  # ended with the daemon
    assert not os.path.exists(process.address)


def test_spark_stopping_the_daemon_with_sigterm_stops_the_warm_process(warm_process):
    process = warm_process()
    daemon = _daemon(process.address)
    assert _worker_parent(daemon) == process.process.pid
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(WITHIN)
    process.process.wait(WITHIN)


def test_a_warm_process_started_unlike_the_daemon_refuses_and_the_daemon_runs_itself(warm_process):
    process = warm_process({**DAEMON_ENV, "PYTHONHASHSEED": "1"})  # string hashes unlike the workers'
    daemon = _daemon(process.address)
    assert _worker_parent(daemon) == daemon.pid
    assert process.process.wait(WITHIN) == 0  # refused, and gone
    _end(daemon)


def test_the_warm_process_imports_nothing_from_the_drivers_working_directory(warm_process, tmp_path,
                                                                            monkeypatch):
    """Started from a directory that holds a pandas.py, even for a daemon whose variables lack
    PYTHONSAFEPATH: the warm process imports the installed pandas (and then refuses that daemon,
    whose flags differ from its own)."""
    marker = tmp_path / "imported"
    (tmp_path / "pandas.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    unsafe = {k: v for k, v in DAEMON_ENV.items() if k != "PYTHONSAFEPATH"}
    process = warm_process(unsafe)
    daemon = _daemon(process.address, unsafe)
    assert _worker_parent(daemon) == daemon.pid
    assert process.process.wait(WITHIN) == 0
    _end(daemon)
    assert not marker.exists()


# A daemon as Spark starts it, but slow past its send of the streams: it goes on only once the warm
# process has read everything, answered and closed the connection (what a loaded machine did in
# 3 runs of 16)
SLOW_DAEMON = """
import select, socket, sys
real = socket.send_fds
def send_fds(sock, buffers, fds, *args):
    sent = real(sock, buffers, fds, *args)
    poller = select.poll()
    poller.register(sock, select.POLLRDHUP)
    poller.poll(60_000)
    return sent
socket.send_fds = send_fds
from kinspect.spark import daemon
sys.argv[:] = [daemon.__file__, "pyspark.worker"]
daemon.main(sys.argv)
"""


def test_one_port_only_reaches_the_jvm_when_the_warm_process_answers_before_the_daemon_goes_on(warm_process):
    """The JVM reads a port from the daemon's stdout, then copies the rest to its stderr: the
    user's terminal. A daemon that failed a send of nothing after the warm process had closed ran
    pyspark's daemon itself, as the warm process did: two ports, and 4 binary bytes on the terminal."""
    process = warm_process()
    daemon = subprocess.Popen([sys.executable, "-c", SLOW_DAEMON], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env={**os.environ, **DAEMON_ENV, warm.ENV: process.address})
    assert _worker_parent(daemon) == process.process.pid
    daemon.stdin.close()  # the JVM's way to end the daemon
    assert daemon.stdout.read() == b""  # to the end of every writer: no second port
    daemon.wait(WITHIN)
    process.process.wait(WITHIN)


def test_without_a_warm_process_the_daemon_runs_itself(tmp_path):
    daemon = _daemon(str(tmp_path / "nobody.sock"))
    assert _worker_parent(daemon) == daemon.pid
    _end(daemon)


def test_a_warm_process_no_daemon_came_for_ends_when_the_driver_closes_it(warm_process):
    process = warm_process()
    process.close(wait=WITHIN)
    assert process.process.returncode == 0
    assert not os.path.exists(process.directory)


def test_startup_env_keeps_what_the_interpreter_and_imports_read_and_not_sparks_settings():
    env = {"PYTHONHASHSEED": "0", "PYTHONPATH": "/a", "PYTHON_WORKER_FACTORY_SECRET": "s",
           "OMP_NUM_THREADS": "1", "ARROW_DEFAULT_MEMORY_POOL": "system", "SPARK_REUSE_WORKER": "1"}
    assert warm.startup_env(env) == {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1",
                                     "ARROW_DEFAULT_MEMORY_POOL": "system"}


def _as_a_daemon(process) -> socket.socket:
    """A connection to the warm process, past its "ready"."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(WITHIN)
    conn.connect(process.address)
    ready, _ = warm._receive(conn)
    assert ready == f"ready {process.process.pid}".encode()
    return conn


def test_a_lying_length_ends_the_warm_process_at_once_without_waiting_for_the_bytes(warm_process):
    """4 GiB announced, 3 bytes sent, the connection left open: the warm process does not wait
    for (or hold) the rest, and takes no one's place."""
    process = warm_process()
    with _as_a_daemon(process) as conn:
        conn.sendall(struct.pack(">I", 0xFFFFFFFF) + b"abc")
        assert process.process.wait(WITHIN) == 0  # while the connection is still open


@pytest.mark.parametrize("payload", [b"\xff\xfe not UTF-8", b"[1, 2]", b'{"executable": 3}',
                                     b'{"executable": "", "flags": [], "argv": [], "env": {"A": 1}, "cwd": "/",'
                                     b' "path": [], "origins": {}}'])
def test_settings_no_daemon_sends_are_refused(warm_process, payload):
    """Not JSON, not an object, a field of another kind, an environment value that is no text:
    refused (before, a KeyError or TypeError ended the process with a traceback)."""
    process = warm_process()
    read, write = os.pipe()
    with _as_a_daemon(process) as conn:
        warm._send(conn, payload, [read, write, write])
        answer, _ = warm._receive(conn)
    os.close(read)
    os.close(write)
    assert answer == b"no: not a daemon's settings"
    assert process.process.wait(WITHIN) == 0
