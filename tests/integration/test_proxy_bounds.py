"""The proxy's descriptors are bounded (issue 30, item 6), against a real proxy process and real
client sockets. A real broker cannot name 100,000 brokers, so a small real server answers with
crafted Metadata (tests/unit/proxy/crafted.py). The proxy runs under a low open-file limit
(prlimit: soft 64, hard 512), so that what used to exhaust 20,000 descriptors shows at once.

Before: the soft limit stayed as it was given (at 1,024, only about half of 1,000 concurrent
clients were served); a Metadata response naming 100,000 brokers opened a listener for each until
no descriptor was left (then refused every client), printed a line for each, and its listeners were
never closed.
"""

from __future__ import annotations

import os
import re
import selectors
import socket
import struct
import time

import pytest

from tests.integration.test_proxy_lab import LISTENING, free_base
from tests.lab.kinspect_child import KinspectChild
from tests.unit.proxy.crafted import (CraftedBroker, cluster_brokers, describe_cluster_request, metadata_brokers,
                                     metadata_request, read_frame)

SOFT, HARD = 64, 512
RELAYS = {"c-pump": {}, "asyncio": {"KINSPECT_PURE_PYTHON": "1"}}
OPEN_FILES = re.compile(r"open files: limit ([\d,]+) \(raised from ([\d,]+)\), room for about ([\d,]+) concurrent "
                        r"clients \(2 descriptors each\) beside ([\d,]+) broker listeners")


class LimitedProxy(KinspectChild):
    """kinspect proxy under an open-file limit of SOFT (soft) and HARD (hard)."""

    def __init__(self, args, env=None, limits=(SOFT, HARD)):
        super().__init__("proxy", args, LISTENING, env, prefix=("prlimit", f"--nofile={limits[0]}:{limits[1]}", "--"))

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def line(self, pattern: re.Pattern) -> re.Match:
        assert self.log_has(pattern.pattern), "\n".join(self.stderr)
        return next(m for line in self.stderr if (m := pattern.search(line)))


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _api_versions(correlation_id: int) -> bytes:
    from kinspect.wire.encode import encode_request
    return encode_request(18, 0, correlation_id, "honest", {})


def _all_answered(socks: list[socket.socket], timeout: float = 60) -> int:
    """Each socket has sent one ApiVersions request: how many got their whole answer."""
    selector = selectors.DefaultSelector()
    buffers = {}
    for s in socks:
        s.setblocking(False)
        selector.register(s, selectors.EVENT_READ)
        buffers[s] = b""
    answered = 0
    deadline = time.monotonic() + timeout
    while selector.get_map() and time.monotonic() < deadline:
        for key, _ in selector.select(1):
            s = key.fileobj
            try:
                chunk = s.recv(65536)
            except OSError:
                chunk = b""
            buffers[s] += chunk
            data = buffers[s]
            if len(data) >= 4 and len(data) >= 4 + struct.unpack_from(">i", data)[0]:
                answered += 1
                selector.unregister(s)
            elif not chunk:
                selector.unregister(s)
    return answered


@pytest.mark.parametrize("relay", sorted(RELAYS))
def test_100000_brokers_leave_room_for_clients_and_listeners_close_when_brokers_leave(relay):
    with CraftedBroker() as broker:
        broker.brokers = [(n, "127.0.0.1", broker.address[1]) for n in range(100_000)]
        base = free_base()
        proxy = LimitedProxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json"],
                             env=RELAYS[relay]).start()
        try:
            # the soft limit was raised to the hard one, and the start says what it allows
            limit, before, clients, listeners = map(_number, proxy.line(OPEN_FILES).groups())
            assert (limit, before) == (HARD, SOFT)
            assert listeners < 1000 and clients >= 150, (clients, listeners)
            assert proxy.log_has(rf"warning: the open-file limit \(512\) leaves room for {listeners} broker "
                                 rf"listeners, not --max-brokers 1,000")

            metadata = socket.create_connection(("127.0.0.1", base), timeout=60)
            metadata.sendall(metadata_request(1))
            named = metadata_brokers(read_frame(metadata))
            assert len(named) == 100_000
            rewritten = [(n, port) for n, host, port in named if port != broker.address[1]]
            assert rewritten == [(n, base + 1 + n) for n in range(listeners)]  # node 0 included
            assert proxy.descriptors() < HARD - 2 * 150

            # DescribeCluster names 50 more: no room (it says nothing of who left, unlike Metadata)
            newcomers = range(listeners, listeners + 50)
            broker.cluster_brokers = [(n, "127.0.0.1", broker.address[1]) for n in newcomers]
            metadata.sendall(describe_cluster_request(2))
            assert {port for _, _, port in cluster_brokers(read_frame(metadata))} == {broker.address[1]}
            assert proxy.log_has(r"warning: more brokers named than --max-brokers \(\d+\) allows at once: broker "
                                 rf"{listeners} ")

            # honest clients are all served meanwhile, at the bootstrap and through broker 7
            through_7 = socket.create_connection(("127.0.0.1", base + 1 + 7), timeout=30)
            socks = [socket.create_connection(("127.0.0.1", base), timeout=30) for _ in range(150)]
            for i, s in enumerate([through_7, *socks]):
                s.sendall(_api_versions(i))
            assert _all_answered([through_7, *socks]) == 151

            # the cluster shrinks to brokers 0, 1 and 3: the other listeners close, and the
            # connection through broker 7 goes on
            broker.brokers = [(n, "127.0.0.1", broker.address[1]) for n in (0, 1, 3)]
            metadata.sendall(metadata_request(3))
            assert metadata_brokers(read_frame(metadata)) == [(n, "127.0.0.1", base + 1 + n) for n in (0, 1, 3)]
            assert proxy.log_has(r"broker 7 left the metadata: its listener on port \d+ is closed "
                                 r"\(1 connections through it go on\)")
            for s in socks:
                s.close()
            deadline = time.monotonic() + 30
            while proxy.descriptors() > 40 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert proxy.descriptors() <= 40, proxy.descriptors()
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", base + 1 + 7), timeout=10).close()
            through_7.setblocking(True)
            through_7.sendall(_api_versions(99))
            assert struct.unpack_from(">i", read_frame(through_7), 4)[0] == 99
            with socket.create_connection(("127.0.0.1", base + 1 + 3), timeout=10) as through_3:
                through_3.sendall(_api_versions(3))
                assert struct.unpack_from(">i", read_frame(through_3), 4)[0] == 3
            through_7.close()
            # now there is room for the newcomers
            metadata.sendall(describe_cluster_request(4))
            assert cluster_brokers(read_frame(metadata)) == [(n, "127.0.0.1", base + 1 + n) for n in newcomers]
            metadata.close()
        finally:
            code, out = proxy.stop()
    assert code == 0, "\n".join(proxy.stderr[-30:])
    log = proxy.stderr
    assert not any("Traceback" in line for line in log)
    # warnings folded: said once, counted at the end; listener lines folded per response
    assert sum("warning" in line for line in log) <= 6, [line for line in log if "warning" in line]
    assert any(re.search(r"warning: a Metadata response named 100,000 brokers, more than --max-brokers", line)
               for line in log)
    assert sum(bool(re.search(r"broker \d+ .*listens on", line)) for line in log) == 20  # 10 a response
    assert any(re.search(rf"\.\.\. and {listeners - 10} more lines like these", line) for line in log)
    assert any(re.search(r"\.\.\. and 40 more lines like these", line) for line in log)
    assert len(log) < 2 * 153 + 50, len(log)  # each connection's two lines, and a few more
