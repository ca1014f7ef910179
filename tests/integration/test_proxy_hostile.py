"""The proxy attacked as an adversary would (issue 30: "examples of classes"), through a real proxy
process with real client sockets, and a small real server where a broker cannot be made to answer
so (tests/unit/proxy/crafted.py). Each case runs on the C pump and on the asyncio links.

- A Metadata response naming brokers no client could reach: ports 0, -1 and 70000, a 30,000
  character host, a host with a 64-character label, a NUL, bytes that are not UTF-8. Before, the
  proxy opened a listener for most of them, and a client connecting through one left the link's
  task dying with a traceback (OverflowError from connect, UnicodeError from getaddrinfo) and the
  client waiting for ever. Now they reach clients as the broker gave them, with one folded warning,
  while a broker on port 65535 and one whose host holds a terminal escape get listeners, and a
  client through them is closed with one line saying why.
- A response length of 2 GiB, for a Metadata response the proxy would hold: it passes as it comes
  (it does not fit --max-held-mb), warned once, and the proxy serves the next client.
- Requests nobody answers, from many connections: the relay's memory for them is bounded over all
  connections, not per connection.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from kinspect.wire.encode import encode_request
from tests.integration.test_proxy_lab import Proxy, free_base
from tests.unit.proxy.crafted import CraftedBroker, metadata_request, read_frame

RELAYS = {"c-pump": {}, "asyncio": {"KINSPECT_PURE_PYTHON": "1"}}
WAIT = 20  # seconds a client waits for the proxy's answer or its close: a hang fails


def _metadata_raw(frame: bytes) -> list[tuple[int, bytes, int]]:
    """(node id, host bytes, port) of a Metadata v12 response, read by hand (a host need not be
    UTF-8)."""
    pos = 4 + 4 + 1 + 4  # size, correlation id, header tags, throttle
    count, pos = frame[pos] - 1, pos + 1  # under 127 brokers: a one-byte compact length
    out = []
    for _ in range(count):
        (node,) = struct.unpack_from(">i", frame, pos)
        n = frame[pos + 4] - 1 if frame[pos + 4] < 0x80 else (frame[pos + 4] & 0x7F | frame[pos + 5] << 7) - 1
        at = pos + 5 + (frame[pos + 4] >= 0x80) + (frame[pos + 4] >= 0x80 and frame[pos + 5] >= 0x80)
        host = frame[at:at + n]
        (port,) = struct.unpack_from(">i", frame, at + n)
        pos = at + n + 4 + 1 + 1  # rack (null), tags (none)
        out.append((node, host, port))
    return out


def _ends_cleanly(port: int) -> str:
    """Connect, send a request: the proxy answers or closes; it never leaves the client waiting."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(encode_request(18, 0, 1, "hostile", {}))
        try:
            return "answered" if s.recv(100) else "closed"
        except ConnectionResetError:
            return "closed"


@pytest.mark.parametrize("relay", sorted(RELAYS))
def test_broker_addresses_no_client_could_reach_get_no_listener_and_no_client_waits(relay):
    unreachable = [(1, "127.0.0.1", 0), (2, "127.0.0.1", -1), (3, "127.0.0.1", 70000), (4, "h" * 30000, 9092),
                   (5, "a" * 64 + ".example", 9092), (6, "bad\x00host", 9092), (7, b"\xff\xfe bad", 9092)]
    odd_but_valid = [(0, "127.0.0.1", 65535), (8, "\x1b[31mred", 9092)]
    with CraftedBroker(brokers=odd_but_valid + unreachable) as broker:
        base = free_base()
        proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json"],
                      env=RELAYS[relay]).start()
        try:
            with socket.create_connection(("127.0.0.1", base), timeout=WAIT) as s:
                s.sendall(metadata_request(1))
                named = _metadata_raw(read_frame(s))
            given = {node: (host, port) for node, host, port in named}
            assert given[0] == (b"127.0.0.1", base + 1) and given[8] == (b"127.0.0.1", base + 1 + 8)
            for node, host, port in unreachable:  # as the broker gave them
                assert given[node] == (host.encode() if isinstance(host, str) else host, port), node
            # through the two that got a listener: the proxy cannot reach them, and says so
            assert _ends_cleanly(base + 1) == "closed"
            assert _ends_cleanly(base + 1 + 8) == "closed"
            for node, _, _ in unreachable:  # no listener
                with pytest.raises(ConnectionRefusedError):
                    socket.create_connection(("127.0.0.1", base + 1 + node), timeout=WAIT).close()
            assert proxy.log_has(r"#2 .*cannot connect to broker 0 127\.0\.0\.1:65535: .*; closing the client")
            assert proxy.log_has(r"#3 .*cannot connect to broker 8 \\x1b\[31mred:9092: .*; closing the client")
        finally:
            code, _ = proxy.stop()
    assert code == 0
    log = "\n".join(proxy.stderr)
    assert "Traceback" not in log and "\x1b" not in log, log
    assert sum("gave an address no client could reach" in line for line in proxy.stderr) == 1
    # the one not UTF-8 is not even read as a name: the others, once each
    assert any(f"{len(unreachable) - 2} more brokers with an address no client could reach" in line
               for line in proxy.stderr)
    assert max(map(len, proxy.stderr)) < 1000  # the 30,000-character host is cut in the log


@pytest.mark.parametrize("relay", sorted(RELAYS))
def test_a_response_length_of_2_gib_passes_unheld_and_the_proxy_goes_on(relay):
    with CraftedBroker() as broker:
        broker.raw[3] = lambda version, correlation_id: struct.pack(">ii", 0x7FFFFFFF, correlation_id) + b"x" * 1000
        base = free_base()
        proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json"],
                      env=RELAYS[relay]).start()
        try:
            with socket.create_connection(("127.0.0.1", base), timeout=WAIT) as s:
                s.sendall(metadata_request(5))
                got = b""
                while chunk := s.recv(65536):
                    got += chunk
            assert got == struct.pack(">ii", 0x7FFFFFFF, 5) + b"x" * 1000  # as it came, then the broker's end
            assert proxy.log_has(r"warning: a response \(API key 3 v12\) of 2147483651 bytes did not fit in "
                                 r"--max-held-mb")
            with socket.create_connection(("127.0.0.1", base), timeout=WAIT) as s:  # the next client is served
                s.sendall(encode_request(18, 0, 9, "next", {}))
                assert struct.unpack_from(">i", read_frame(s), 4)[0] == 9
        finally:
            code, out = proxy.stop()
    assert code == 0
    assert "Traceback" not in "\n".join(proxy.stderr)


def _cpu_ticks(pid: int) -> int:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@pytest.mark.parametrize("relay", sorted(RELAYS))
def test_requests_nobody_answers_cost_the_relay_bounded_memory_over_all_connections(relay):
    """40 clients each send 70,000 requests to a broker that reads them all and answers none. The
    relay follows each request until its answer: before, up to 65,536 per connection at 130 bytes
    each (8.5 MB per connection, 340 MB here); now at most 262,144 over all connections."""
    from tests.integration.test_proxy_lab import _rss_kb

    requests = b"".join(encode_request(16, 0, i, "c", {}) for i in range(70_000))
    with CraftedBroker(sink=True) as broker:
        base = free_base()
        proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--no-decode", "--quiet"],
                      env=RELAYS[relay]).start()
        try:
            before = _rss_kb(proxy.process.pid)
            clients = []
            for _ in range(40):
                clients.append(socket.create_connection(("127.0.0.1", base), timeout=WAIT))
                clients[-1].sendall(requests)
            deadline = time.monotonic() + 300
            while broker.received < 40 * len(requests) and time.monotonic() < deadline:
                time.sleep(0.2)
            while time.monotonic() < deadline:  # until the relay has followed every request
                ticks = _cpu_ticks(proxy.process.pid)
                time.sleep(1)
                if _cpu_ticks(proxy.process.pid) - ticks < 5:
                    break
            grown = _rss_kb(proxy.process.pid) - before
            for s in clients:
                s.close()
        finally:
            code, _ = proxy.stop()
    assert broker.received == 40 * len(requests)
    assert code == 0
    assert grown < 150 << 10, f"{grown >> 10} MB"
