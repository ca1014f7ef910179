"""Issue 30 item 5, the key log's part: a FIFO given as ``--keylog`` hung decode, validate, offsets
and sniff for ever (opening a FIFO waits for a writer; sniff even past --duration). Each command
now refuses it at once, in one line, with exit code 3; sniff whose key log becomes a FIFO while
it runs (it reads the file again when a TLS connection's keys are missing) ends at --duration.

Every run is a real kinspect process under a hang timeout; no writer ever opens the FIFO.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import subprocess
import threading
import time

import pytest

from tests.lab.kinspect_child import KINSPECT, REPO, KinspectChild
from tests.lab.pytest_fixtures import require_lab_host
from tests.unit.tls.memtls import contexts

CAPTURE = REPO / "pcaps" / "librdkafka-produce-consume.pcapng"
HANG = 60  # seconds: a refusal takes well under one
REFUSED = re.compile(r"^kinspect: --keylog .*keys\.fifo: not a regular file \(a FIFO, a socket or a device\); "
                     r"give a key-log file$")


def _run(args, timeout=HANG) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([*KINSPECT, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kinspect {' '.join(map(str, args))} hung (more than {timeout} s)")


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "keys.fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("command", [
    ["decode", str(CAPTURE)],
    ["decode", "--json", "-j2", str(CAPTURE)],
    ["validate", str(CAPTURE)],
    ["offsets", "--capture", str(CAPTURE)],
    ["sniff", "lo", "--duration", "2"],
])
def test_a_fifo_as_keylog_is_refused_at_once(command, fifo):
    done = _run([*command, "--keylog", str(fifo)])
    assert done.returncode == 3, done.stderr
    assert REFUSED.match(done.stderr.strip()) and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_fifo_among_key_logs_is_refused_and_a_good_one_is_not_enough(fifo, tmp_path):
    good = tmp_path / "keys.log"
    good.write_text(f"CLIENT_RANDOM {'ab' * 32} {'cd' * 48}\n")
    done = _run(["decode", str(CAPTURE), "--keylog", str(good), "--keylog", str(fifo)])
    assert done.returncode == 3 and REFUSED.match(done.stderr.strip()), done.stderr


def _tls_conversation(port: int, work) -> None:
    """One real TLS 1.3 connection on lo: the client says hello, the server answers; the key log
    is not written anywhere kinspect reads (its keys are missing, so kinspect looks again)."""
    client_ctx, server_ctx = contexts(work, work / "unread-keys.log")
    listener = socket.create_server(("127.0.0.1", port))

    def serve():
        raw, _ = listener.accept()
        with server_ctx.wrap_socket(raw, server_side=True) as tls:
            tls.sendall(tls.recv(100) + b" back")

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    with client_ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)),
                                server_hostname="kafka.example") as tls:
        tls.sendall(b"hello")
        assert tls.recv(100) == b"hello back"
    server.join(10)
    listener.close()


def test_sniff_whose_key_log_becomes_a_fifo_ends_at_its_duration(tmp_path):
    """The key log does not exist when sniff starts (a client will write it); a FIFO appears in
    its place; a TLS connection's keys are missing, so sniff reads the key log again: it must
    not block there, and ends at --duration."""
    require_lab_host()
    keylog = tmp_path / "sslkeys.log"
    port = 19443
    sniff = KinspectChild("sniff", ["lo", "--backend", "ring", "--filter", f"tcp port {port}", "--keylog",
                                    str(keylog), "--json", "--duration", "4"],
                          re.compile(r"kinspect: capturing on ")).start()
    os.mkfifo(keylog)
    started = time.monotonic()
    _tls_conversation(port, tmp_path)
    try:
        code, out = sniff.wait(HANG)
    except subprocess.TimeoutExpired:
        sniff.process.kill()
        pytest.fail("sniff did not end at --duration: it blocked reading the FIFO")
    assert code == 1, "\n".join(sniff.stderr)  # 1: no Kafka found (the connection held none)
    assert time.monotonic() - started < HANG and "Traceback" not in "\n".join(sniff.stderr)
    assert '"tls_no_keys"' in out  # the connection was seen, its keys looked for, and reported
