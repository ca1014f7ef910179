"""TLS clients, and a TLS broker, through a real proxy process (issue 30, item 12): asyncio's
TLS transport cannot stay half open, and the relay's answer to a peer's end of stream ("keep the
link open for the other direction") made asyncio print "returning true from eof_received() has no
effect when using ssl" once per TLS client. Every way a TLS peer ends is tried: close_notify
then close, a bare TCP close, a TCP half-close; and a TLS broker that ends the connection itself.
stderr must hold no such line, and each link says who closed it.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time

import pytest

from kinspect.wire.encode import encode_request
from tests.integration.test_proxy_lab import Proxy, free_base
from tests.lab.certs import CertificateAuthority
from tests.unit.proxy.crafted import CraftedBroker, read_frame

ENDINGS = ("close_notify", "tcp_close", "half_close")


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return CertificateAuthority(tmp_path_factory.mktemp("certs"))


def _client(ca, port: int, correlation_id: int, ending: str) -> None:
    context = ssl.create_default_context(cafile=str(ca.cert))
    s = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30), server_hostname="127.0.0.1")
    s.sendall(encode_request(18, 0, correlation_id, "tls-client", {}))
    assert struct.unpack_from(">i", read_frame(s), 4)[0] == correlation_id
    if ending == "close_notify":
        s.unwrap().close()
    elif ending == "tcp_close":
        s.close()
    else:
        s.shutdown(socket.SHUT_WR)
        time.sleep(0.1)
        s.close()


def _quiet(proxy, clients: int) -> None:
    assert proxy.log_has(rf"#{clients} .* closed by")
    log = "\n".join(proxy.stderr)
    assert "eof_received" not in log, log
    assert "Traceback" not in log, log


def test_tls_clients_ending_every_way_leave_no_asyncio_warning(ca):
    leaf = ca.issue("proxy", ["127.0.0.1", "localhost"])
    with CraftedBroker() as broker:
        base = free_base()
        proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json",
                       "--listen-tls", str(leaf.cert), str(leaf.key)]).start()
        try:
            for i in range(9):
                _client(ca, base, i + 1, ENDINGS[i % 3])
            _quiet(proxy, 9)
        finally:
            code, _ = proxy.stop()
    assert code == 0
    closes = [line for line in proxy.stderr if " closed by " in line]
    assert len(closes) == 9 and all("closed by client" in line for line in closes), closes


def test_a_tls_broker_that_ends_each_connection_leaves_no_asyncio_warning(ca):
    leaf = ca.issue("broker", ["127.0.0.1", "localhost"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(leaf.cert, leaf.key)
    with CraftedBroker(ssl=context, close_after_answer=True) as broker:
        base = free_base()
        proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json",
                       "--upstream-ca", str(ca.cert)]).start()
        try:
            for i in range(5):
                with socket.create_connection(("127.0.0.1", base), timeout=30) as s:
                    s.sendall(encode_request(18, 0, i + 1, "plain-client", {}))
                    assert struct.unpack_from(">i", read_frame(s), 4)[0] == i + 1
                    assert s.recv(10) == b""  # the broker's end reached the client
            _quiet(proxy, 5)
        finally:
            code, _ = proxy.stop()
    assert code == 0
    closes = [line for line in proxy.stderr if " closed by " in line]
    assert len(closes) == 5 and all("closed by broker" in line for line in closes), closes
