"""The proxy's decoder with the schema stage: the confluent-kafka capture's connections replayed
through a real `kinspect proxy` to a loopback server that answers each with the broker's recorded
bytes; every value the proxy writes decodes as it was serialized, learnt from the traffic."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading

import pytest

from tests.unit.proxy.streams import connections
from tests.unit.schemas.fixtures import CAPTURE, ROOT, json_lines
from tests.unit.schemas.test_stage import _assert_decoded


BROKER_PORT = 36065  # the lab broker's, in the capture


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _read(sock, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            break
        got += chunk
    return got


def _replay(conns, proxy_port: int, server: socket.socket) -> None:
    """Each recorded connection in turn: the client's bytes through the proxy, then the broker's
    recorded answer, then both ends closed."""
    for conn in conns:
        with socket.create_connection(("127.0.0.1", proxy_port), timeout=20) as client:
            client.sendall(conn["client"])
            upstream, _ = server.accept()
            with upstream:
                upstream.settimeout(20)
                _read(upstream, len(conn["client"]))
                upstream.sendall(conn["server"])
            while client.recv(65536):
                pass


def test_the_proxy_decodes_every_value_learning_the_schemas_from_the_traffic():
    conns = [c for c in connections(str(CAPTURE), BROKER_PORT).values() if c["client"]]
    assert conns
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(30)
    port = _free_port()
    proxy = subprocess.Popen([sys.executable, "-m", "kinspect", "proxy", "--listen", f"127.0.0.1:{port}",
                              "--upstream", f"127.0.0.1:{server.getsockname()[1]}", "--no-rewrite", "--json",
                              "--show-secrets", "--pending-timeout", "2"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(2):
            line = proxy.stderr.readline()
            if b"listening on" in line:
                break
        worker = threading.Thread(target=_replay, args=(conns, port, server))
        worker.start()
        worker.join(120)
        assert not worker.is_alive()
        proxy.send_signal(signal.SIGTERM)
        stdout, stderr = proxy.communicate(timeout=60)
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait()
        server.close()
    _assert_decoded(stdout.decode())
